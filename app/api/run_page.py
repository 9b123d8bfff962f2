"""The run page: a stored run's decision for two readers, as one self-contained HTML document.

What a clinician sees after following a card's link: on top, for the clinician, the patient and
encounter the hook named, the decision and the cards the EHR showed, the actions they suggest,
why (the proof as labelled statements, ``app.clinical_text``), the data used with its dates, what
was missing or refused, and what was written to the EHR; below, for the auditor, the run's
versions and digests, its trace, its effects, the proof in engine notation, violations, data
quality notes and the FHIR source versions it read. Times are shown in the configured zone
(``HORISMOS_TIMEZONE``), which the page names.

Everything comes from what was stored when the run finished — the outcome document, the run row
(its CDS response and its FHIR input), the effects the commit adapter recorded and the source
versions the run read; nothing is recomputed. Only the names of steps and properties the stored
JSON does not carry come from the deployment, when it is loaded (``names``), else from their
local names. The page has no script and no external asset (inline CSS only). It is the template
``app/api/templates/run.html``, autoescaped: every value is escaped (free text, FHIR ids and
generated narration may hold markup); the few table cells built here with a tag (a value in
bold, an id as code) escape their values themselves and are passed as ``Markup``.

The engine proof carries ``Proof.render()``'s lines (``proof_text`` returns them for tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from html import escape
from typing import Any

from markupsafe import Markup
from sqlalchemy.orm import Session

from app.api.pages import render, show_text
from app.api.run_inputs import inputs_view
from app.cds.hook_input import HookInput, InputUnusable
from app.clinical_text import (
    Item,
    base_facts,
    format_time,
    proof_items,
    source_text,
    statement,
)
from app.fhir_json import resources_of
from app.ontology.model import Ontology, humanise
from app.runtime.host import stored_input, stored_outcome
from app.store import repo

__all__ = [
    "PAGE_HEADERS",
    "RunPage",
    "link_refused_page",
    "load_run_page",
    "names_of",
    "not_found_page",
    "prefers_html",
    "proof_text",
    "render_run_page",
]


#: Sent with every page: nothing but the inline style may load or run, the page holds patient
#: data so no cache keeps it, and the content type is not second-guessed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Vary": "Accept",
}


# --- content negotiation ------------------------------------------------------------------


def _quality(params: Iterable[str]) -> float:
    for param in params:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _accept_q(accept: str, media: str) -> float:
    """The quality ``accept`` gives ``media``: the most specific matching range wins (RFC 9110
    §12.5.1); 0 when nothing matches."""
    kind = media.split("/", 1)[0]
    best: tuple[int, float] = (-1, 0.0)
    for item in accept.split(","):
        parts = item.split(";")
        rng = parts[0].strip().lower()
        if rng == media:
            rank = 2
        elif rng == f"{kind}/*":
            rank = 1
        elif rng == "*/*":
            rank = 0
        else:
            continue
        if rank > best[0]:
            best = (rank, _quality(parts[1:]))
    return best[1]


def prefers_html(accept: str | None) -> bool:
    """True when ``Accept`` ranks ``text/html`` above ``application/json``.

    A browser following a link sends ``text/html,…,*/*;q=0.8``: HTML. An API client sending
    ``application/json``, ``*/*`` or no ``Accept`` at all gets JSON, as before the page existed;
    a tie goes to JSON.
    """
    if not accept:
        return False
    html_q = _accept_q(accept, "text/html")
    return html_q > 0 and html_q > _accept_q(accept, "application/json")


# --- what the page shows --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunPage:
    """Everything the page shows, as stored."""

    document: Mapping[str, Any]  # the outcome JSON ``GET /runs/{id}`` returns
    created_at: datetime | None = None
    service_id: str | None = None
    hook: str | None = None
    patient: str | None = None
    deployment: str | None = None
    deployment_version: str | None = None
    ontology_digest: str | None = None
    request_digest: str | None = None
    effects: Sequence[Mapping[str, Any]] = ()
    #: the CDS response the EHR was given (its cards and their suggestions)
    response: Mapping[str, Any] | None = None
    #: the hook's context and prefetch as the run read them
    context: Mapping[str, Any] = field(default_factory=dict)
    prefetch: Mapping[str, Any] = field(default_factory=dict)
    #: labels of the deployment's steps, tools and properties, by local name and IRI
    names: Mapping[str, str] = field(default_factory=dict)
    zone: tzinfo = UTC


def load_run_page(
    session: Session,
    run_id: str,
    *,
    names: Mapping[str, str] | None = None,
    zone: tzinfo = UTC,
) -> RunPage:
    """The stored run ``run_id``; raises ``NotFound`` like ``GET /runs/{id}``."""
    document = stored_outcome(session, run_id)
    row = repo.get_run(session, run_id)
    stored: HookInput | None = None
    raw = stored_input(session, run_id)
    if raw is not None:
        try:
            stored = HookInput.from_bytes(raw)
        except InputUnusable:
            stored = None
    return RunPage(
        document=document,
        created_at=row.created_at if row is not None else None,
        service_id=row.service_id if row is not None else None,
        hook=row.hook if row is not None else None,
        patient=row.patient if row is not None else None,
        deployment=row.deployment if row is not None else None,
        deployment_version=row.deployment_version if row is not None else None,
        ontology_digest=row.ontology_digest if row is not None else None,
        request_digest=row.request_digest if row is not None else None,
        effects=document.get("effects", ()),
        response=row.response if row is not None else None,
        context=stored.context if stored is not None else {},
        prefetch=stored.prefetch if stored is not None else {},
        names=names or {},
        zone=zone,
    )


def names_of(ontology: Ontology) -> dict[str, str]:
    """The labels a page shows for what its stored JSON names without one: steps and tools by
    local name, properties by IRI (each with an ``rdfs:label``)."""
    names: dict[str, str] = {}
    for workflow in ontology.workflows.values():
        names.update({s.name: s.label for s in workflow.steps.values() if s.label})
    names.update({t.name: t.label for t in ontology.tools.values() if t.label})
    names.update({p.iri: p.label for p in ontology.properties.values() if p.label})
    return names


# --- the proof tree -------------------------------------------------------------------------


@dataclass
class _Line:
    """One line of the proof: a fact (``node`` set), an ``also`` derivation, a negative premise or
    an overruled value, with the lines indented beneath it."""

    text: str
    kind: str  # "derived" | "base" | "also" | "absent" | "overruled" | "unassigned"
    node: Mapping[str, Any] | None = None
    children: list[_Line] = field(default_factory=list)

    @property
    def label(self) -> Any:
        """A fact's label, as the page shows it beside its tag."""
        return self.node.get("label") if self.node is not None else None

    @property
    def tag(self) -> str:
        return _tag(self.node) if self.node is not None else ""


