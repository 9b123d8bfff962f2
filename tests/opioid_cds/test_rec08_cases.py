"""Recommendation 8 (risk mitigation, naloxone) on cases of our own, at the boundaries the
guide's examples do not reach, over HTTP in both modes (prefetch from the service's templates,
and no prefetch)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.cds.card_markdown import decision_record_text
from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    HYDROCODONE_10,
    OXYCODONE_IR_5,
    TEMAZEPAM_20,
    UNWEIGHABLE_OPIOID,
    CaseTable,
    ago,
    case,
    order,
    patient,
    procedure,
    run_case,
)
from tests.support.opioid_examples import Example

pytestmark = pytest.mark.fhirserver

S = "opioidcds-08"
P = "p08"
ADULT = patient(P)


def hydrocodone(tablets_a_day: float, **kw: object) -> dict[str, object]:
    """A draft: hydrocodone 10 mg tablets, one dose a day of ``tablets_a_day`` tablets
    (10 MME per tablet), 30 days."""
    return order("draft-hydrocodone", P, HYDROCODONE_10, dose=tablets_a_day, **kw)  # type: ignore[arg-type]


def _cases() -> list[Example]:
    return [
        case("mme-exactly-50", S, "order-sign", ADULT, drafts=[hydrocodone(5)],
             expected=["warning"]),
        case("mme-49.9", S, "order-sign", ADULT, drafts=[hydrocodone(4.99)]),
        # an active opioid on record counts whatever its supply: 30 + 22.5 MME
        case("stored-opioid-brings-the-total-over-50", S, "order-sign", ADULT,
             drafts=[hydrocodone(3)],
             stored=[order("stored-oxycodone", P, OXYCODONE_IR_5, authored=ago(10), frequency=3,
                           supply_days=7)],
             expected=["warning"]),
        case("benzodiazepine-ended-last-year", S, "order-sign", ADULT, drafts=[hydrocodone(3)],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(400),
                           status="completed")]),
        case("benzodiazepine-active", S, "order-sign", ADULT, drafts=[hydrocodone(3)],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40))],
             expected=["warning"]),
        case("contained-medication", S, "order-sign", ADULT,
             drafts=[hydrocodone(5, contained=True)], expected=["warning"]),
        case("acute-order", S, "order-sign", ADULT, drafts=[hydrocodone(5, supply_days=14)]),
        case("substance-misuse-counseling", S, "order-sign", ADULT, drafts=[hydrocodone(3)],
             stored=[procedure("pr-counseling", P, "313071005", performed=ago(700))],
             expected=["warning"]),
        # no MME can be computed for the draft and nothing else is a risk: not decided, and said so
        case("mme-cannot-be-computed", S, "order-sign", ADULT,
             drafts=[order("draft-opioid", P, UNWEIGHABLE_OPIOID)], expected=["info"]),
        case("mme-cannot-be-computed-but-benzodiazepine", S, "order-sign", ADULT,
             drafts=[order("draft-opioid", P, UNWEIGHABLE_OPIOID)],
             stored=[order("stored-benzo", P, TEMAZEPAM_20, authored=ago(40))],
             expected=["warning"]),
    ]  # fmt: skip


CASES = CaseTable(_cases)


@pytest.mark.parametrize("mode", ["prefetch", "fetch"])
@pytest.mark.parametrize("name", CASES.names)
def test_recommendation_8_case(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    example = CASES[name]
    run_case(client, fhir_server, example, mode)


def test_the_card_shows_the_total_and_each_orders_mme(
    client: TestClient, fhir_server: FhirServer
) -> None:
    (card,) = run_case(client, fhir_server, CASES[2], "fetch")
    # the card names the risk factor up front: the total MME
    assert "**52\\.5 MME a day** in all" in card["detail"]
    # each order's MME is in the proof, on the decision record behind the card's link
    record = decision_record_text(client, card)
    assert "Total MME per day: 52.5" in record
    assert "MME per day (" in record
    assert "): 30" in record and "): 22.5" in record
