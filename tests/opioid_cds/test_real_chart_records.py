"""Opioid services on records as Synthea and real EHRs write them, over HTTP in both modes.

Synthea writes no ``Condition.category``. A category says where a diagnosis was recorded (a
problem list, an encounter), not whether it is the patient's: a condition without one is read as
the patient's diagnosis, never dropped — an alcoholism diagnosis without a category is the risk
factor it is, an active cancer without one the exclusion it is. A record that cannot change the
decision (a sprained ankle without a category) leaves it decided.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    HYDROCODONE_10,
    OXYCODONE_IR_5,
    TEMAZEPAM_20,
    CaseTable,
    ago,
    case,
    condition,
    order,
    patient,
    run_case,
    statement,
)
from tests.support.opioid_examples import Example

pytestmark = pytest.mark.fhirserver

S = "opioidcds-08"
P = "p08-charts"
ADULT = patient(P)
ALCOHOLISM = "7200002"  # SNOMED CT, in the guide's "conditions documenting substance misuse"
ANKLE_SPRAIN = "44465007"  # SNOMED CT: no value set of the guide lists it
DRUG_OVERDOSE = "55680006"  # SNOMED CT: Drug overdose
ICD10 = "http://hl7.org/fhir/sid/icd-10-cm"
#: ICD-10-CM: malignant neoplasm of the nipple of the right female breast — a malignant cancer the
#: guide lists, not among the conditions likely terminal
BREAST_CANCER = "C50.011"


def synthea(resource: dict[str, Any]) -> dict[str, Any]:
    """The record as Synthea writes it: no category."""
    return {k: v for k, v in resource.items() if k != "category"}


def draft() -> dict[str, Any]:
    """Hydrocodone 10 mg, three tablets a day for 30 days: 30 MME, under every dose threshold."""
    return order("draft-hydrocodone", P, HYDROCODONE_10, dose=3)


def _cases() -> list[Example]:
    return [
        # the complete twin: a problem-list item documenting substance misuse is a risk factor
        case("substance-misuse-on-the-problem-list", S, "order-sign", ADULT, drafts=[draft()],
             stored=[condition("c-alcohol", P, ALCOHOLISM)], expected=["warning"]),
        # the same condition without a category: the same risk factor, decided
        case("substance-misuse-without-a-category", S, "order-sign", ADULT, drafts=[draft()],
             stored=[synthea(condition("c-alcohol", P, ALCOHOLISM))], expected=["warning"]),
        # an active cancer without a category excludes the patient as one on the problem list does
        # (its twin, the benzodiazepine alone, gets the card below)
        case("benzodiazepine-and-active-cancer-without-a-category", S, "order-sign", ADULT,
             drafts=[draft()],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40)),
                     synthea(condition("c-cancer", P, BREAST_CANCER, system=ICD10))]),
        case("benzodiazepine-and-active-cancer-on-the-problem-list", S, "order-sign", ADULT,
             drafts=[draft()],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40)),
                     condition("c-cancer", P, BREAST_CANCER, system=ICD10)]),
        # a record that cannot change the decision: decided, no card
        case("unrelated-condition-without-a-category", S, "order-sign", ADULT, drafts=[draft()],
             stored=[synthea(condition("c-ankle", P, ANKLE_SPRAIN))]),
        case("no-condition", S, "order-sign", ADULT, drafts=[draft()]),
        # a history of overdose (CDC 2022, recommendation 8), as Synthea writes it: a risk factor
        case("overdose-on-record-without-a-category", S, "order-sign", ADULT, drafts=[draft()],
             stored=[synthea(condition("c-overdose", P, DRUG_OVERDOSE, status="resolved"))],
             expected=["warning"]),
        # a risk factor on record and an unrelated condition without a category: the recommendation
        # applies, decided (the sprain can change none of the exclusions: cancer, sickle cell, end
        # of life, counted record by record)
        case("benzodiazepine-and-unrelated-condition-without-a-category", S, "order-sign", ADULT,
             drafts=[draft()],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40)),
                     synthea(condition("c-ankle", P, ANKLE_SPRAIN))],
             expected=["warning"]),
    ]  # fmt: skip


CASES = CaseTable(_cases)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", CASES.names)
def test_recommendation_8_on_synthea_conditions(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES[name]
    cards = run_case(client, fhir_server, example, mode)
    if example.name == "benzodiazepine-and-unrelated-condition-without-a-category":
        [card] = cards
        assert card["summary"].startswith("Offer naloxone"), card["summary"]
    if example.name == "overdose-on-record-without-a-category":
        [card] = cards
        assert "with an overdose on record" in card["detail"], card["detail"]
    if example.name in (
        "substance-misuse-without-a-category",
        "substance-misuse-on-the-problem-list",
    ):
        [card] = cards
        assert card["summary"].startswith("Offer naloxone"), card["summary"]
        assert "substance misuse" in card["detail"], card["detail"]


# --- MedicationStatement in a medications search ----------------------------------------------


def _rec08(medications: list[dict[str, Any]]) -> dict[str, Any]:
    """An order-sign call to recommendation 8 with everything prefetched: the draft, and the
    medications search answered with ``medications``."""

    def searchset(resources: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "resourceType": "Bundle",
            "type": "searchset",
            "total": len(resources),
            "entry": [{"resource": r, "search": {"mode": "match"}} for r in resources],
        }

    request = copy.deepcopy(
        case("rec08-medications", S, "order-sign", ADULT, drafts=[draft()]).request
    )
    request["hookInstance"] = str(uuid.uuid4())
    request["prefetch"] = {
        "patient": ADULT,
        "medications": searchset(medications),
        "conditions": searchset([]),
        "encounters": searchset([]),
        "procedures": searchset([]),
        "statements": searchset([]),
    }
    return request


def test_a_benzodiazepine_the_patient_takes_as_a_medication_statement_is_a_risk_factor(
    client: TestClient,
) -> None:
    """A benzodiazepine the patient takes, listed as an active MedicationStatement among the
    medications answer: recommendation 8 reads it as a benzodiazepine the patient reports
    taking (where it once left the check undecided), and the card says so."""
    body = client.post(f"/cds-services/{S}", json=_rec08([statement("ms-benzo", P, TEMAZEPAM_20)]))
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    assert run["decision"]["value"] == "Applies", run
    [card] = body.json()["cards"]
    assert card["indicator"] == "warning"
    assert (
        f"with **{TEMAZEPAM_20[1]}** (a benzodiazepine) the patient reports taking"
        in (card["detail"])
    )


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        ("stopped", "NotApplicable"),  # not taken now: no risk factor, decided
        ("completed", "NotApplicable"),
        ("unknown", None),  # could be taken now: unread, the check waits
    ],
)
def test_a_statement_counts_only_while_it_is_taken(
    client: TestClient, status: str, answer: str | None
) -> None:
    reported = statement("ms-benzo", P, TEMAZEPAM_20, status=status)
    body = client.post(f"/cds-services/{S}", json=_rec08([reported]))
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    if answer is None:
        assert "decision" not in run, run
        assert [i["input"] for i in run["undecided"]["inputs"]] == ["statementStatus"]
    else:
        assert run["decision"]["value"] == answer, run
        assert body.json()["cards"] == []


@pytest.mark.parametrize(("status", "decided"), [("active", False), ("stopped", True)])
def test_an_opioid_the_patient_reports_taking_leaves_the_total_open(
    client: TestClient, status: str, decided: bool
) -> None:
    """An opioid in an active statement is no prescription the MME total counts: with no other
    risk factor, recommendation 8 cannot say the total stays under 50 (not completed), where
    reading the statement must not make it "no risk factor"; a stopped one changes nothing."""
    reported = statement("ms-opioid", P, OXYCODONE_IR_5, status=status)
    body = client.post(f"/cds-services/{S}", json=_rec08([reported]))
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    if decided:
        assert run["decision"]["value"] == "NotApplicable", run
    else:
        assert "decision" not in run, run
        [card] = body.json()["cards"]
        assert card["indicator"] == "info" and "not completed" in card["summary"]


def test_a_statement_is_still_unread_where_a_service_reads_orders_only(
    client: TestClient,
) -> None:
    """Recommendations 4-5 total the MME of prescriptions; an opioid the patient reports taking
    is not one of them, so a statement in their medications answer stays unread, named."""
    request = _rec08([statement("ms-opioid", P, OXYCODONE_IR_5)])
    del request["prefetch"]["procedures"], request["prefetch"]["statements"]
    body = client.post("/cds-services/opioidcds-04-05", json=request)
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    assert "decision" not in run, run
    assert run["undecided"]["inputs"] == [{"input": "hasStoredOrder", "state": "unread"}]
    assert any("MedicationStatement" in c["detail"] for c in body.json()["cards"])


def test_the_same_benzodiazepine_as_an_order_still_decides(client: TestClient) -> None:
    stored = order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40))
    body = client.post(f"/cds-services/{S}", json=_rec08([stored]))
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    assert "decision" in run, run
    assert [c["indicator"] for c in body.json()["cards"]] == ["warning"]


# --- a branded product of a drug the guide lists ---------------------------------------------

VICODIN_5 = ("1310202", "acetaminophen 300 MG / hydrocodone bitartrate 5 MG Oral Tablet [Vicodin]")


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
def test_a_branded_opioid_on_record_counts_towards_the_total(
    mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    """Vicodin (an SBD) is the trade name of a clinical drug the guide's opioid list names: four
    tablets a day (20 MME) with the draft's 30 MME reach 50, where Vicodin counted for nothing."""
    stored = order("stored-vicodin", P, VICODIN_5, authored=ago(10), frequency=4)
    example = case("branded-opioid", "opioidcds-04-05", "order-sign", ADULT, drafts=[draft()],
                   stored=[stored], expected=["warning"])  # fmt: skip
    [card] = run_case(client, fhir_server, example, mode)
    assert card["summary"].startswith("Calibrate or taper: 50 MME/day"), card["summary"]


