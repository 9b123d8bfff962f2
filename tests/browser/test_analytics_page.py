"""The analytics page in a real browser: Debian's Chromium driven by Playwright, against the
service running as a process on loopback, after cards were issued and clinicians gave feedback
on them through the CDS Hooks feedback endpoint.

Asserts what a rule author sees (each card and rule with how often it fired, was accepted and
was overridden, and for which reason; an approved triage change in shadow mode, with how often
it agreed with the active version on live calls and the card that would have differed) and
checks accessibility with axe-core as the decision page's test does. The screenshot is kept
under ``test-artifacts/browser/``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.browser.test_decision_page import ARTIFACTS, CHROMIUM, _accessible, _headings
from tests.cds.card_scenarios import MED_SAFETY, SCENARIOS, TRIAGE
from tests.changes.triage_calls import approve_threshold_change, triage_request
from tests.support.live_server import LiveServer, sqlite_live_server

CONTRAINDICATED = "Contraindicated medication order"
IMMEDIATE = "Triage acuity: Immediate"
REVIEWER = "dr-reviewer"
ROOT = Path(__file__).resolve().parents[2]
#: how long the shadow decisions of the seeded calls may take to be stored
SHADOW_DEADLINE_SECONDS = 60


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    extra = {"HORISMOS_CHANGE_APPROVERS": f'["{REVIEWER}"]'}
    with sqlite_live_server(
        sqlite_template, tmp_path_factory.mktemp("analytics-page"), extra
    ) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _card(server: LiveServer, service: str, summary: str) -> dict[str, Any]:
    make, _words = SCENARIOS[(service, summary)]
    answer = httpx.post(f"{server.base}/cds-services/{service}", json=make(), timeout=30.0)
    assert answer.status_code == 200, answer.text
    [card] = [c for c in answer.json()["cards"] if c["summary"] == summary]
    return dict(card)


def _feedback(server: LiveServer, service: str, card: dict[str, Any], **item: Any) -> None:
    body = {
        "feedback": [{"card": card["uuid"], "outcomeTimestamp": "2026-12-01T10:00:00Z", **item}]
    }
    answer = httpx.post(f"{server.base}/cds-services/{service}/feedback", json=body, timeout=30.0)
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def seeded(server: LiveServer) -> LiveServer:
    """Three contraindicated-order cards (one accepted, two overridden for one reason) and a
    triage card overridden with no reason given."""
    cards = [_card(server, MED_SAFETY, CONTRAINDICATED) for _ in range(3)]
    concerns = cards[0]["overrideReasons"][2]
    assert concerns["display"] == "Recipient has concerns regarding potential health outcomes"
    _feedback(server, MED_SAFETY, cards[0], outcome="accepted")
    for card in cards[1:]:
        _feedback(
            server, MED_SAFETY, card, outcome="overridden", overrideReason={"reason": concerns}
        )
    _feedback(server, TRIAGE, _card(server, TRIAGE, IMMEDIATE), outcome="overridden")
    _shadow(server)
    return server


def _shadow(server: LiveServer) -> None:
    """An approved triage change (heart rate above 140/min is Immediate) in shadow mode, and two
    live triage calls it decides again: 145/min (Urgent now, Immediate with the change) and
    80/min (Non-urgent with both)."""
    with httpx.Client(base_url=server.base, timeout=60.0) as http:
        text = (ROOT / "ontologies/triage.ttl").read_text(encoding="utf-8")
        approve_threshold_change(http, text, author="dr-author", reviewer=REVIEWER)
        for rate in (145, 80):
            answer = http.post("/cds-services/horismos-triage", json=triage_request(rate))
            assert answer.status_code == 200, answer.text
        # the shadow decisions are made off the answer's path: wait until both are stored
        deadline = time.monotonic() + SHADOW_DEADLINE_SECONDS
        while True:
            report = http.get("/analytics", headers={"Accept": "application/json"}).json()
            shadow = [c for s in report["services"] for c in s["shadow"]]
            if shadow and shadow[0]["runs"] == 2:
                return
            assert time.monotonic() < deadline, f"shadow decisions not stored: {shadow}"
            time.sleep(0.2)


def test_the_analytics_page_shows_which_cards_are_overridden_and_why(
    seeded: LiveServer, browser: Browser
) -> None:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    page = context.new_page()
    response = page.goto(f"{seeded.base}/analytics")
    assert response is not None and response.status == 200
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "analytics.png"), full_page=True)

    headings = _headings(page)
    assert headings[0] == ("h1", "Card analytics")
    services = [text for tag, text in headings if tag == "h2"]
    assert services == [  # by service id
        "Medication safety at signing (horismos-med-safety)",
        "ED triage acuity (horismos-triage)",
    ]
    med = page.locator("section", has=page.get_by_role("heading", name=services[0]))
    by_card = med.get_by_role("table", name="By card")
    row = by_card.get_by_role("row", name=CONTRAINDICATED)
    cells = row.get_by_role("cell").all_inner_texts()
    assert cells[:3] == ["3", "1", "2"]
    assert "Recipient has concerns regarding potential health outcomes: 2" in cells[3]
    by_rule = med.get_by_role("table", name="By rule in the card's proof")
    assert "NSAID with eGFR below 30" in by_rule.inner_text()
    triage = page.locator("section", has=page.get_by_role("heading", name=services[1]))
    assert "no reason given: 1" in triage.get_by_role("table", name="By card").inner_text()

    agreement = triage.get_by_role(
        "table", name="Change 1.6.0 in shadow mode: agreement with the active version"
    )
    assert agreement.get_by_role("row").nth(1).all_inner_texts() == ["2\t1\t1\t0"]
    differed = triage.get_by_role("table", name="Cards that differed (change 1.6.0)")
    row = differed.get_by_role("row", name="Triage acuity: Urgent")
    assert row.get_by_role("cell").all_inner_texts() == ["Urgent", "Immediate", "1"]
    assert med.get_by_role("table", name="Cards that differed (change 1.6.0)").count() == 0
    _accessible(page)