def _tag(node: Mapping[str, Any]) -> str:
    """The bracketed tag ``Proof.render()`` prints after a fact's label."""
    if node.get("provenance") == "rule":
        derivations = node.get("derivations") or []
        return f"[rule {derivations[0].get('ruleName')}]" if derivations else "[rule]"
    text = str(node.get("provenance"))
    source = node.get("source")
    if isinstance(source, Mapping):
        text += f" {source.get('resourceType')}/{source.get('id')}"
        if source.get("versionId") is not None:
            text += f" v{source.get('versionId')}"
    confidence = node.get("confidence")
    if isinstance(confidence, int | float):
        text += f", confidence {confidence:g}"
    return f"[{text}]"


def _body(derivation: Mapping[str, Any]) -> list[_Line]:
    lines = [_fact(p) for p in derivation.get("premises") or []]
    lines.extend(_Line(str(a.get("label")), "absent") for a in derivation.get("absent") or [])
    return lines


def _fact(node: Mapping[str, Any]) -> _Line:
    derivations = list(node.get("derivations") or [])
    line = _Line(
        f"{node.get('label')}  {_tag(node)}", "derived" if derivations else "base", node=node
    )
    if derivations:
        line.children.extend(_body(derivations[0]))
    for d in derivations[1:]:
        also = _Line(f"also [rule {d.get('ruleName')}]", "also")
        if d.get("expanded"):
            also.children.extend(_body(d))
        line.children.append(also)
    for o in node.get("overruled") or []:
        rules = ", ".join(f"rule {r}" for r in o.get("rules") or [])
        line.children.append(_Line(f"overrules {o.get('label')}  [{rules}]", "overruled"))
    return line


def _proof_lines(proof: Mapping[str, Any]) -> list[_Line]:
    values = proof.get("values") or []
    if not values:
        return [_Line(f"{proof.get('property')} was not assigned", "unassigned")]
    return [_fact(v) for v in values]


def proof_text(proof: Mapping[str, Any]) -> str:
    """The stored proof JSON as the indented text ``Proof.render()`` produced for it."""
    out: list[str] = []

    def walk(lines: Sequence[_Line], depth: int) -> None:
        for line in lines:
            out.append("  " * depth + line.text)
            walk(line.children, depth + 1)

    walk(_proof_lines(proof), 0)
    return "\n".join(out)


