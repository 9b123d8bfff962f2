"""Soundness under incomplete inputs, as a property over both bundled deployments.

For any complete input, and any single input then made absent, refused, stale or truncated, the
decision either stays the same or becomes undecided — never a different decided value. The
inputs are FHIR resources as an EHR sends them, read by the same hydration a hook call uses,
run by the same interpreter (no tools, no Bridge: what is decided is the World's value of the
workflow's ``horis:decides`` property when the run is not undecided).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cds.hook_input import apply_api_facts
from app.fhir.hydrate import hydrate
from app.ontology import load_ontology
from app.ontology.loader import default_ontology_paths
from app.ontology.model import Ontology
from app.runtime.context import RunContext
from app.runtime.interpreter import run_workflow
from app.world import World
from app.world.facts import Violation
from tests.support.depth import examples

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LOINC, SNOMED, UCUM = "http://loinc.org", "http://snomed.info/sct", "http://unitsofmeasure.org"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
PID = "p1"
Resource = dict[str, Any]


def _ontology(name: str) -> Ontology:
    [path] = [p for p in default_ontology_paths() if p.name == name]
    return load_ontology([path])


TRIAGE, MED = _ontology("triage.ttl"), _ontology("med-safety.ttl")


def _obs(code: str, value: float, unit: str, *, lab: bool = False, age_h: float = 0.5) -> Resource:
    category = "laboratory" if lab else "vital-signs"
    return {
        "resourceType": "Observation",
        "id": f"{code}-{value}",
        "status": "final",
        "category": [{"coding": [{"code": category}]}],
        "code": {"coding": [{"system": LOINC, "code": code}]},
        "subject": {"reference": f"Patient/{PID}"},
        "effectiveDateTime": (NOW - timedelta(hours=age_h)).isoformat(),
        "valueQuantity": {"value": value, "unit": unit, "system": UCUM, "code": unit},
    }


def _searchset(resources: list[Resource]) -> Resource:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(resources),
        "entry": [{"resource": r} for r in resources],
    }


# --- one input made incomplete -------------------------------------------------------------


def _absent(r: Resource) -> Resource | None:
    return None


def _refused(r: Resource) -> Resource | None:
    out = {**r, "valueQuantity": {"value": r["valueQuantity"]["value"], "unit": "units"}}
    return out


def _stale(r: Resource) -> Resource | None:
    return {**r, "effectiveDateTime": (NOW - timedelta(days=400)).isoformat()}


MUTATIONS: dict[str, Callable[[Resource], Resource | None]] = {
    "absent": _absent,
    "refused": _refused,
    "stale": _stale,
}


# --- one record there but unreadable ----------------------------------------------------------


def _local_code(r: Resource) -> Resource:
    """Coded only in a local system the deployment does not read."""
    return {**r, "code": {"coding": [{"system": "urn:local:codes", "code": "X1"}], "text": "?"}}


def _text_only(r: Resource) -> Resource:
    return {**r, "code": {"text": "recorded as text"}}


def _future(r: Resource) -> Resource:
    return {**r, "effectiveDateTime": (NOW + timedelta(hours=3)).isoformat()}


def _bound(r: Resource) -> Resource:
    return {**r, "valueQuantity": {**r["valueQuantity"], "comparator": "<"}}


def _as_text(r: Resource) -> Resource:
    out = {k: v for k, v in r.items() if k != "valueQuantity"}
    return {**out, "valueString": str(r["valueQuantity"]["value"])}


def _disagreeing(r: Resource) -> Resource:
    """A second reading at the same instant, far from the first."""
    value = r["valueQuantity"]["value"]
    return {**r, "id": r["id"] + "-b", "valueQuantity": {**r["valueQuantity"], "value": value / 3}}


#: a reading replaced by one that is there but cannot be read as it was (or joined by one that
#: disagrees with it at the same instant): each may leave a decision undecided, never different
UNREAD_READINGS: dict[str, Callable[[Resource], list[Resource]]] = {
    "unread-local-code": lambda r: [_local_code(r)],
    "unread-text-only": lambda r: [_text_only(r)],
    "future": lambda r: [_future(r)],
    "bound": lambda r: [_bound(r)],
    "value-as-text": lambda r: [_as_text(r)],
    "conflicting": lambda r: [r, _disagreeing(r)],
}


def _decide(
    onto: Ontology,
    service: str,
    data: dict[str, Any],
    context: dict[str, Any],
    truncated: dict[str, str] | None = None,
) -> str | None:
    """``undecided``, the decided value (local name), or None (no decision, decided so)."""
    svc = onto.service(service)
    workflow = onto.workflows[svc.workflow]
    assert workflow.focus is not None and workflow.decides is not None
    h = hydrate(
        onto,
        focus_id=PID,
        focus_class=workflow.focus,
        data=data,
        context=context,
        now=NOW,
        prefetch=svc.prefetch,
        truncated=truncated,
    )
    world = World(onto, now=NOW)
    problems: list[Violation] = []
    apply_api_facts(world, h.changes, problems, inputs=h.inputs)
    outcome = run_workflow(onto, workflow.iri, world, RunContext(now=NOW, inputs=h.inputs))
    if outcome.undecided is not None:
        return "undecided"
    value = world.value(PID, workflow.decides)
    return value.rsplit("#", 1)[-1] if isinstance(value, str) else None


def _sound(before: str | None, after: str | None) -> bool:
    return after == before or after == "undecided"


# --- triage --------------------------------------------------------------------------------

VITALS = {  # code: (unit, low, high)
    "8867-4": ("/min", 20, 220),
    "9279-1": ("/min", 4, 45),
    "59408-5": ("%", 70, 100),
    "8480-6": ("mm[Hg]", 60, 220),
    "8310-5": ("Cel", 34, 41.5),
}
SYMPTOMS = ["29857009", "267036007", "271594007", "422768004", "25064002", "386661006"]


@st.composite
def _triage_inputs(draw: st.DrawFn) -> tuple[list[Resource], list[Resource]]:
    vitals = [
        _obs(code, draw(st.integers(int(low * 10), int(high * 10))) / 10, unit)
        for code, (unit, low, high) in VITALS.items()
    ]
    conditions = [
        _triage_condition(code)
        for code in draw(st.lists(st.sampled_from(SYMPTOMS), max_size=2, unique=True))
    ]
    return vitals, conditions


def _triage_condition(code: str) -> Resource:
    return {
        "resourceType": "Condition",
        "id": f"c-{code}",
        "clinicalStatus": {"coding": [{"code": "active"}]},
        "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
        "code": {
            "coding": [{"system": SNOMED, "code": SYMPTOMS[0] if code == "unread-c" else code}]
        },
        "subject": {"reference": f"Patient/{PID}"},
    }


def _triage(vitals: list[Resource], conditions: list[Resource] | None, **kw: Any) -> str | None:
    data = {
        "patient": {"resourceType": "Patient", "id": PID, "birthDate": "1950-04-02"},
        "encounter": {
            "resourceType": "Encounter",
            "id": "e1",
            "status": "in-progress",
            "class": {"code": "EMER"},
            "subject": {"reference": f"Patient/{PID}"},
        },
        "vitals": _searchset(vitals),
        "conditions": None if conditions is None else _searchset(conditions),
    }
    return _decide(TRIAGE, "horismos-triage", data, {"patientId": PID, "encounterId": "e1"}, **kw)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=_triage_inputs(),
    which=st.integers(0, len(VITALS) - 1),
    how=st.sampled_from([*MUTATIONS, "truncated", "conditions-absent"]),
)
def test_triage_never_decides_differently_on_less(
    inputs: tuple[list[Resource], list[Resource]], which: int, how: str
) -> None:
    vitals, conditions = inputs
    before = _triage(vitals, conditions)
    assert before not in (None, "undecided")  # complete inputs always decide an acuity
    if how == "truncated":
        after = _triage(vitals, conditions, truncated={"vitals": "it has more than 10 pages"})
    elif how == "conditions-absent":
        after = _triage(vitals, None)
    else:
        changed = MUTATIONS[how](vitals[which])
        rest = [v for i, v in enumerate(vitals) if i != which]
        after = _triage([*rest, *([changed] if changed else [])], conditions)
    assert _sound(before, after), (before, after, how, which)


def _unread_condition(c: Resource, how: str) -> Resource:
    if how == "condition-icd10":
        return {
            **c,
            # an ICD-10-CM code triage does not list (its lists are closed over SNOMED CT only)
            "code": {"coding": [{"system": "http://hl7.org/fhir/sid/icd-10-cm", "code": "E11.9"}]},
        }
    if how == "condition-no-category":
        return {k: v for k, v in c.items() if k != "category"}
    return {k: v for k, v in c.items() if k != "clinicalStatus"}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=_triage_inputs(),
    which=st.integers(0, len(VITALS) - 1),
    how=st.sampled_from(
        [*UNREAD_READINGS, "condition-icd10", "condition-no-category", "condition-no-status"]
    ),
)
def test_triage_never_decides_differently_with_one_record_unread(
    inputs: tuple[list[Resource], list[Resource]], which: int, how: str
) -> None:
    vitals, conditions = inputs
    before = _triage(vitals, conditions)
    assert before not in (None, "undecided")
    if how.startswith("condition-"):
        extra = _triage_condition("unread-c")
        after = _triage(vitals, [*conditions, _unread_condition(extra, how)])
    else:
        rest = [v for i, v in enumerate(vitals) if i != which]
        after = _triage([*rest, *UNREAD_READINGS[how](vitals[which])], conditions)
    assert _sound(before, after), (before, after, how, which)


# --- medication safety ---------------------------------------------------------------------

ORDERS = ["5640", "7258", "3355", "723", "733", "6809", "29046"]
LABS = {"33914-3": ("mL/min/{1.73_m2}", 5, 130), "2823-3": ("mmol/L", 2.5, 7.5)}
ALLERGIES = ["91936005", "764146007"]


def _order(rx: str) -> Resource:
    return {
        "resourceType": "MedicationRequest",
        "id": f"o-{rx}",
        "status": "draft",
        "intent": "order",
        "medicationCodeableConcept": {"coding": [{"system": RXNORM, "code": rx}]},
        "subject": {"reference": f"Patient/{PID}"},
    }


def _allergy(code: str) -> Resource:
    return {
        "resourceType": "AllergyIntolerance",
        "id": f"a-{code}",
        "clinicalStatus": {"coding": [{"code": "active"}]},
        "code": {"coding": [{"system": SNOMED, "code": code}]},
        "patient": {"reference": f"Patient/{PID}"},
    }


@st.composite
def _med_inputs(draw: st.DrawFn) -> tuple[list[str], list[Resource], list[str], int]:
    orders = draw(st.lists(st.sampled_from(ORDERS), min_size=1, max_size=2, unique=True))
    labs = [
        _obs(code, draw(st.integers(int(low * 10), int(high * 10))) / 10, unit, lab=True, age_h=24)
        for code, (unit, low, high) in LABS.items()
    ]
    allergies = draw(st.lists(st.sampled_from(ALLERGIES), max_size=1))
    age = draw(st.integers(20, 95))
    return orders, labs, allergies, age


def _med(
    orders: list[str],
    labs: list[Resource],
    allergies: list[str | Resource] | None,
    age: int,
    *,
    extra_orders: Sequence[Resource] = (),
    allergy_error: bool = False,
    **kw: Any,
) -> str | None:
    found = None
    if allergies is not None:
        found = _searchset([a if isinstance(a, dict) else _allergy(a) for a in allergies])
        if allergy_error:
            outcome = {
                "resourceType": "OperationOutcome",
                "issue": [{"severity": "error", "code": "exception", "diagnostics": "down"}],
            }
            found["entry"].append({"resource": outcome, "search": {"mode": "outcome"}})
    data = {
        "patient": {"resourceType": "Patient", "id": PID, "birthDate": f"{NOW.year - age}-01-01"},
        "allergies": found,
        "labs": _searchset(labs),
    }
    draft = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": _order(rx)} for rx in orders]
        + [{"resource": o} for o in extra_orders],
    }
    context = {"patientId": PID, "draftOrders": draft}
    return _decide(MED, "horismos-med-safety", data, context, **kw)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=_med_inputs(),
    which=st.integers(0, len(LABS) - 1),
    how=st.sampled_from([*MUTATIONS, "truncated", "allergies-absent"]),
)
def test_med_safety_never_decides_differently_on_less(
    inputs: tuple[list[str], list[Resource], list[str], int], which: int, how: str
) -> None:
    orders, labs, allergies, age = inputs
    before = _med(orders, labs, allergies, age)
    assert before not in (None, "undecided")  # a draft order with complete inputs is decided
    if how == "truncated":
        after = _med(orders, labs, allergies, age, truncated={"labs": "it has more than 10 pages"})
    elif how == "allergies-absent":
        after = _med(orders, labs, None, age)
    else:
        changed = MUTATIONS[how](labs[which])
        rest = [v for i, v in enumerate(labs) if i != which]
        after = _med(orders, [*rest, *([changed] if changed else [])], allergies, age)
    assert _sound(before, after), (before, after, how, which)


def _unread_order(rx: str) -> Resource:
    return {**_order(rx), "id": "o-unread", "medicationCodeableConcept": {"text": "a new drug"}}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    inputs=_med_inputs(),
    which=st.integers(0, len(LABS) - 1),
    how=st.sampled_from(
        [
            *UNREAD_READINGS,
            "order-text-only",
            "order-by-product",
            "allergy-rxnorm",
            "allergy-no-status",
            "allergies-error",
        ]
    ),
)
def test_med_safety_never_decides_differently_with_one_record_unread(
    inputs: tuple[list[str], list[Resource], list[str], int], which: int, how: str
) -> None:
    orders, labs, allergies, age = inputs
    before = _med(orders, labs, allergies, age)
    assert before not in (None, "undecided")
    if how in UNREAD_READINGS:
        rest = [v for i, v in enumerate(labs) if i != which]
        after = _med(orders, [*rest, *UNREAD_READINGS[how](labs[which])], allergies, age)
    elif how.startswith("order-"):
        extra = _unread_order(orders[0])
        if how == "order-by-product":
            # celecoxib 200 MG Oral Capsule: an NSAID product the deployment does not list
            extra["medicationCodeableConcept"] = {"coding": [{"system": RXNORM, "code": "205323"}]}
        after = _med(orders, labs, allergies, age, extra_orders=[extra])
    elif how == "allergies-error":
        after = _med(orders, labs, allergies, age, allergy_error=True)
    else:
        unread = _allergy("91936005")
        unread["id"] = "a-unread"
        if how == "allergy-rxnorm":
            unread["code"] = {"coding": [{"system": RXNORM, "code": "70618"}]}
        else:
            del unread["clinicalStatus"]
        after = _med(orders, labs, [*allergies, unread], age)
    assert _sound(before, after), (before, after, how, which)


@pytest.mark.parametrize("how", sorted(UNREAD_READINGS))
def test_an_unread_reading_that_matters_makes_triage_undecided(how: str) -> None:
    """Not vacuous either: the one SpO2 that decides, made unreadable, is seen."""
    normal = {"8867-4": 80, "9279-1": 16, "59408-5": 98, "8480-6": 120, "8310-5": 36.8}
    vitals = [_obs(code, value, VITALS[code][0]) for code, value in normal.items()]
    assert _triage(vitals, []) == "NonUrgent"
    changed = UNREAD_READINGS[how](vitals[2])  # the SpO2
    assert _triage([*vitals[:2], *vitals[3:], *changed], []) == "undecided"


@pytest.mark.parametrize("how", sorted(MUTATIONS))
def test_an_incomplete_reading_that_matters_makes_triage_undecided(how: str) -> None:
    """The property is not vacuous: removing, refusing or ageing the one reading that would
    make triage Immediate is seen, not decided around."""
    normal = {"8867-4": 80, "9279-1": 16, "59408-5": 98, "8480-6": 120, "8310-5": 36.8}
    vitals = [_obs(code, value, VITALS[code][0]) for code, value in normal.items()]
    assert _triage(vitals, []) == "NonUrgent"
    changed = MUTATIONS[how](vitals[2])  # the SpO2
    assert _triage([*vitals[:2], *vitals[3:], *([changed] if changed else [])], []) == "undecided"
