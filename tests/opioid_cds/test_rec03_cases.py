"""Recommendation 3 (immediate-release opioids first) on cases of our own, at the boundaries the
guide's examples do not reach — the opioid-naive window above all — over HTTP in both modes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    OXYCODONE_ER_10,
    OXYCODONE_IR_5,
    CaseTable,
    ago,
    case,
    dispense,
    order,
    patient,
    run_case,
)
from tests.support.opioid_examples import Example

pytestmark = pytest.mark.fhirserver

S = "opioidcds-03"
P = "p03"
ADULT = patient(P)
ER_DRAFT = order("draft-er", P, OXYCODONE_ER_10)
#: branded long-acting products the guide's extended-release list does not name: Duragesic (a
#: brand of a listed fentanyl patch) and Avinza (a morphine capsule RxNorm has since retired,
#: from the drug table's earlier extract); each is that list's member by its supplement
DURAGESIC_25 = ("261184", "72 HR fentanyl 0.025 MG/HR Transdermal System [Duragesic]")
AVINZA_60 = ("892351", "24 HR Morphine Sulfate 60 MG Extended Release Oral Capsule [Avinza]")


def stored_opioid(days_ago: int) -> dict[str, object]:
    return order("stored-opioid", P, OXYCODONE_IR_5, authored=ago(days_ago))


def _cases() -> list[Example]:
    return [
        case("naive", S, "order-sign", ADULT, drafts=[ER_DRAFT], expected=["warning"]),
        case("opioid-89-days-ago", S, "order-sign", ADULT, drafts=[ER_DRAFT],
             stored=[stored_opioid(89)]),
        case("opioid-90-days-ago", S, "order-sign", ADULT, drafts=[ER_DRAFT],
             stored=[stored_opioid(90)]),
        case("opioid-91-days-ago", S, "order-sign", ADULT, drafts=[ER_DRAFT],
             stored=[stored_opioid(91)], expected=["warning"]),
        # the previous 24 hours do not count: an opioid ordered today leaves the patient naive
        case("opioid-today", S, "order-sign", ADULT, drafts=[ER_DRAFT], stored=[stored_opioid(0)],
             expected=["warning"]),
        case("opioid-dispensed-30-days-ago", S, "order-sign", ADULT, drafts=[ER_DRAFT],
             stored=[dispense("disp-opioid", P, OXYCODONE_IR_5, handed_over=ago(30))]),
        case("contained-medication", S, "order-sign", ADULT,
             drafts=[order("draft-er", P, OXYCODONE_ER_10, contained=True)], expected=["warning"]),
        case("acute-extended-release", S, "order-sign", ADULT,
             drafts=[order("draft-er", P, OXYCODONE_ER_10, supply_days=14)]),
        case("immediate-release", S, "order-sign", ADULT,
             drafts=[order("draft-ir", P, OXYCODONE_IR_5)]),
        case("naive-duragesic", S, "order-sign", ADULT,
             drafts=[order("draft-er", P, DURAGESIC_25)], expected=["warning"]),
        case("naive-retired-avinza", S, "order-sign", ADULT,
             drafts=[order("draft-er", P, AVINZA_60)], expected=["warning"]),
        case("duragesic-after-an-opioid-last-month", S, "order-sign", ADULT,
             drafts=[order("draft-er", P, DURAGESIC_25)], stored=[stored_opioid(30)]),
    ]  # fmt: skip


CASES = CaseTable(_cases)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", CASES.names)
def test_recommendation_3_case(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES[name]
    run_case(client, fhir_server, example, mode)
