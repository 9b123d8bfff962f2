"""The compiled R4 shapes against the ``fhir.resources`` models, over every resource the
repository's fixtures, examples and conformance requests carry and mutants of them.

The shapes decide first and must never accept what the models refuse (the models stay the floor
and word what they refuse); where R4 refuses what the models let through (``"12"`` for a
number, a status outside its required value set), the shapes refuse it and say why.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fhir.resources.R4B import get_fhir_model_class
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cds.fhir_data import readable, resource_issues
from app.fhir_validate import problems, required_codes
from tests.support.depth import examples

DATA = Path(__file__).resolve().parents[1] / "data"


def _resources(value: Any) -> Iterator[dict[str, Any]]:
    """Every resource in a JSON document (a Bundle's entries each too, besides the Bundle)."""
    if isinstance(value, dict):
        if isinstance(value.get("resourceType"), str):
            yield value
        for item in value.values():
            yield from _resources(item)
    elif isinstance(value, list):
        for item in value:
            yield from _resources(item)


def _seeds() -> list[dict[str, Any]]:
    seeds: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in sorted(DATA.rglob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        for resource in _resources(document):
            key = json.dumps(resource, sort_keys=True)
            if key not in seen and len(key) < 20_000:
                seen.add(key)
                seeds.append(resource)
    return seeds


SEEDS = _seeds()


def _models_refuse(resource: Any) -> bool:
    try:
        get_fhir_model_class(resource["resourceType"]).model_validate(resource)
    except Exception:  # any refusal of the models counts
        return True
    return False


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*at, i))


REPLACEMENTS: list[Any] = [
    None,
    "",
    " final",
    "12",
    "12.5",
    "true",
    12,
    12.5,
    0,
    -1,
    2**31,
    True,
    [],
    {},
    [None],
    {"unknown": 1},
    "2024-02-30",
    "2024-01-01T10:00:00",
    "2024-13-01",
    "done",
    "a b",
    "urn:oid:1.2",
    [{"text": "x"}],
    "x",
    1.0,
    "2024",
    "2024-01-01T10:00:00Z",
    "10:00",
    {"text": "x"},
    [1],
    [""],
    {"reference": "Patient/1"},
    "http://x y",
    "urn:uuid:ABC",
    "<p>x</p>",
]


def _mutate(resource: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """``resource`` with one to three elements replaced, removed, wrapped in or taken out of a
    list, given a choice sibling, or moved to their ``_element`` partner."""
    out = copy.deepcopy(resource)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        _mutate_once(out, data)
    return out


def _mutate_once(out: dict[str, Any], data: st.DataObject) -> None:
    paths = [p for p in _paths(out) if p and p != ("resourceType",)]
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    how = data.draw(st.sampled_from(["replace", "delete", "wrap", "unwrap", "sibling", "rename"]))
    if how == "replace":
        parent[last] = copy.deepcopy(data.draw(st.sampled_from(REPLACEMENTS)))
    elif how == "delete":
        del parent[last]
    elif how == "wrap":
        parent[last] = [parent[last]]
    elif how == "unwrap" and isinstance(parent[last], list) and parent[last]:
        parent[last] = parent[last][0]
    elif how == "sibling" and isinstance(parent, dict) and isinstance(last, str):
        other = data.draw(st.sampled_from(["valueString", "valueBoolean", "effectivePeriod"]))
        parent[other] = {"start": "2024-01-01"} if other.endswith("Period") else "x"
        if other == "valueBoolean":
            parent[other] = True
    elif how == "rename" and isinstance(parent, dict) and isinstance(last, str):
        parent[f"_{last}"] = parent.pop(last)


def test_the_repository_has_resources_to_mutate() -> None:
    types = {r["resourceType"] for r in SEEDS}
    assert len(SEEDS) > 100
    assert {"Observation", "MedicationRequest", "Condition", "Patient", "Bundle"} <= types


@pytest.mark.parametrize("seed", SEEDS, ids=lambda r: f"{r['resourceType']}/{r.get('id')}")
def test_every_resource_in_the_repository_gets_the_models_verdict(seed: dict[str, Any]) -> None:
    """Complete data stays decided: what the models accept, the shapes accept too."""
    assert bool(problems(seed)) == _models_refuse(seed), problems(seed)


@settings(
    max_examples=examples(3000),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=st.sampled_from(SEEDS), data=st.data())
def test_no_mutant_the_models_refuse_is_accepted(seed: dict[str, Any], data: Any) -> None:
    mutant = _mutate(seed, data)
    if not problems(mutant):
        assert not _models_refuse(mutant), json.dumps(mutant)[:2000]


def _observation(**extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": "hr-1",
        "status": "final",
        "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4"}]},
        "subject": {"reference": "Patient/p1"},
        "effectiveDateTime": "2024-05-01T10:00:00Z",
        "valueQuantity": {"value": 72, "unit": "/min"},
        **extra,
    }