# --- a branded product no list holds, named as a brand of one they do ------------------------

VALIUM = ("563026", "Diazepam [Valium]")  # RxNorm, as the FHIR examples write it
DIAZEPAM_5 = ("197591", "diazepam 5 MG Oral Tablet")  # the clinical drug the list holds
CARBAMAZEPINE_BRAND = ("205323", "Carbamazepine [Tegretol]")  # a brand of no listed drug


def test_a_brand_of_a_listed_benzodiazepine_is_unread_not_no_benzodiazepine(
    client: TestClient,
) -> None:
    """Valium's code is in no list of the guide's, but its name says diazepam, which the
    benzodiazepine list holds: the risk factor may be there, so the check is not completed and
    the card names the record — never "no benzodiazepine" (NotApplicable)."""
    stored = order("stored-valium", P, VALIUM, authored=ago(40))
    body = client.post(f"/cds-services/{S}", json=_rec08([stored]))
    assert body.status_code == 200, body.text
    run = body.json()["extension"]["dev.horismos.run"]
    assert "decision" not in run and "undecided" in run, run
    [card] = body.json()["cards"]
    assert "Diazepam \\[Valium\\]" in card["detail"] and "563026" in card["detail"]


def test_the_clinical_drug_it_brands_still_decides(client: TestClient) -> None:
    """The complete twin: diazepam by the code the list holds is the risk factor."""
    stored = order("stored-diazepam", P, DIAZEPAM_5, authored=ago(40))
    body = client.post(f"/cds-services/{S}", json=_rec08([stored]))
    run = body.json()["extension"]["dev.horismos.run"]
    assert run["decision"]["value"] == "Applies", run


def test_a_brand_of_no_listed_drug_is_still_none_of_ours(client: TestClient) -> None:
    """Tegretol is a brand of carbamazepine, which no list holds: not a benzodiazepine, and the
    answer stays decided (no card: no risk factor)."""
    stored = order("stored-tegretol", P, CARBAMAZEPINE_BRAND, authored=ago(40))
    body = client.post(f"/cds-services/{S}", json=_rec08([stored]))
    run = body.json()["extension"]["dev.horismos.run"]
    assert "decision" in run, run
