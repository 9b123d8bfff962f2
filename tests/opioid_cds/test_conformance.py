"""Every example request of the CDC opioid guide, against the service over HTTP, twice.

Per example (``tests/support/opioid_examples.py``): its dates rolled to today, resources that
share an id given ids of their own, its stored resources loaded into the Node FHIR test server
under ids tagged for this test; then the hook is called

- ``prefetch``: as an EHR would, with every prefetch key filled by executing the service's own
  discovery template against the FHIR server;
- ``fetch``: with no prefetch and ``fhirServer`` pointing at the FHIR server: the service reads.

Both must answer what the reference answered: the same number of cards, with the same
indicators, and no card where it answered none. An example whose service is not in discovery is
a strict expected failure naming the service: the suite stays green, and the mark must go when
the deployment lands (a strict xfail that passes fails). Where Horismos knowingly answers
differently from the reference, ``DIVERGENT`` says what it answers and why (docs/opioid-cds.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.ontology.card_text import markdown_escape
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import Example, call_service, deployed_services, load_examples
from toolkits.opioid_cds.names import short_name

pytestmark = pytest.mark.fhirserver

EXAMPLES = load_examples()


@dataclass(frozen=True)
class Divergence:
    indicators: list[str]  # what Horismos answers
    reason: str


#: Examples where the reference's answer is not the guide's logic applied to the example's data.
DIVERGENT: dict[str, Divergence] = {
    "rec-08-mme-greater-than-fifty": Divergence(
        indicators=[],
        reason=(
            "the draft order is Pepto-Bismol; the reference's card came from a stored fentanyl "
            "order sharing the draft's id, which it took for an order being signed"
        ),
    ),
    "rec-04-05-mme-less-than-fifty": Divergence(
        indicators=["warning"],
        reason=(
            "the draft is Kadian (RxNorm 892495, 'Morphine Sulfate 10 MG [Kadian]', a branded "
            "morphine no list of the guide holds): the reference takes it for no opioid and "
            "answers nothing; Horismos reads a brand of a listed drug as an order it could not "
            "check and says the dose check was not completed"
        ),
    ),
    "rec-06-out-extended-release-27-days": Divergence(
        indicators=["warning"],
        reason=(
            "an extended-release opioid for acute pain with 27 days of supply: the reference's "
            "shipped logic (acute, more than 7 days) gives a card; the example's answer "
            "predates that logic"
        ),
    ),
}


DEPLOYED = deployed_services()


def _cases() -> Iterator[Any]:
    for example in EXAMPLES:
        for mode in ("prefetch", "fetch"):
            marks = []
            if example.service not in DEPLOYED:
                marks.append(
                    pytest.mark.xfail(
                        strict=True,
                        raises=AssertionError,
                        reason=f"{example.service} is not deployed yet",
                    )
                )
            yield pytest.param(example, mode, id=f"{example.name}-{mode}", marks=marks)


@pytest.mark.parametrize(("example", "mode"), list(_cases()))
def test_example_answers_as_the_reference(
    example: Example, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    response = call_service(
        client,
        fhir_server,
        example,
        service_id=example.service,
        mode=mode,
        today=datetime.now(UTC).date(),
    )

    assert response.status_code == 200, response.text
    cards = response.json()["cards"]
    expected = (
        DIVERGENT[example.name].indicators
        if example.name in DIVERGENT
        else example.expected_indicators
    )
    assert sorted(card["indicator"] for card in cards) == expected, [c["summary"] for c in cards]
    # each card is about the order being signed: its summary names the drug short, its detail
    # as the order names it
    drugs = _draft_drugs(example)
    for card in cards:
        if "not completed" in card["summary"]:
            continue  # about the check that could not be completed, not one order
        assert any(short_name(d) in card["summary"] for d in drugs), (card["summary"], drugs)
        assert any(markdown_escape(d) in card["detail"] for d in drugs), (card["detail"], drugs)


def _draft_drugs(example: Example) -> list[str]:
    """The name each draft order of the example gives its drug (every example's coding has a
    display, none a text)."""
    entries = (example.request["context"].get("draftOrders") or {}).get("entry") or []
    return [
        coding["display"]
        for e in entries
        for coding in (e["resource"].get("medicationCodeableConcept") or {}).get("coding", [])
        if coding.get("display")
    ]


def test_every_example_is_covered_and_every_divergence_names_an_example() -> None:
    assert len(EXAMPLES) == 29
    assert set(DIVERGENT) <= {e.name for e in EXAMPLES}
    assert {e.service for e in EXAMPLES} <= {
        "opioidcds-01", "opioidcds-02", "opioidcds-03", "opioidcds-04-05", "opioidcds-06",
        "opioidcds-07", "opioidcds-08", "opioidcds-09", "opioidcds-10-order-sign",
        "opioidcds-11-order-select",
    }  # fmt: skip
