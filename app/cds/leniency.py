"""Request leniency: what real EHRs send that CDS Hooks 2.0 does not allow, read when it can mean
only one thing, refused when it cannot.

Each rule here returns what it read and a ``DataNote`` the run records (``dataQuality``):

- ``typed-context-id``: ``context.patientId`` given as ``Patient/x`` (or ``encounterId`` as
  ``Encounter/y``) is the bare id ``x``; a reference of another type stays refused by the
  context check ("must be a bare FHIR id").
- ``older-hook``: a call of an older hook whose context carries everything the service's hook
  requires is answered as the service's hook: an ``order-select`` call to an ``order-sign``
  service (its ``draftOrders`` are the orders; ``selections`` is kept but not read).
- refused, ``shared-id``: two different resources under one ``Type/id`` in the prefetch the
  client sent (a FHIR server holds one resource per id, so which is the record cannot be known):
  400 naming the second one. The same resource twice (e.g. from two prefetch keys) is fine.

Hydration adds its own notes (a bare ``subject.reference``; adapters/fhir/hydrate.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from adapters.fhir.notes import DataNote
from app.cds.errors import Issue, RequestInvalid

if TYPE_CHECKING:
    from app.cds.requests import HookRequest

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


def as_service_hook(req: HookRequest, hook: str) -> HookRequest:
    """``req`` answered as ``hook`` (the service's), or ``RequestInvalid`` naming ``hook``."""
    if req.hook == hook:
        return req
    if req.hook not in OLDER_HOOKS.get(hook, ()):
        raise RequestInvalid.one(
            "not-supported", f"this service answers hook {hook!r}, not {req.hook!r}", "hook"
        )
    from app.cds.requests import _check_context

    issues = _check_context(hook, req.context)
    if issues:
        raise RequestInvalid(issues=issues)
    note = DataNote(
        rule="older-hook",
        field="hook",
        received=req.hook,
        read_as=hook,
        message=(
            f"a {req.hook} call was answered as {hook}, the hook of this service: its draftOrders "
            "are the orders considered"
        ),
    )
    return replace(req, hook=hook, notes=(*req.notes, note))


def _canonical(resource: Any) -> str:
    return json.dumps(resource, sort_keys=True, separators=(",", ":"))


def shared_id_issues(prefetch: dict[str, Any]) -> list[Issue]:
    """One issue per resource of the client's prefetch that differs from an earlier one named by
    the same ``Type/id``."""
    # Type/id -> (where, the resource, its canonical JSON once another resource shares the id):
    # only resources that share an id are serialised to be compared
    first: dict[str, tuple[str, Any, list[str]]] = {}
    issues: list[Issue] = []
    for key, value in prefetch.items():
        if not isinstance(value, dict):
            continue
        if value.get("resourceType") == "Bundle":
            entries = value.get("entry")
            found = [
                (f"prefetch.{key}.entry[{i}].resource", e.get("resource"))
                for i, e in enumerate(entries if isinstance(entries, list) else [])
                if isinstance(e, dict)
            ]
        else:
            found = [(f"prefetch.{key}", value)]
        for where, resource in found:
            if not isinstance(resource, dict) or not isinstance(resource.get("id"), str):
                continue
            ref = f"{resource.get('resourceType')}/{resource['id']}"
            seen = first.setdefault(ref, (where, resource, []))
            if seen[1] is resource:
                continue
            if not seen[2]:
                seen[2].append(_canonical(seen[1]))
            if seen[2][0] != _canonical(resource):
                issues.append(
                    Issue(
                        code="duplicate",
                        diagnostics=(
                            f"{where} is a different resource under {ref} than {seen[0]}: a FHIR "
                            "server holds one resource per id, so which is the record cannot "
                            "be known; give each its own id"
                        ),
                        expression=f"{where}.id",
                    )
                )
    return issues