# --- HTML -----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """Any value as escaped text (``app.api.pages.show_text``, escaped)."""
    return escape(show_text(value))


def _source_ref(source: Mapping[str, Any]) -> str:
    ref = f"{source.get('resourceType')}/{source.get('id')}"
    version = source.get("versionId")
    return f"{ref} (version {version})" if version is not None else ref


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    """One tool or Bridge call of a step as the trace shows it: what, its status, and the error
    message or the confidence beneath."""
    if call.get("type") == "tool":
        what = f"tool {show_text(call.get('tool'))}"
        if call.get("attempt") is not None:
            what += f" (attempt {show_text(call.get('attempt'))})"
    else:
        what = f"Bridge {show_text(call.get('op'))}"
        if call.get("model"):
            what += f" ({show_text(call.get('model'))})"
    error = call.get("error")
    if call.get("status"):
        status = str(call.get("status"))
    elif isinstance(error, Mapping):
        status = f"error: {error.get('kind', 'error')}"
    else:
        status = "ok"
    detail = None
    if isinstance(error, Mapping) and error.get("message"):
        detail = error.get("message")
    elif call.get("confidence") is not None:
        detail = f"confidence {show_text(call.get('confidence'))}"
    return {"what": what, "status": status, "detail": detail}


def _trace_view(trace: Sequence[Mapping[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    """The trace's rows, a subflow's steps numbered beneath its step (``3.1``, ``3.2``…)."""
    rows: list[dict[str, Any]] = []
    for i, entry in enumerate(trace, 1):
        number = f"{prefix}{i}"
        calls = [c for c in entry.get("calls") or [] if isinstance(c, Mapping)]
        said = {str((c.get("error") or {}).get("message")) for c in calls}
        notes: list[str] = []
        for key in ("skipped", "reason", "effect"):
            if entry.get(key) and str(entry[key]) not in said:
                notes.append(f"{key}: {show_text(entry[key])}")
        if isinstance(entry.get("error"), Mapping):
            notes.append(f"error: {show_text(entry['error'].get('message'))}")
        for key in ("goal", "requires"):
            cond = entry.get(key)
            if isinstance(cond, Mapping) and "holds" in cond:
                notes.append(f"{key} {'holds' if cond['holds'] else 'does not hold'}")
        if entry.get("selected"):
            notes.append(f"selected: {show_text(entry['selected'])}")
        at = str(entry.get("at") or "")
        rows.append(
            {
                "number": number,
                "entry": entry,
                "violations": [v for v in entry.get("violations") or [] if isinstance(v, Mapping)],
                "calls": [_call(c) for c in calls],
                "notes": notes,
                "at": at,
                "at_short": at.split("T", 1)[1][:12] if "T" in at else at,
            }
        )
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            rows.extend(_trace_view(subflow.get("trace") or [], prefix=f"{number}."))
    return rows


def _narrations(trace: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for entry in trace:
        narration = entry.get("narration")
        if isinstance(narration, Mapping) and narration.get("text"):
            out.append((str(entry.get("step")), narration))
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            out.extend(_narrations(subflow.get("trace") or []))
    return out


def _ran_at(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> Any:
    if page.created_at is not None:
        return page.created_at
    return trace[0].get("at") if trace else None


# --- the clinician's part -------------------------------------------------------------------


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
        rows.append(("Patient", " · ".join(_e(p) for p in parts if p)))
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
        rows.append(("Encounter", " · ".join(_e(p) for p in parts if p)))
    if context.get("userId"):
        rows.append(("Asked by", _e(context["userId"])))
    return rows


def _name(page: RunPage, key: Any) -> str:
    """A step's, property's or tool's label (``page.names``), else its humanised name."""
    if key is None:
        return ""
    text = str(key)
    return page.names.get(text) or humanise(text)


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
                _e(what),
                f"<strong>{_e(value)}</strong>",
                _e(source_text(node, zone).split(", ")[0]),
                _e(when),
                _e(ref),
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


# --- what the templates show (app/api/templates/run.html) -----------------------------------


def _html(value: Any) -> Markup:
    """A value escaped as the page shows it (``_e``), for a template cell."""
    return Markup(_e(value))


def _cells(rows: Iterable[Sequence[str]]) -> list[list[Markup]]:
    """Rows of cells that the helpers above built as escaped HTML."""
    return [[Markup(c) for c in row] for row in rows]


def _decision(doc: Mapping[str, Any], items: Sequence[Item], page: RunPage) -> dict[str, Any]:
    """What the decision box says: the decided values, why a run is not decided, or how the
    run ended without a decision."""
    decided = [i.text for i in items if i.kind == "decided"]
    if isinstance(doc.get("decision"), Mapping) and decided:
        return {"kind": "decided", "lines": decided}
    end = _name(page, doc.get("terminal"))
    undecided = doc.get("undecided")
    if isinstance(undecided, Mapping):
        return _undecided(undecided, page, end)
    status = str(doc.get("status") or "")
    how = f"the workflow ended at: {end}" if end else f"the run is {status}"
    if doc.get("waitingAt"):
        how = f"the run is waiting at: {_name(page, doc.get('waitingAt'))}"
    return {"kind": "none", "how": how}


def _undecided(undecided: Mapping[str, Any], page: RunPage, end: str) -> dict[str, Any]:
    """A run stopped because incomplete inputs could change its decision: which inputs, why
    each is not complete and what it could have changed (the card names three at most), and the
    value the rules held on the rest (not a decision)."""
    found = [i for i in undecided.get("inputs") or () if isinstance(i, Mapping)]
    labels = [str(i.get("label") or i.get("input")) for i in found]
    line = f"Not decided — data it depends on is missing or was not used ({', '.join(labels)})" + (
        f"; the workflow ended at: {end}" if end else ""
    )
    inputs: list[tuple[str, str]] = []
    for item in found:
        reasons = [str(r.get("detail") or "") for r in item.get("reasons") or ()]
        said = "; ".join(r for r in reasons if r) or f"No {item.get('label')} could be used"
        could = sorted(
            {
                str(c["ruleLabel"])
                + (f" ({c['valueLabel']})" if c.get("valueLabel") is not None else "")
                for c in item.get("couldChange") or ()
                if isinstance(c, Mapping) and c.get("ruleLabel")
            }
        )
        inputs.append((said, ", ".join(could)))
    held = undecided.get("held")
    shown = None
    if held is not None:
        what = str(undecided.get("propertyLabel") or _name(page, undecided.get("property")))
        shown = (what, str(undecided.get("heldLabel") or _name(page, held)))
    return {"kind": "undecided", "line": line, "inputs": inputs, "held": shown}


def _cards(response: Mapping[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """The cards the EHR was given (urgency and summary) and the actions they suggest (label,
    then each action's description and the resource it acts on)."""
    cards = [c for c in (response or {}).get("cards") or [] if isinstance(c, Mapping)]
    shown = [(_html(c.get("indicator")), _html(c.get("summary"))) for c in cards]
    actions = [
        (
            _html(suggestion.get("label")),
            [
                (_html(a.get("description") or a.get("type")), _html(a.get("resourceId")))
                for a in suggestion.get("actions") or []
                if isinstance(a, Mapping)
            ],
        )
        for card in cards
        for suggestion in card.get("suggestions") or []
        if isinstance(suggestion, Mapping)
    ]
    return shown, actions


def _clinician(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    doc, zone = page.document, page.zone
    proof = doc.get("proof")
    items = proof_items(proof, zone) if isinstance(proof, Mapping) else []
    context = _context_rows(page, zone)
    ran = _ran_at(page, trace)
    context.append(("Decided", _e(format_time(ran, zone)) if ran else "unknown"))
    shown, actions = _cards(page.response)
    writes = []
    for e in page.effects:
        state = str(e.get("state"))
        detail = e.get("detail") if e.get("detail") and state != "accepted" else None
        writes.append((_target(e), _WRITES.get(state, state), _html(e.get("newVersion")), detail))
    return {
        "context": [(k, Markup(v)) for k, v in context],
        "decision": _decision(doc, items, page),
        "cards": shown,
        "actions": actions,
        "generated": [
            (_name(page, step), _html(n.get("text")))
            for step, n in _narrations(trace)
            if n.get("generated")
        ],
        "why": items,
        "data": _cells(_data_rows(items, zone)),
        "inputs": inputs_view(doc.get("inputs"), names=page.names),
        "refused": [
            (_html(v.get("code")), _html(v.get("message")))
            for v in doc.get("inputViolations") or []
            if isinstance(v, Mapping)
        ],
        "writes": writes,
        "ahead": {"reused": doc.get("reusedRun"), "computed": doc.get("answeredAhead")},
    }


def _auditor(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    doc = page.document
    ran = _ran_at(page, trace)
    facts = [
        ("Run", f"<code>{_e(doc.get('runId'))}</code>"),
        ("Status", _e(doc.get("status"))),
        ("Terminal step", _e(doc.get("terminal")) or "—"),
        ("Workflow", f"{_e(doc.get('workflow'))} version {_e(doc.get('version'))}"),
        ("Ran at", _e(ran.isoformat(timespec="seconds") if isinstance(ran, datetime) else ran)),
    ]
    if page.service_id:
        hook = f" (hook {_e(page.hook)})" if page.hook else ""
        facts.append(("CDS service", f"{_e(page.service_id)}{hook}"))
    if page.deployment:
        version = f" version {_e(page.deployment_version)}" if page.deployment_version else ""
        facts.append(("Deployment", f"<code>{_e(page.deployment)}</code>{version}"))
    if page.ontology_digest:
        facts.append(("Ontology digest", f"<code>{_e(page.ontology_digest)}</code>"))
    if page.request_digest:
        facts.append(("Request digest", f"<code>{_e(page.request_digest)}</code>"))
    effects = [
        [
            *(_e(e.get(k)) for k in ("tool", "target", "expectedVersion")),
            f'<span class="st {"ok" if e.get("state") == "accepted" else "warn"}">'
            f"{_e(e.get('state'))}</span>",
            *(_e(e.get(k)) for k in ("newVersion", "attempts", "detail")),
        ]
        for e in page.effects
    ]
    out: dict[str, Any] = {
        "facts": [(k, Markup(v)) for k, v in facts],
        "trace": _trace_view(trace),
        "effects": _cells(effects),
        "proof": None,
        "violations": [
            v
            for v in [*(doc.get("inputViolations") or []), *(doc.get("violations") or [])]
            if isinstance(v, Mapping)
        ],
        "quality": _cells(
            [_e(n.get(k)) for k in ("field", "received", "readAs", "message")]
            for n in doc.get("dataQuality") or []
            if isinstance(n, Mapping)
        ),
        "sources": _cells(
            [_e(s.get(k)) for k in ("resourceType", "id", "versionId", "lastUpdated")]
            for s in doc.get("sources") or []
            if isinstance(s, Mapping)
        ),
        "terminology": _terminology(doc.get("terminology")),
        "narrations": [
            (step, n.get("text")) for step, n in _narrations(trace) if not n.get("generated")
        ],
    }
    proof = doc.get("proof")
    if isinstance(proof, Mapping):
        lines = _proof_lines(proof)
        out["proof"] = lines
        base = base_facts(lines)
        with_confidence = any(n.get("confidence") is not None for n in base)
        out["base_headers"] = ["Subject", "Property", "Value", "Provenance", "FHIR source"] + (
            ["Confidence"] if with_confidence else []
        )
        out["base"] = _cells(
            [
                _e(n.get("subject")),
                _e(n.get("property")),
                f"<b>{_e(n.get('value'))}</b>",
                _e(n.get("provenance")),
                _e(_source_ref(n["source"])) if isinstance(n.get("source"), Mapping) else "",
                *([_e(n.get("confidence"))] if with_confidence else []),
            ]
            for n in base
        )
    return out


def _terminology(used: Any) -> dict[str, Any] | None:
    """Which terminology classified the run's codes, and from which versions."""
    if not isinstance(used, Mapping):
        return None
    packages = ", ".join(str(p) for p in used.get("packages") or []) or "no package"
    return {
        "server": _html(used.get("url")) if used.get("kind") == "server" else None,
        "packages": packages,
        "rows": [
            *(["Value set", _html(v)] for v in used.get("valueSets") or []),
            *(["Concept map", _html(v)] for v in used.get("conceptMaps") or []),
        ],
    }


def render_run_page(page: RunPage) -> str:
    """The whole HTML document for one stored run: the clinician's part on top, the auditor's
    below."""
    doc = page.document
    trace = [t for t in doc.get("trace") or [] if isinstance(t, Mapping)]
    run_id = str(doc.get("runId"))
    return render(
        "run.html",
        title=f"Decision record {run_id}",
        run_id=run_id,
        service_id=page.service_id,
        zone=str(page.zone),
        clinician=_clinician(page, trace),
        auditor=_auditor(page, trace),
    )


def not_found_page(run_id: str) -> str:
    return render(
        "notice.html",
        title="Run not found",
        heading="Run not found",
        before="No run ",
        code=run_id,
        after=" is recorded by this service.",
    )


def link_refused_page(reason: str) -> str:
    """The 401 page for a card link whose signature is wrong or whose time is up."""
    return render(
        "notice.html",
        title="Link not valid",
        heading="This link cannot open the decision record",
        before=f"{reason}.",
        code=None,
        after="",
    )
