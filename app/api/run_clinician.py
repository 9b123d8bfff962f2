"""The clinician's part of the run page, on top: who and where the decision is about, the
decision (or why there is none) with the cards the EHR showed and the actions they suggest, a
generated narration, why (the proof as labelled statements, ``app.clinical_text``), the data
used with its dates, the inputs that were not complete, what was refused and what was written
to the EHR, in plain words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import tzinfo
from typing import Any

from markupsafe import Markup
from pydantic import ValidationError

from app.api.run_inputs import inputs_view
from app.api.run_trace import narrations
from app.api.run_view import RunPage, cells, display_name, escaped, markup, ran_at
from app.clinical_text import (
    Item,
    base_facts,
    format_time,
    proof_items,
    source_text,
    statement,
)
from app.fhir_json import resources_of
from app.runtime.documents import Undecided

__all__ = ["clinician_view"]


def _find(resources: Iterable[Mapping[str, Any]], kind: str, rid: Any) -> Mapping[str, Any] | None:
    for r in resources:
        if r.get("resourceType") == kind and (rid is None or str(r.get("id")) == str(rid)):
            return r
    return None


def _person_name(patient: Mapping[str, Any]) -> str:
    for name in patient.get("name") or []:
        if not isinstance(name, Mapping):
            continue
        if name.get("text"):
            return str(name["text"])
        given = " ".join(str(g) for g in name.get("given") or [])
        text = f"{given} {name.get('family') or ''}".strip()
        if text:
            return text
    return ""


def _concept(value: Any) -> str:
    """A CodeableConcept or Coding as a reader names it: its text, a display, else a code."""
    if not isinstance(value, Mapping):
        return ""
    if value.get("text"):
        return str(value["text"])
    codings = value.get("coding") if "coding" in value else [value]
    for c in codings or []:
        if isinstance(c, Mapping) and (c.get("display") or c.get("code")):
            return str(c.get("display") or c.get("code"))
    return ""


def _context_rows(page: RunPage, zone: tzinfo) -> list[tuple[str, str]]:
    """Who and where the decision is about: the patient and encounter the hook named."""
    context = page.context
    found = [r for v in (*page.prefetch.values(), *context.values()) for r in resources_of(v)]
    rows: list[tuple[str, str]] = []
    patient_id = context.get("patientId") or page.patient
    if patient_id:
        patient = _find(found, "Patient", patient_id)
        parts = []
        if patient is not None:
            parts = [
                _person_name(patient),
                str(patient.get("gender") or ""),
                f"born {format_time(patient['birthDate'], zone)}"
                if patient.get("birthDate")
                else "",
            ]
        parts.append(f"Patient/{patient_id}")
        rows.append(("Patient", " · ".join(escaped(p) for p in parts if p)))
    encounter_id = context.get("encounterId")
    if encounter_id:
        encounter = _find(found, "Encounter", encounter_id)
        parts = []
        if encounter is not None:
            reasons = [_concept(r) for r in encounter.get("reasonCode") or []]
            found_period = encounter.get("period")
            period: Mapping[str, Any] = found_period if isinstance(found_period, Mapping) else {}
            parts = [
                _concept(encounter.get("class")),
                str(encounter.get("status") or ""),
                f"reason: {', '.join(r for r in reasons if r)}" if any(reasons) else "",
                f"since {format_time(period['start'], zone)}" if period.get("start") else "",
            ]
        parts.append(f"Encounter/{encounter_id}")
        rows.append(("Encounter", " · ".join(escaped(p) for p in parts if p)))
    if context.get("userId"):
        rows.append(("Asked by", escaped(context["userId"])))
    return rows


def _data_rows(items: Sequence[Item], zone: tzinfo) -> list[list[str]]:
    rows = []
    for node in base_facts(items):
        source = node.get("source") if isinstance(node.get("source"), Mapping) else None
        what, _, value = statement(node, zone).partition(": ")
        when = ""
        if source is not None and source.get("date"):
            when = format_time(source["date"], zone)
        elif source is not None and source.get("lastUpdated"):
            when = f"updated {format_time(source['lastUpdated'], zone)}"
        ref = f"{source.get('resourceType')}/{source.get('id')}" if source is not None else ""
        rows.append(
            [
                escaped(what),
                f"<strong>{escaped(value)}</strong>",
                escaped(source_text(node, zone).split(", ")[0]),
                escaped(when),
                escaped(ref),
            ]
        )
    return rows


_WRITES = {
    "accepted": "written",
    "conflicted": "not written: the record changed after it was read",
    "refused": "not written: refused",
    "failed": "not written: the write failed",
    "unknown": "not confirmed yet: it will be checked again",
    "attempted": "not confirmed yet: it will be checked again",
    "pending": "not sent yet",
    "not sent": "not sent",
}


def _target(effect: Mapping[str, Any]) -> str:
    """``Encounter/e1`` of an effect's target URL."""
    parts = str(effect.get("target") or "").rstrip("/").rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) >= 2 else str(effect.get("target") or "")


