"""Request leniency: what real EHRs send that CDS Hooks 2.0 does not allow, read when it can mean
only one thing, refused when it cannot.

Each rule here returns what it read and a ``DataNote`` the run records (``dataQuality``):

- ``typed-context-id``: ``context.patientId`` given as ``Patient/x`` (or ``encounterId`` as
  ``Encounter/y``) is the bare id ``x``; a reference of another type stays refused by the
  context check ("must be a bare FHIR id").
- ``older-hook``: a call of an older hook whose context carries everything the service's hook
  requires is answered as the service's hook: an ``order-select`` call to an ``order-sign``
  service (its ``draftOrders`` are the orders; ``selections`` is kept but not read);
  :data:`OLDER_HOOKS` lists them, ``app.cds.requests.as_service_hook`` reads such a call.
- ``newer-version``: two different resources under one ``Type/id`` in the prefetch the client
  sent whose versions say which is later (numeric ``meta.versionId``, else ``meta.lastUpdated``,
  else an ``amended``/``corrected`` result beside its ``final`` one): the later is read, the
  earlier is left out of its Bundle and named in the note.
- refused, ``shared-id``: two different resources under one ``Type/id`` with nothing saying
  which is the later (a FHIR server holds one resource per id, so which is the record cannot be
  known): 400 naming the second one. The same resource twice (e.g. from two prefetch keys) is
  fine.

Hydration adds its own notes (a bare ``subject.reference``; app/fhir/hydrate.py).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fhir.resources.R4B import get_fhir_model_class
from pydantic import BaseModel, ValidationError

from app.cds.errors import Issue
from app.cds.fhir_data import resource_issues
from app.data_notes import DataNote
from app.fhir_time import parse_datetime
from app.fhir_validate import problems

_REF = re.compile(r"^([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})$")

#: Context id fields and the one resource type each may be written with.
TYPED_IDS = {"patientId": "Patient", "encounterId": "Encounter"}

#: A service's hook → older hooks whose calls it answers as its own (their context carries
#: every field the service's hook requires).
OLDER_HOOKS: dict[str, tuple[str, ...]] = {"order-sign": ("order-select",)}


def lenient_context(context: dict[str, Any]) -> tuple[dict[str, Any], list[DataNote]]:
    """The context with typed ids read as bare ids, and a note per id so read."""
    out = dict(context)
    notes: list[DataNote] = []
    for name, rtype in TYPED_IDS.items():
        value = out.get(name)
        match = _REF.match(value) if isinstance(value, str) else None
        if match is None or match.group(1) != rtype:
            continue
        out[name] = match.group(2)
        notes.append(
            DataNote(
                rule="typed-context-id",
                field=f"context.{name}",
                received=value,
                read_as=match.group(2),
                message=(
                    f"context.{name} should be a bare id; {value!r} names a {rtype} and was read "
                    f"as {match.group(2)!r}"
                ),
            )
        )
    return out, notes


def _canonical(resource: Any) -> str:
    return json.dumps(resource, sort_keys=True, separators=(",", ":"))


#: statuses that replace an earlier version of the same result (FHIR R4 observation-status)
_REPLACING_STATUSES = {"amended", "corrected"}
_REPLACED_STATUSES = {"registered", "preliminary", "final"}


def _version_order(a: dict[str, Any], b: dict[str, Any]) -> int | None:
    """1 when ``a`` is a later version of the record than ``b``, -1 when earlier, None when
    nothing in them says: numeric ``meta.versionId``s, else ``meta.lastUpdated``, else an
    ``amended`` or ``corrected`` status beside a ``final`` (or earlier) one."""

    def meta(r: dict[str, Any], key: str) -> Any:
        m = r.get("meta")
        return m.get(key) if isinstance(m, dict) else None

    va, vb = meta(a, "versionId"), meta(b, "versionId")
    numbered = isinstance(va, str) and isinstance(vb, str) and va.isdigit() and vb.isdigit()
    if numbered and int(va) != int(vb):
        return 1 if int(va) > int(vb) else -1
    la, lb = (_instant(meta(r, "lastUpdated")) for r in (a, b))
    if la is not None and lb is not None and la != lb:
        return 1 if la > lb else -1
    sa, sb = a.get("status"), b.get("status")
    if sa in _REPLACING_STATUSES and sb in _REPLACED_STATUSES:
        return 1
    if sb in _REPLACING_STATUSES and sa in _REPLACED_STATUSES:
        return -1
    return None


def _instant(value: Any) -> datetime | None:
    """An instant with its offset (``meta.lastUpdated`` always has one); None otherwise."""
    parsed = parse_datetime(value) if isinstance(value, str) else None
    return parsed if parsed is not None and parsed.tzinfo is not None else None


def _version_name(r: dict[str, Any]) -> str:
    m = r["meta"] if isinstance(r.get("meta"), dict) else {}
    parts = [f"version {m['versionId']}" if m.get("versionId") else None]
    parts.append(f"updated {m['lastUpdated']}" if m.get("lastUpdated") else None)
    parts.append(f"status {r['status']}" if isinstance(r.get("status"), str) else None)
    return ", ".join(p for p in parts if p) or "no version"


def _prefetch_resources(prefetch: dict[str, Any]) -> list[tuple[str, str, int | None, Any]]:
    """(prefetch key, where, entry index or None, resource) for every resource of the prefetch."""
    found: list[tuple[str, str, int | None, Any]] = []
    for key, value in prefetch.items():
        if not isinstance(value, dict):
            continue
        if value.get("resourceType") == "Bundle":
            entries = value.get("entry")
            found.extend(
                (key, f"prefetch.{key}.entry[{i}].resource", i, e.get("resource"))
                for i, e in enumerate(entries if isinstance(entries, list) else [])
                if isinstance(e, dict)
            )
        else:
            found.append((key, f"prefetch.{key}", None, value))
    return found


def shared_ids(
    prefetch: dict[str, Any],
) -> tuple[dict[str, Any], list[Issue], list[DataNote]]:
    """The prefetch with one resource per ``Type/id``. Two different resources under one id are
    two versions of one record when their versions say which is later (``meta.versionId``,
    ``meta.lastUpdated``, or an amended result beside its final one): the later is read, the
    earlier left out, and a ``newer-version`` note says so. When nothing says which is the
    record, an issue names the second one (a 400)."""
    # Type/id -> (where, the resource, its canonical JSON once another resource shares the id):
    # only resources that share an id are serialised to be compared
    first: dict[str, tuple[str, Any, list[str]]] = {}
    issues: list[Issue] = []
    notes: list[DataNote] = []
    dropped: dict[str, set[int]] = {}  # prefetch key -> entries left out (older versions)
    kept: dict[str, tuple[str, str, int | None, Any]] = {}
    for key, where, index, resource in _prefetch_resources(prefetch):
        if not isinstance(resource, dict) or not isinstance(resource.get("id"), str):
            continue
        ref = f"{resource.get('resourceType')}/{resource['id']}"
        seen = first.setdefault(ref, (where, resource, []))
        kept.setdefault(ref, (key, where, index, resource))
        if seen[1] is resource:
            continue
        if not seen[2]:
            seen[2].append(_canonical(seen[1]))
        if seen[2][0] == _canonical(resource):
            continue
        current = kept[ref]
        order = _version_order(resource, current[3])
        if order is None:
            issues.append(
                Issue(
                    code="duplicate",
                    diagnostics=(
                        f"{where} is a different resource under {ref} than {seen[0]}, and "
                        "neither meta.versionId, meta.lastUpdated nor its status says which is "
                        "the later version: a FHIR server holds one resource per id, so which "
                        "is the record cannot be known; give each its own id"
                    ),
                    expression=f"{where}.id",
                )
            )
            continue
        this = (key, where, index, resource)
        newer, older = (this, current) if order > 0 else (current, this)
        kept[ref] = newer
        if older[2] is not None:
            dropped.setdefault(older[0], set()).add(older[2])
        notes.append(
            DataNote(
                rule="newer-version",
                field=older[1],
                received=f"{ref} ({_version_name(older[3])})",
                read_as=f"{ref} ({_version_name(newer[3])}) at {newer[1]}",
                message=(
                    f"two versions of {ref} were sent: the later ({_version_name(newer[3])}) "
                    f"was read, the earlier ({_version_name(older[3])}, {older[1]}) was not"
                ),
            )
        )
    if not dropped:
        return prefetch, issues, notes
    out = dict(prefetch)
    for key, indexes in dropped.items():
        bundle = dict(out[key])
        bundle["entry"] = [e for i, e in enumerate(bundle["entry"]) if i not in indexes]
        if isinstance(bundle.get("total"), int):  # the older versions were counted as matches
            bundle["total"] = max(0, bundle["total"] - len(indexes))
        out[key] = bundle
    return out, issues, notes


# --- draft orders in the hook context ------------------------------------------------------

#: Attempts at wrapping single objects in lists before a draft order is judged unreadable (each
#: attempt repairs every such element pydantic reported; nested ones show up on the next).
_LIST_REPAIRS = 4


@dataclass(frozen=True, kw_only=True)
class UnreadOrder:
    """A draft order of the hook context that could not be read, so it was not checked."""

    reference: str  # "MedicationRequest/request-123"
    name: str  # the drug as the EHR displays it, else the reference
    element: str  # where it failed: "context.draftOrders.entry[0].resource.intent"
    reason: str  # in a clinician's words: "no drug is chosen yet: …", or the invalid element
    #: False for an order that names no drug yet: while the drug is being chosen (order-select)
    #: there is nothing to check and no card; an order signed so is still said
    chosen: bool = True

    def to_note(self) -> DataNote:
        """The run's data-quality note for it (the order was left out, not read another way)."""
        return DataNote(
            rule="unread-draft-order",
            field=self.element,
            received=self.reference,
            read_as=None,
            message=f"{self.reference} was not checked: the draft order could not be read: "
            f"{self.reason}",
        )


