"""Every card of the bundled example deployments, rendered by a CommonMark renderer
(markdown-it-py) as an EHR would: short, the advice and the facts that decided it with the
units clinicians write and their dates, no engine notation (``tests/cds/card_markdown.py``);
the proof as labelled statements is on the decision record behind the card's link. The opioid
services' cards are rendered from the guide's examples and our boundary cases
(``tests/opioid_cds/test_card_markdown.py``); free text on a card reads as written
(``tests/cds/test_cds_markdown_escape.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient

from app.clinical_text import format_time
from tests.cds.card_markdown import (
    check_card,
    check_summary,
    decision_record_text,
    declared_cards,
    summary_matches,
)
from tests.cds.card_scenarios import RECORD_WORDS, SCENARIOS, TAKEN

OpenClient = Callable[..., AbstractContextManager[TestClient]]
OPIOID = "opioidcds-"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def test_every_declared_card_has_a_scenario() -> None:
    """A new card in an example deployment needs a scenario here, so it is rendered too."""
    examples = {c for c in declared_cards() if not c[0].startswith(OPIOID)}
    assert examples == {k for k in SCENARIOS if not k[0].startswith(OPIOID)}


def _card(client: TestClient, service: str, summary: str) -> dict[str, Any]:
    make, _words = SCENARIOS[(service, summary)]
    resp = client.post(f"/cds-services/{service}", json=make())
    assert resp.status_code == 200, resp.text
    cards = [c for c in resp.json()["cards"] if summary_matches(summary, c["summary"])]
    assert len(cards) == 1, resp.json()["cards"]
    return cards[0]


@pytest.mark.parametrize("key", sorted(SCENARIOS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_each_card_is_short_and_names_what_decided_it_the_proof_on_the_record(
    client: TestClient, key: tuple[str, str]
) -> None:
    service, summary = key
    card = _card(client, service, summary)
    shown = check_card(card["detail"], SCENARIOS[key][1])
    check_summary(card["summary"])
    if "mmHg" in shown or "/min" in shown or "%" in shown or "mmol/L" in shown:
        assert format_time(TAKEN) in shown, shown  # a measurement on the card says when
    record = decision_record_text(client, card)
    for word in RECORD_WORDS.get(key, ()):
        assert word in record, (word, record[:3000])
    units = ("mmHg", "/min", "%", "°C", "mmol/L", "m²")
    if any(": " in w and w.endswith(units) for w in RECORD_WORDS.get(key, ())):
        assert format_time(TAKEN) in record  # on the record, a measurement says when


def test_a_card_shows_dates_in_the_configured_time_zone(make_app_client: OpenClient) -> None:
    key = ("horismos-triage", "Triage acuity: Non-urgent")
    with make_app_client(timezone="America/New_York") as client:
        card = _card(client, *key)
    taken = format_time(TAKEN, ZoneInfo("America/New_York"))
    assert taken.endswith((" EDT", " EST")), taken
    assert f"heart rate 72 /min, {taken}" in card["detail"]


def test_a_triage_card_without_a_fhir_server_has_no_write_back_notice(
    client: TestClient,
) -> None:
    """No server to write to means no write was possible: nothing to report, and no error."""
    card = _card(client, "horismos-triage", "Triage acuity: Immediate")
    assert "EHR" not in card["detail"], card["detail"]
    assert "FHIR server" not in card["detail"], card["detail"]
