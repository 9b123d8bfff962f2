"""Recommendations 4 and 5 (lowest effective dose, total MME) on cases of our own, at the
boundaries the guide's examples do not reach, over HTTP in both modes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    FENTANYL_75,
    HYDROCODONE_10,
    OXYCODONE_IR_5,
    UNWEIGHABLE_OPIOID,
    CaseTable,
    ago,
    case,
    condition,
    order,
    patient,
    run_case,
)
from tests.support.opioid_examples import Example

pytestmark = pytest.mark.fhirserver

S = "opioidcds-04-05"
P = "p0405"
ADULT = patient(P)


def hydrocodone(tablets_a_day: float, **kw: object) -> dict[str, object]:
    """A draft: hydrocodone 10 mg tablets (10 MME each), one dose a day, 30 days."""
    return order("draft-hydrocodone", P, HYDROCODONE_10, dose=tablets_a_day, **kw)  # type: ignore[arg-type]


def stored_oxycodone(supply_days: int) -> dict[str, object]:
    """On record: oxycodone 5 mg three times a day, 22.5 MME."""
    return order(
        "stored-oxycodone", P, OXYCODONE_IR_5, authored=ago(10), frequency=3,
        supply_days=supply_days,
    )  # fmt: skip


def _cases() -> list[Example]:
    return [
        case("mme-exactly-50", S, "order-sign", ADULT, drafts=[hydrocodone(5)],
             expected=["warning"]),
        case("mme-49.9", S, "order-sign", ADULT, drafts=[hydrocodone(4.99)]),
        case("stored-chronic-opioid-brings-the-total-over-50", S, "order-sign", ADULT,
             drafts=[hydrocodone(3)], stored=[stored_oxycodone(30)], expected=["warning"]),
        # an acute opioid on record is not counted here (it is for recommendation 8)
        case("stored-acute-opioid-is-not-counted", S, "order-sign", ADULT,
             drafts=[hydrocodone(3)], stored=[stored_oxycodone(7)]),
        case("contained-medication", S, "order-sign", ADULT,
             drafts=[hydrocodone(5, contained=True)], expected=["warning"]),
        case("fentanyl-180-mme", S, "order-sign", ADULT,
             drafts=[order("draft-fentanyl", P, FENTANYL_75, dose=1, dose_unit="{patch}",
                           period=3)],
             expected=["warning"]),
        case("end-of-life", S, "order-sign", ADULT, drafts=[hydrocodone(6)],
             stored=[condition("c-terminal", P, "300936002")]),
        case("mme-cannot-be-computed", S, "order-sign", ADULT,
             drafts=[order("draft-opioid", P, UNWEIGHABLE_OPIOID)], expected=["info"]),
    ]  # fmt: skip


CASES = CaseTable(_cases)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", CASES.names)
def test_recommendations_4_and_5_case(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES[name]
    run_case(client, fhir_server, example, mode)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("mme-exactly-50", "Calibrate or taper: 50 MME/day"),
        ("fentanyl-180-mme", "Taper to lowest effective dose: 180 MME/day"),
    ],
)
def test_the_card_says_which_side_of_90_the_total_is(
    client: TestClient, fhir_server: FhirServer, name: str, says: str
) -> None:
    example = CASES[name]
    (card,) = run_case(client, fhir_server, example, "fetch")
    assert says in card["summary"], card["summary"]
    assert "taper" in card["summary"].lower()
    assert ("lowest effective dose" in card["summary"]) == says.startswith("Taper")