def _at(resource: Any, loc: tuple[int | str, ...]) -> tuple[Any, int | str] | None:
    """The container holding ``loc``'s last step, and that step, or None when it is not there."""
    parent = resource
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return None
    return (parent, loc[-1]) if loc else None


def _wrap_singletons(
    resource: dict[str, Any], model: type[BaseModel], where: str
) -> tuple[dict[str, Any], list[DataNote]]:
    """``resource`` with every object written where FHIR has a list (``"category": {…}``) read
    as a list of that one object, and a note per element so read: a list of one is the only
    thing the object can mean."""
    out = copy.deepcopy(resource)
    notes: list[DataNote] = []
    for _ in range(_LIST_REPAIRS):
        try:
            model.model_validate(out)
        except ValidationError as exc:
            found = [
                (err["loc"], hit)
                for err in exc.errors()
                if err["type"] == "list_type"
                and isinstance(err["input"], dict)
                and (hit := _at(out, tuple(err["loc"]))) is not None
            ]
        else:
            break
        if not found:
            break
        for loc, (parent, key) in found:
            parent[key] = [parent[key]]
            field = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
            notes.append(
                DataNote(
                    rule="single-as-list",
                    field=field,
                    received="one object",
                    read_as="a list of that one object",
                    message=f"{field} is a list in FHIR R4 and was sent as one object; it was "
                    "read as a list of that object",
                )
            )
    return out, notes


