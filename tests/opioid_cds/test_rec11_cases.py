"""Recommendation 11 (opioids with benzodiazepines or other CNS depressants) on cases of our own,
at the boundaries the guide's examples do not reach, over HTTP in both modes: prefetch filled
from the service's templates, and no prefetch (the service reads the FHIR server)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.cds.card_markdown import decision_record_text
from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    AMOXICILLIN_500,
    BENZPHETAMINE_50,
    FLURAZEPAM_15,
    OXYCODONE_ER_10,
    OXYCODONE_IR_5,
    TEMAZEPAM_20,
    CaseTable,
    ago,
    case,
    condition,
    encounter,
    order,
    patient,
    run_case,
    statement,
    years_ago,
)
from tests.support.opioid_examples import Example

pytestmark = pytest.mark.fhirserver

PV = "opioidcds-11-patient-view"
OS = "opioidcds-11-order-select"
P = "p11"
ADULT = patient(P)
HOSPICE = ("http://snomed.info/sct", "385763009")


def _cases() -> list[Example]:
    opioid_on_record = order("stored-opioid", P, OXYCODONE_IR_5, authored=ago(15))
    benzo_on_record = order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40))
    return [
        # patient-view
        case("pv-opioid-and-benzodiazepine", PV, "patient-view", ADULT,
             stored=[opioid_on_record, benzo_on_record], expected=["warning"]),
        case("pv-benzodiazepine-ended-last-year", PV, "patient-view", ADULT,
             stored=[opioid_on_record,
                     order("stored-benzo", P, TEMAZEPAM_20, authored=ago(400),
                           status="completed")]),
        case("pv-benzodiazepine-authored-over-two-years-ago", PV, "patient-view", ADULT,
             stored=[opioid_on_record, order("stored-benzo", P, TEMAZEPAM_20, authored=ago(800))]),
        # a CNS depressant counts whatever its age (CQL's precedence of "and" over "or")
        case("pv-old-cns-depressant", PV, "patient-view", ADULT,
             stored=[opioid_on_record, order("stored-cns", P, BENZPHETAMINE_50, authored=ago(800))],
             expected=["warning"]),
        case("pv-contained-medication", PV, "patient-view", ADULT,
             stored=[order("stored-opioid", P, OXYCODONE_IR_5, authored=ago(15), contained=True),
                     benzo_on_record],
             expected=["warning"]),
        case("pv-inpatient-opioid", PV, "patient-view", ADULT,
             stored=[order("stored-opioid", P, OXYCODONE_IR_5, authored=ago(15),
                           category="inpatient"),
                     benzo_on_record]),
        case("pv-eighteen-today", PV, "patient-view", patient(P, birth_date=years_ago(18)),
             stored=[opioid_on_record, benzo_on_record], expected=["warning"]),
        case("pv-eighteen-tomorrow", PV, "patient-view", patient(P, birth_date=years_ago(18, 1)),
             stored=[opioid_on_record, benzo_on_record]),
        case("pv-terminal-illness", PV, "patient-view", ADULT,
             stored=[opioid_on_record, benzo_on_record, condition("c-terminal", P, "300936002")]),
        case("pv-resolved-terminal-illness", PV, "patient-view", ADULT,
             stored=[opioid_on_record, benzo_on_record,
                     condition("c-terminal", P, "300936002", status="resolved")],
             expected=["warning"]),
        # the general inclusion criteria read no clinical status of a likely terminal condition
        case("pv-resolved-pancreatic-carcinoma", PV, "patient-view", ADULT,
             stored=[opioid_on_record, benzo_on_record,
                     condition("c-terminal", P, "783771003", status="resolved")]),
        # order-select
        case("os-opioid-drafted-on-benzodiazepine", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)], stored=[benzo_on_record],
             expected=["warning"]),
        case("os-contained-opioid-drafted-on-benzodiazepine", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10, contained=True)],
             stored=[benzo_on_record], expected=["warning"]),
        case("os-benzodiazepine-drafted-on-old-opioid", OS, "order-select", ADULT,
             drafts=[order("draft-benzo", P, FLURAZEPAM_15)],
             stored=[order("stored-opioid", P, OXYCODONE_IR_5, authored=ago(740))]),
        case("os-unrelated-draft", OS, "order-select", ADULT,
             drafts=[order("draft-amox", P, AMOXICILLIN_500)],
             stored=[opioid_on_record, benzo_on_record]),
        case("os-discharged-to-hospice", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)],
             stored=[benzo_on_record, encounter("e-hospice", P, start=ago(60), discharge=HOSPICE)]),
        case("os-discharged-to-hospice-over-a-year-ago", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)],
             stored=[benzo_on_record, encounter("e-hospice", P, start=ago(400), discharge=HOSPICE)],
             expected=["warning"]),
        case("os-active-cancer-on-problem-list", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)],
             stored=[benzo_on_record,
                     condition("c-cancer", P, "C25.0", system="http://hl7.org/fhir/sid/icd-10-cm")]),
        # what the patient reports taking (a MedicationStatement) counts as what is on record
        case("os-opioid-drafted-on-reported-benzodiazepine", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)],
             stored=[statement("ms-benzo", P, TEMAZEPAM_20)], expected=["warning"]),
        case("os-opioid-drafted-on-benzodiazepine-no-longer-taken", OS, "order-select", ADULT,
             drafts=[order("draft-opioid", P, OXYCODONE_ER_10)],
             stored=[statement("ms-benzo", P, TEMAZEPAM_20, status="stopped")]),
        case("os-benzodiazepine-drafted-on-reported-opioid", OS, "order-select", ADULT,
             drafts=[order("draft-benzo", P, FLURAZEPAM_15)],
             stored=[statement("ms-opioid", P, OXYCODONE_IR_5)], expected=["warning"]),
    ]  # fmt: skip


CASES = CaseTable(_cases)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", CASES.names)
def test_recommendation_11_case(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES[name]
    cards = run_case(client, fhir_server, example, mode)
    if cards:
        assert "benzodiazepine" in cards[0]["summary"]


def test_the_card_shows_the_orders_on_both_sides(
    client: TestClient, fhir_server: FhirServer
) -> None:
    (card,) = run_case(client, fhir_server, CASES[0], "prefetch")
    # the card names both drugs; their codes are in the proof on the decision record
    assert "**oxycodone hydrochloride 5 MG Oral Tablet** and **temazepam" in card["detail"]
    record = decision_record_text(client, card)
    assert f"RxNorm {OXYCODONE_IR_5[0]}" in record
    assert f"RxNorm {TEMAZEPAM_20[0]}" in record


def test_the_card_names_the_benzodiazepine_the_patient_reports_taking(
    client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES["os-opioid-drafted-on-reported-benzodiazepine"]
    (card,) = run_case(client, fhir_server, example, "prefetch")
    assert f"**{TEMAZEPAM_20[1]}** (the patient reports taking it)" in card["detail"]