def _decision(doc: Mapping[str, Any], items: Sequence[Item], page: RunPage) -> dict[str, Any]:
    """What the decision box says: the decided values, why a run is not decided, or how the
    run ended without a decision."""
    decided = [i.text for i in items if i.kind == "decided"]
    if isinstance(doc.get("decision"), Mapping) and decided:
        return {"kind": "decided", "lines": decided}
    end = display_name(page, doc.get("terminal"))
    undecided = doc.get("undecided")
    if isinstance(undecided, Mapping):
        return _undecided(undecided, page, end)
    status = str(doc.get("status") or "")
    how = f"the workflow ended at: {end}" if end else f"the run is {status}"
    if doc.get("waitingAt"):
        how = f"the run is waiting at: {display_name(page, doc.get('waitingAt'))}"
    return {"kind": "none", "how": how}


def _undecided(stored: Mapping[str, Any], page: RunPage, end: str) -> dict[str, Any]:
    """A run stopped because incomplete inputs could change its decision: which inputs, why
    each is not complete and what it could have changed (the card names three at most), and the
    value the rules held on the rest (not a decision)."""
    try:
        undecided = Undecided.model_validate(stored)
    except ValidationError:  # a document this version cannot read: not decided, inputs unknown
        undecided = Undecided()
    labels = [i.label or i.input for i in undecided.inputs]
    line = f"Not decided — data it depends on is missing or was not used ({', '.join(labels)})" + (
        f"; the workflow ended at: {end}" if end else ""
    )
    inputs: list[tuple[str, str]] = []
    for item in undecided.inputs:
        said = "; ".join(r.detail for r in item.reasons if r.detail) or (
            f"No {item.label} could be used"
        )
        could = sorted(
            {
                c.ruleLabel + (f" ({c.valueLabel})" if c.valueLabel is not None else "")
                for c in item.couldChange
                if c.ruleLabel
            }
        )
        inputs.append((said, ", ".join(could)))
    shown = None
    if undecided.held is not None:
        what = str(undecided.propertyLabel or display_name(page, undecided.property))
        shown = (what, str(undecided.heldLabel or display_name(page, undecided.held)))
    return {"kind": "undecided", "line": line, "inputs": inputs, "held": shown}


def _cards(response: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """The cards the EHR was given (urgency and summary) and the actions they suggest (label,
    then each action's description and the resource it acts on)."""
    cards = [c for c in (response or {}).get("cards") or [] if isinstance(c, Mapping)]
    shown = [(markup(c.get("indicator")), markup(c.get("summary"))) for c in cards]
    actions = [
        (
            markup(suggestion.get("label")),
            [
                (markup(a.get("description") or a.get("type")), markup(a.get("resourceId")))
                for a in suggestion.get("actions") or []
                if isinstance(a, Mapping)
            ],
        )
        for card in cards
        for suggestion in card.get("suggestions") or []
        if isinstance(suggestion, Mapping)
    ]
    return shown, actions


def clinician_view(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the clinician's part of ``run.html`` shows of ``page`` (``trace``: its steps)."""
    doc, zone = page.document, page.zone
    proof = doc.get("proof")
    items = proof_items(proof, zone) if isinstance(proof, Mapping) else []
    context = _context_rows(page, zone)
    ran = ran_at(page, trace)
    context.append(("Decided", escaped(format_time(ran, zone)) if ran else "unknown"))
    shown, actions = _cards(page.response)
    writes = []
    for e in page.effects:
        state = str(e.get("state"))
        detail = e.get("detail") if e.get("detail") and state != "accepted" else None
        writes.append((_target(e), _WRITES.get(state, state), markup(e.get("newVersion")), detail))
    return {
        "context": [(k, Markup(v)) for k, v in context],
        "decision": _decision(doc, items, page),
        "cards": shown,
        "actions": actions,
        "generated": [
            (display_name(page, step), markup(n.get("text")))
            for step, n in narrations(trace)
            if n.get("generated")
        ],
        "why": items,
        "data": cells(_data_rows(items, zone)),
        "inputs": inputs_view(doc.get("inputs"), names=page.names),
        "refused": [
            (markup(v.get("code")), markup(v.get("message")))
            for v in doc.get("inputViolations") or []
            if isinstance(v, Mapping)
        ],
        "writes": writes,
        "ahead": {"reused": doc.get("reusedRun"), "computed": doc.get("answeredAhead")},
        "applied": doc.get("origin") == "apply",
    }
