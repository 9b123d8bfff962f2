"""A population's data as FHIR Bulk Data writes it, read per patient.

A Bulk Data export (``$export``) writes one NDJSON file per resource type (``Patient.ndjson``,
``Observation.ndjson``…), one resource per line. A population run reads that folder and hands
each patient's resources to the same hook path a live call takes; this module says which
patient a resource belongs to and answers a service's prefetch templates from one patient's
resources as the EHR's FHIR server would answer them.

What a template may ask (the searches the bundled services' templates use): a read
(``Patient/{{context.patientId}}``), and a search by ``patient`` with ``category`` and ``code``
tokens (``code``, ``system|code``, ``|code``) and ``_include=Type:medication``. A template
asking anything else is refused by name, never answered by guess.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

#: the element of a resource naming the patient it is about, by resource type (else ``subject``)
_PATIENT_ELEMENT = {"AllergyIntolerance": "patient", "Immunization": "patient"}
#: the search parameter ``category`` and ``code`` read, by resource type (else the element of
#: the same name)
_TOKEN_ELEMENT = {("AllergyIntolerance", "category"): None}
#: resources no patient owns that patients' records name (``_include`` targets)
SHARED_TYPES = frozenset({"Medication"})


class TemplateUnsupported(ValueError):
    """A prefetch template a population run cannot answer as a FHIR server would."""


def read_ndjson(folder: Path) -> Iterator[tuple[str, int, dict[str, Any] | None, str | None]]:
    """(file name, line number, resource or None, why not) for every line of every
    ``*.ndjson`` file of ``folder``; a line that is not a JSON object is named, not skipped."""
    for path in sorted(folder.glob("*.ndjson")):
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                yield (path.name, number, *parse_line(line))


def parse_line(line: str) -> tuple[dict[str, Any] | None, str | None]:
    """One NDJSON line as a resource, or why it is not one."""
    try:
        value = json.loads(line)
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(value, dict) or not isinstance(value.get("resourceType"), str):
        return None, "not a FHIR resource (no resourceType)"
    return value, None


def patient_of(resource: Mapping[str, Any]) -> str | None:
    """The id of the patient a resource belongs to: a Patient's own id, else the patient its
    ``subject`` (or ``patient``) references as ``Patient/id``; None for a resource no patient
    owns (a Medication) or one whose reference names no patient."""
    kind = resource.get("resourceType")
    if kind == "Patient":
        rid = resource.get("id")
        return rid if isinstance(rid, str) and rid else None
    ref = resource.get(_PATIENT_ELEMENT.get(str(kind), "subject"))
    if not isinstance(ref, Mapping):
        ref = resource.get("patient")
    target = ref.get("reference") if isinstance(ref, Mapping) else None
    if isinstance(target, str) and target.startswith("Patient/"):
        return target.removeprefix("Patient/") or None
    return None


def _codings(value: Any) -> Iterator[tuple[str | None, str | None]]:
    for concept in value if isinstance(value, list) else [value]:
        if isinstance(concept, Mapping):
            for coding in concept.get("coding") or ():
                if isinstance(coding, Mapping):
                    yield coding.get("system"), coding.get("code")


def _token_matches(resource: Mapping[str, Any], name: str, token: str) -> bool:
    element = _TOKEN_ELEMENT.get((str(resource.get("resourceType")), name), name)
    if element is None:
        raise TemplateUnsupported(f"{resource.get('resourceType')}?{name}= is not supported")
    system, bar, code = token.rpartition("|")
    for s, c in _codings(resource.get(element)):
        if c != code:
            continue
        if not bar or (system == "" and s is None) or s == system:
            return True
    return False


def _included(
    matches: Sequence[Mapping[str, Any]], include: str, shared: Mapping[str, Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``_include=Type:element``: the shared resources the matches reference through it."""
    _type, _, element = include.partition(":")
    element = {"medication": "medicationReference"}.get(element, element)
    out: dict[str, Mapping[str, Any]] = {}
    for r in matches:
        ref = r.get(element)
        target = ref.get("reference") if isinstance(ref, Mapping) else None
        if isinstance(target, str) and target in shared:
            out.setdefault(target, shared[target])
    return list(out.values())


def answer_template(
    query: str,
    patient: str,
    resources: Sequence[Mapping[str, Any]],
    shared: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The prefetch value an EHR's FHIR server gives for ``query`` (its ``{{context.patientId}}``
    filled with ``patient``) over one patient's ``resources``: a read's resource (None when
    there is none), a search's searchset Bundle with its matches and ``_include``s."""
    filled = query.replace("{{context.patientId}}", patient)
    if "{{" in filled:
        raise TemplateUnsupported(f"{query}: only {{{{context.patientId}}}} can be filled")
    path, _, params = filled.partition("?")
    kind, _, read_id = path.partition("/")
    if read_id:
        found = [r for r in resources if r.get("resourceType") == kind and r.get("id") == read_id]
        return dict(found[0]) if found else None
    matches = [r for r in resources if r.get("resourceType") == kind]
    includes: list[str] = []
    for name, value in parse_qsl(params, keep_blank_values=True):
        if name in ("patient", "subject"):
            matches = [r for r in matches if patient_of(r) == value.removeprefix("Patient/")]
        elif name in ("category", "code"):
            tokens = value.split(",")
            matches = [r for r in matches if any(_token_matches(r, name, t) for t in tokens)]
        elif name == "_include":
            includes.append(value)
        else:
            raise TemplateUnsupported(f"{query}: the search parameter {name!r} is not supported")
    included = [r for inc in includes for r in _included(matches, inc, shared)]
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(matches),
        "entry": [
            *({"resource": dict(r), "search": {"mode": "match"}} for r in matches),
            *({"resource": dict(r), "search": {"mode": "include"}} for r in included),
        ],
    }


__all__ = [
    "SHARED_TYPES",
    "TemplateUnsupported",
    "answer_template",
    "parse_line",
    "patient_of",
    "read_ndjson",
]
