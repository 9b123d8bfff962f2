"""The analytics page in a real browser: Debian's Chromium driven by Playwright, against the
service running as a process on loopback, after cards were issued and clinicians gave feedback
on them through the CDS Hooks feedback endpoint.

Asserts what a rule author sees (each card and rule with how often it fired, was accepted and
was overridden, and for which reason) and checks accessibility with axe-core as the decision
page's test does. The screenshot is kept under ``test-artifacts/browser/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from tests.browser.test_decision_page import ARTIFACTS, CHROMIUM, _accessible, _headings
from tests.cds.card_scenarios import MED_SAFETY, SCENARIOS, TRIAGE
from tests.support.live_server import LiveServer, free_port, launch

CONTRAINDICATED = "Contraindicated medication order"
IMMEDIATE = "Triage acuity: Immediate"


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    where = tmp_path_factory.mktemp("analytics-page")
    database = where / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    port = free_port()
    env = {
        "HORISMOS_DATABASE_URL": f"sqlite:///{database}",
        "HORISMOS_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
    }
    running = launch(env, where / "server.log", port=port)
    try:
        yield running
    finally:
        running.stop()


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
    return server


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
    _accessible(page)