def _searchset(resource: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Bundle", "type": "searchset", "entry": [{"resource": resource}]}


def test_a_status_outside_its_required_value_set_is_unread() -> None:
    """The models let ``status: "done"`` through; R4 binds Observation.status (a modifier)."""
    assert not _models_refuse(_observation(status="done"))
    kept, [bad] = readable(_searchset(_observation(status="done")), "prefetch.vitals")
    assert kept["entry"] == []
    assert bad.reference == "Observation/hr-1"
    assert bad.why.startswith("status: 'done' is not a code R4 allows here")
    assert readable(_searchset(_observation()), "prefetch.vitals")[1] == []


def test_a_number_given_as_a_string_is_unread() -> None:
    """The models read ``"12"`` as 12; in R4 JSON a decimal is a number."""
    text = _observation(valueQuantity={"value": "12", "unit": "/min"})
    assert not _models_refuse(text)
    kept, [bad] = readable(_searchset(text), "prefetch.vitals")
    assert kept["entry"] == []
    assert bad.why == "value quantity value: must be a number, not a string"
    assert readable(_searchset(_observation(valueQuantity={"value": 12})), "x")[1] == []


@pytest.mark.parametrize(
    ("extra", "element", "rule"),
    [
        ({"valueString": "72"}, ".valueString", "value[x] is given more than once"),
        ({"effectiveDateTime": "2024-02-30"}, ".effectiveDateTime", "calendar"),
        ({"effectiveDateTime": "2024-05-01T10:00:00"}, ".effectiveDateTime", "offset"),
        # a time needs a whole date before it (said as the form it breaks, not as a bad day)
        ({"effectiveDateTime": "2024T10:00:00Z"}, ".effectiveDateTime", "a date, or a date and"),
        ({"category": [None]}, ".category[0]", "must not be null"),
        ({"status": "final "}, ".status", "a code"),
        ({"valueInteger": 2**31, "valueQuantity": None}, ".valueQuantity", "null"),
        ({"id": 12}, ".id", "must be a string, not a number"),
        ({"fhir_comments": ["x"]}, ".fhir_comments", "not an element of R4 Observation"),
    ],
)
def test_what_r4_refuses_the_shapes_refuse(extra: dict[str, Any], element: str, rule: str) -> None:
    found = problems(_observation(**extra))
    assert any(at == element and rule in why for at, why in found), found


def test_a_refusal_both_make_keeps_the_models_wording() -> None:
    """The cards and notes word a refusal as the models do, where the models refuse too."""
    broken = _observation(effectiveDateTime="yesterday")
    assert problems(broken)
    [issue] = resource_issues(broken, "prefetch.vitals")
    assert issue.expression == "prefetch.vitals.effectiveDateTime"
    assert "DateTime value string does not match spec regex" in issue.diagnostics


def test_the_required_codes_hold_every_code_the_models_list() -> None:
    """The models list the first codes of each binding ("+" for the rest): all are kept."""
    for element, codes in required_codes().items():
        rtype, name = element.split(".")
        extra = get_fhir_model_class(rtype).model_fields[name].json_schema_extra
        assert isinstance(extra, dict)
        listed = {c for c in extra.get("enum_values", []) if c != "+"}
        assert listed <= codes, element