def _order_name(resource: dict[str, Any], reference: str) -> str:
    """The drug a draft order names as the EHR displays it, else the order's reference."""
    concept = resource.get("medicationCodeableConcept")
    if not isinstance(concept, dict):
        return reference
    codings = concept.get("coding")
    shown = [concept.get("text")]
    if isinstance(codings, list):
        shown.extend(c.get("display") for c in codings if isinstance(c, dict))
    return next((t.strip() for t in shown if isinstance(t, str) and t.strip()), reference)


def _missing_choice(resource: dict[str, Any]) -> str | None:
    """The clinician's reason a MedicationRequest names no drug, else None (the models report a
    missing ``medication[x]`` without naming it)."""
    if resource.get("resourceType") != "MedicationRequest":
        return None
    if any(k in resource for k in ("medicationCodeableConcept", "medicationReference")):
        return None
    return "no drug is chosen yet: the order names no medication"


def read_draft_orders(
    context: dict[str, Any], wanted: dict[str, set[str]]
) -> tuple[dict[str, Any], list[DataNote], list[UnreadOrder]]:
    """The hook context with the draft orders a service reads (``wanted``: context key → the
    resource types read from it) repaired where they can mean one thing, and the ones that still
    cannot be read left out, each an ``UnreadOrder`` the answer tells the clinician about (an
    unreadable order is never an error for the whole call: the other orders are still checked).
    """
    out = dict(context)
    notes: list[DataNote] = []
    unread: list[UnreadOrder] = []
    for key, types in wanted.items():
        value = context.get(key)
        if not isinstance(value, dict) or not isinstance(value.get("entry"), list):
            continue
        entries: list[Any] = value["entry"]
        kept: list[Any] = []
        for i, entry in enumerate(entries):
            res = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(res, dict) or res.get("resourceType") not in types:
                kept.append(entry)
                continue
            where = f"context.{key}.entry[{i}].resource"
            if not problems(res) and _missing_choice(res) is None:
                # valid R4 as sent: nothing to repair (what the compiled shapes accept, the
                # models accept: the differential test), so no model is run on it
                kept.append(entry)
                continue
            repaired, repairs = _wrap_singletons(
                res, get_fhir_model_class(res["resourceType"]), where
            )
            reference = f"{res['resourceType']}/{res.get('id')}"
            name = _order_name(res, reference)
            missing = _missing_choice(repaired)
            issues = resource_issues(repaired, where)
            if missing is not None:
                unread.append(
                    UnreadOrder(
                        reference=reference,
                        name=name,
                        element=f"{where}.medication[x]",
                        reason=missing,
                        chosen=False,
                    )
                )
            elif issues:
                first = issues[0]
                unread.append(
                    UnreadOrder(
                        reference=reference,
                        name=name,
                        element=first.expression or where,
                        reason=first.diagnostics.removeprefix(where + "."),
                    )
                )
            else:
                notes.extend(repairs)
                kept.append({**entry, "resource": repaired} if repairs else entry)
        if len(kept) != len(entries) or any(k is not e for k, e in zip(kept, entries, strict=True)):
            out[key] = {**value, "entry": kept}
    return out, notes, unread
