"""The direct evaluator of FHIRPath (app.fhir.reading) answers as fhirpathpy does.

Every ``horis:where`` filter and every ``horis:fhirPath`` reading outside plain member paths of
the bundled ontologies, and a few more in the same subset, is evaluated on many generated
resources both ways: through ``evaluate`` (the direct walk, with its fallbacks) and through
fhirpathpy itself.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from fhirpathpy import compile as fhirpath_compile

from app.fhir import reading

ROOT = Path(__file__).resolve().parents[2]
_WHERE = re.compile(r'horis:(?:where|upperBoundWhen)\s+"([^"]+)"')
_READING = re.compile(r'horis:fhirPath\s+"([^"]+)"')
_MEMBER_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$")


def _bundled(pattern: re.Pattern[str]) -> list[str]:
    found: set[str] = set()
    for path in (ROOT / "ontologies").rglob("*.ttl"):
        found.update(pattern.findall(path.read_text(encoding="utf-8")))
    return sorted(e for e in found if not _MEMBER_PATH.match(e))


def _bundled_filters() -> list[str]:
    return _bundled(_WHERE)


def _bundled_readings() -> list[str]:
    return _bundled(_READING)


EXTRA = [
    "code.coding.where(system = 'http://loinc.org' and code = '8867-4').exists()",
    "'final' = status",
    "status = 'final' or status = 'amended'",
    "(status = 'final' or status = 'amended') and subject.exists()",
    "category.coding.code = 'vital-signs'",
    "identifier.where(value = 'x').empty()",
    # a path compared with a number, the number on either side
    "valueQuantity.value > 0.1",
    "0 < valueQuantity.value",
    "valueQuantity.value >= 21 and status = 'final'",
    "component.where(valueQuantity.value <= 5).exists()",
    "component.valueQuantity.value < 7.5",
]
#: collections: unions, select, first, count, iif
EXTRA_VALUES = [
    "dosageInstruction.doseAndRate.doseQuantity.value"
    " | dosageInstruction.doseAndRate.doseRange.high.value",
    "dosageInstruction.doseAndRate.select(doseQuantity.code | doseRange.high.code).first()",
    "dosageInstruction.select(timing.repeat.timeOfDay).count()",
    "iif(code.text.exists(), code.text)",
    "iif(status = 'final', code.coding.code, category.coding.code.first())",
    "(code.coding.display | code.text).count()",
    "code.coding.where(system = 'http://loinc.org').select(code)",
]
CODES = [
    "active",
    "refuted",
    "entered-in-error",
    "encounter-diagnosis",
    "problem-list-item",
    "final",
    "amended",
    "8867-4",
    "vital-signs",
    "x",
    "",
    "Active",
    "3151-8",
    "3150-0",
]
SYSTEMS = ["http://loinc.org", "http://snomed.info/sct", None]


def _coding(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.05:
        return None  # a null in an array
    if roll < 0.1:
        return rng.choice([1, True, "active", [], {}])
    out: dict[str, Any] = {}
    if rng.random() < 0.85:
        out["code"] = rng.choice([*CODES, 7, None, ["active"]])
    if rng.random() < 0.1:
        out["_code"] = {"extension": [{"url": "u", "valueString": "v"}]}
    system = rng.choice(SYSTEMS)
    if system:
        out["system"] = system
    return out


def _concept(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.2:
        return "active"
    codings = [_coding(rng) for _ in range(rng.randint(0, 3))]
    concept: dict[str, Any] = {}
    if rng.random() < 0.8:
        concept["coding"] = codings if rng.random() < 0.9 else (codings[0] if codings else {})
    if rng.random() < 0.2:
        concept["text"] = rng.choice(["t", "Vicodin 5/500", ""])
    if concept.get("coding") and isinstance(concept["coding"], list):
        for c in concept["coding"]:
            if isinstance(c, dict) and rng.random() < 0.5:
                c["display"] = rng.choice(["Oxycodone 5 MG", "d", 3, None])
    return concept


def _resource(rng: random.Random) -> dict[str, Any]:
    r: dict[str, Any] = {"resourceType": rng.choice(["Condition", "Observation"]), "id": "r"}
    for name in ("clinicalStatus", "verificationStatus", "code"):
        value = _concept(rng)
        if value is not None:
            r[name] = value
    if rng.random() < 0.8:
        r["category"] = [_concept(rng) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.6:
        r["status"] = rng.choice([*CODES, 3])
    if rng.random() < 0.1:
        r["_status"] = {"extension": []}
    if rng.random() < 0.5:
        r["authoredOn"] = rng.choice(["2026-01-02", "", None])
    if rng.random() < 0.1:
        r["_authoredOn"] = {"extension": [{"url": "u", "valueCode": "unknown"}]}
    if rng.random() < 0.5:
        r["dosageInstruction"] = [_dosage(rng) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.3:
        r["medicationCodeableConcept"] = _concept(rng)
    if rng.random() < 0.4:
        r["subject"] = {"reference": "Patient/p"}
    if rng.random() < 0.3:
        r["identifier"] = [{"value": rng.choice(["x", "y", None])}]
    if rng.random() < 0.5:
        r["valueQuantity"] = _quantity(rng)
    if rng.random() < 0.5:
        r["component"] = [
            {"code": _concept(rng), "valueQuantity": _quantity(rng)}
            for _ in range(rng.randint(0, 3))
        ]
    return r


def _quantity(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([None, "5 mg", []])
    out: dict[str, Any] = {}
    if rng.random() < 0.9:
        out["value"] = rng.choice(
            [5, 7.5, 0.1, 10.0, 1e-05, 2, 21, 0, 21.000000000000004, "5", None, True]
        )
    if rng.random() < 0.8:
        out["code"] = rng.choice(["mg", "{tbl}", "mL", None])
    if rng.random() < 0.05:
        out["_value"] = {"extension": []}
    return out


def _dosage(rng: random.Random) -> dict[str, Any]:
    dosage: dict[str, Any] = {
        "timing": {"event": rng.choice([["2026-01-01"], [], None, "2026-01-01"])}
    }
    if rng.random() < 0.5:
        dosage["timing"]["repeat"] = {
            "timeOfDay": rng.choice([["08:00:00"], ["08:00:00", "20:00:00"], [], None])
        }
    rates = []
    for _ in range(rng.randint(0, 3)):
        rate: dict[str, Any] = {}
        if rng.random() < 0.4:
            rate["type"] = _concept(rng) or {"coding": [{"code": "ordered"}]}
        if rng.random() < 0.6:
            rate["doseQuantity"] = _quantity(rng)
        if rng.random() < 0.4:
            rate["doseRange"] = {"high": _quantity(rng), "low": _quantity(rng)}
        rates.append(rate)
    if rates or rng.random() < 0.5:
        dosage["doseAndRate"] = rates
    return dosage


def _fhirpathpy(resource: dict[str, Any], expression: str) -> list[Any]:
    compiled: Any = fhirpath_compile(expression, None)
    result = compiled(dict(resource))
    return list(result) if isinstance(result, list) else [result]


def _answer(evaluate: Any, resource: dict[str, Any], expression: str) -> Any:
    """What an evaluation gives, or the error it raises (a comparison with a string, say):
    the direct path must fail where fhirpathpy fails, never answer instead."""
    try:
        return evaluate(resource, expression)
    except Exception as exc:  # fhirpathpy raises bare Exceptions
        return ("raised", type(exc).__name__, str(exc))


@pytest.mark.parametrize("expression", [*_bundled_filters(), *EXTRA])
def test_direct_filters_answer_as_fhirpathpy(expression: str) -> None:
    rng = random.Random(expression)
    for _ in range(400):
        resource = _resource(rng)
        assert _answer(reading.evaluate, resource, expression) == _answer(
            _fhirpathpy, resource, expression
        ), (expression, resource)


@pytest.mark.parametrize("expression", [*_bundled_readings(), *EXTRA_VALUES])
def test_direct_readings_answer_as_fhirpathpy(expression: str) -> None:
    rng = random.Random(expression)
    for _ in range(600):
        resource = _resource(rng)
        direct = reading.evaluate(resource, expression)
        expected = _fhirpathpy(resource, expression)
        assert direct == expected, (expression, resource)
        assert [type(v) for v in direct] == [type(v) for v in expected], (expression, resource)


def test_the_bundled_readings_take_the_direct_path() -> None:
    readings = _bundled_readings()
    assert len(readings) >= 4
    assert [e for e in readings if reading._subset(e, None) is None] == []


def test_the_bundled_filters_take_the_direct_path() -> None:
    """Each bundled filter is in the subset, so hydration does not run fhirpathpy for it."""
    filters = _bundled_filters()
    assert filters
    outside = [e for e in filters if reading._subset(e, None) is None]
    assert outside == []


@pytest.mark.parametrize(
    "expression",
    ["code.coding.where(code != 'x').exists()", "status.length() > 2", "Condition.code.exists()"],
)
def test_expressions_outside_the_subset_go_to_fhirpathpy(expression: str) -> None:
    assert reading._subset(expression, None) is None
    resource = {"resourceType": "Condition", "status": "abc", "code": {"coding": [{"code": "y"}]}}
    assert reading.evaluate(resource, expression) == _fhirpathpy(resource, expression)
