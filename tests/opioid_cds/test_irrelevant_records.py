"""Per-record incompleteness, as a property: a decided opioid chart stays decided, with the same
answer, when realistic records that cannot change the decision are added to it — another drug
stopped years ago with no category or supply (as Synthea writes it), an opioid stopped years ago
with no supply, a condition no list of the guide names with no category, an old visit. The
complete chart without them is decided too."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.depth import examples
from tests.support.opioid_cases import (
    HYDROCODONE_10,
    OXYCODONE_IR_5,
    TEMAZEPAM_20,
    ago,
    case,
    condition,
    encounter,
    order,
    patient,
)

P = "p-irrelevant"
ADULT = patient(P)
#: SNOMED CT conditions no value set of the guide lists (checked in the test)
UNRELATED_CONDITIONS = ("44465007", "40055000", "195662009", "10509002")  # sprain, sinusitis,
# viral pharyngitis, acute bronchitis
#: RxNorm drugs that are neither opioids nor benzodiazepines nor CNS depressants
UNRELATED_DRUGS = (
    ("308136", "amLODIPine 2.5 MG Oral Tablet"),
    ("310798", "Hydrochlorothiazide 25 MG Oral Tablet"),
    ("748962", "Camila 0.35 MG Oral Tablet"),
)


def fills() -> list[dict[str, Any]]:
    """Three back-to-back 30-day fills: 21 days or more of each of the past three months (dated
    from today when the test runs)."""
    return [
        order(f"fill-{days}", P, OXYCODONE_IR_5, authored=ago(days), status="completed")
        for days in (88, 58, 28)
    ]


def on_record(service: str) -> list[dict[str, Any]]:
    """The chart each service decides on, complete."""
    if service == "opioidcds-07":
        # on opioids long-term, no misuse assessment: evaluate benefits and risks; an opioid
        # stopped years ago with no supply could only add days to months already past 21
        return fills()
    if service == "opioidcds-08":
        # benzodiazepine on record: naloxone applies
        return [order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40))]
    # an opioid on record with its supply: counted in the total with the draft (52.5 MME)
    return [order("stored-oxy", P, OXYCODONE_IR_5, authored=ago(10), frequency=3, supply_days=30)]


SERVICES = ("opioidcds-04-05", "opioidcds-07", "opioidcds-08")


def _decision(client: TestClient, service: str, stored: list[dict[str, Any]]) -> str:
    draft = order("draft-hydrocodone", P, HYDROCODONE_10, dose=3)
    request = copy.deepcopy(
        case("irrelevant", service, "order-sign", ADULT, drafts=[draft]).request
    )
    request["hookInstance"] = str(uuid.uuid4())
    entries = [{"resource": r, "search": {"mode": "match"}} for r in stored]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_type.setdefault(e["resource"]["resourceType"], []).append(e)

    def searchset(kind: str) -> dict[str, Any]:
        found = by_type.get(kind, [])
        return {"resourceType": "Bundle", "type": "searchset", "total": len(found), "entry": found}

    # recommendation 7 names its medication key after the resource type
    medications = "medicationRequests" if service == "opioidcds-07" else "medications"
    request["prefetch"] = {
        "patient": ADULT,
        medications: searchset("MedicationRequest"),
        "conditions": searchset("Condition"),
        "encounters": searchset("Encounter"),
        "procedures": searchset("Procedure"),
        "statements": searchset("MedicationStatement"),
    }
    answer = client.post(f"/cds-services/{service}", json=request)
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()["extension"]["dev.horismos.run"]
    if "undecided" in run:
        return "undecided: " + ", ".join(sorted(i["input"] for i in run["undecided"]["inputs"]))
    return str(run["decision"]["value"])


def _stopped_order(i: int, drug: tuple[str, str], years: int) -> dict[str, Any]:
    """Another drug, stopped years ago, as Synthea writes it: no category, no supply."""
    written = order(
        f"old-{i}", P, drug, authored=ago(365 * years), status="stopped", supply_days=None
    )
    del written["category"], written["dispenseRequest"]
    return written


def _condition(i: int, code: str) -> dict[str, Any]:
    written = condition(f"cond-{i}", P, code, recorded=ago(400))
    del written["category"]
    return written


RECORDS = st.one_of(
    st.builds(
        _stopped_order, st.integers(0, 10**6), st.sampled_from(UNRELATED_DRUGS), st.integers(3, 12)
    ),
    # an opioid stopped years ago with no supply: unread for its supply, counted nowhere
    st.builds(_stopped_order, st.integers(0, 10**6), st.just(OXYCODONE_IR_5), st.integers(3, 12)),
    st.builds(_condition, st.integers(0, 10**6), st.sampled_from(UNRELATED_CONDITIONS)),
    st.builds(
        lambda i, days: encounter(f"enc-{i}", P, start=ago(days)),
        st.integers(0, 10**6),
        st.integers(30, 3000),
    ),
)


@pytest.mark.parametrize("service", SERVICES)
@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(added=st.lists(RECORDS, min_size=1, max_size=3, unique_by=lambda r: r["id"]))
def test_an_irrelevant_record_leaves_a_decided_chart_decided(
    client: TestClient, service: str, added: list[dict[str, Any]]
) -> None:
    base = on_record(service)
    before = _decision(client, service, base)
    assert not before.startswith("undecided"), before  # the complete twin decides
    assert _decision(client, service, [*base, *added]) == before


def test_an_opioid_without_supply_that_could_complete_the_months_still_blocks(
    client: TestClient,
) -> None:
    """The twin of the above for recommendation 7: with the first month's fill missing, an
    opioid authored 89 days ago with no supply could cover that month, so the check waits."""
    three_fills = fills()
    two_fills = three_fills[1:]
    assert _decision(client, "opioidcds-07", two_fills) == "NoAdvice"
    unknown = order("no-supply", P, OXYCODONE_IR_5, authored=ago(89), supply_days=None)
    del unknown["dispenseRequest"]
    assert _decision(client, "opioidcds-07", [*two_fills, unknown]) == (
        "undecided: supplyUnit, supplyValue"
    )
    # and with all three fills it could add days only to months past 21: decided
    assert _decision(client, "opioidcds-07", [*three_fills, unknown]) == "EvaluateBenefitsAndRisks"


def test_the_unrelated_codes_are_in_no_list_of_the_guide() -> None:
    from tests.support.opioid_examples import deployed_services  # noqa: F401  (loads nothing)

    folder = Path(__file__).resolve().parents[2] / "ontologies" / "opioid-cds" / "valuesets"
    text = "".join(p.read_text(encoding="utf-8") for p in folder.glob("*.json"))
    for code in (*UNRELATED_CONDITIONS, *(d[0] for d in UNRELATED_DRUGS)):
        assert f'"{code}"' not in text, code
