"""The decision page in a real browser: Debian's Chromium driven by Playwright, opened from a
card's link as a clinician would, against the service running as a process on loopback.

Asserts what a person sees (the text, its order, the suggested action) and checks basic
accessibility with axe-core (tests/browser/node_modules, pinned by its package-lock.json): no
serious or critical violation, landmarks, headings and colour contrast among the rules that ran.
A full-page screenshot of each page is kept under ``test-artifacts/browser/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from app.clinical_text import format_time
from tests.cds.card_scenarios import MED_SAFETY, SCENARIOS, TAKEN, TRIAGE
from tests.support.live_server import LiveServer, sqlite_live_server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "tests/browser/node_modules/axe-core/axe.min.js"
ARTIFACTS = ROOT / "test-artifacts/browser"
#: axe rules that must have run (and passed) on the page: landmarks, headings, contrast
REQUIRED_RULES = {"landmark-one-main", "page-has-heading-one", "heading-order", "color-contrast"}


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    extra = {"HORISMOS_TIMEZONE": "Europe/Paris"}
    with sqlite_live_server(
        sqlite_template, tmp_path_factory.mktemp("decision-page"), extra
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


def _open(browser: Browser, card: dict[str, Any], name: str) -> Page:
    """Follow the card's link; the page is kept open for the test, its screenshot saved."""
    # the page forbids every script (CSP); axe is injected by the test, so bypass it here only
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    page = context.new_page()
    [link] = card["links"]
    response = page.goto(link["url"])
    assert response is not None and response.status == 200
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    return page


def _top(page: Page, text: str) -> float:
    """Where ``text`` first appears on the page, from the top (it must be visible)."""
    found = page.get_by_text(text, exact=False).first
    assert found.is_visible(), text
    box = found.bounding_box()
    assert box is not None, text
    return float(box["y"])


def _headings(page: Page) -> list[tuple[str, str]]:
    found = page.eval_on_selector_all(
        "h1, h2, h3", "hs => hs.map(h => [h.tagName.toLowerCase(), h.textContent.trim()])"
    )
    return [(str(tag), str(text)) for tag, text in found]


def _axe(page: Page) -> dict[str, Any]:
    page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = page.evaluate(
        "() => axe.run(document, {resultTypes: ['violations', 'passes']})"
    )
    return result


def _accessible(page: Page) -> None:
    result = _axe(page)
    grave = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert grave == [], grave
    passed = {p["id"] for p in result["passes"]}
    assert passed >= REQUIRED_RULES, REQUIRED_RULES - passed


def test_the_med_safety_page_shows_the_decision_why_and_the_suggested_action(
    server: LiveServer, browser: Browser
) -> None:
    card = _card(server, MED_SAFETY, "Contraindicated medication order")
    page = _open(browser, card, "med-safety-contraindicated")

    assert page.title().startswith("Decision record")
    headings = _headings(page)
    assert headings[0] == ("h1", "Decision record")
    assert [h for h in headings if h[0] == "h2"] == [
        ("h2", "For the clinician"),
        ("h2", "For the auditor"),
    ]
    sections = [text for tag, text in headings if tag == "h3"]
    assert sections[:4] == ["Decision", "Suggested actions", "Why", "Data used"]

    # what a clinician reads first, in this order, above everything for the auditor
    decision = _top(page, "Order safety: Contraindicated")
    suggestion = _top(page, "Remove the contraindicated draft order")
    why = _top(page, "criterion met: NSAID with eGFR below 30")
    data = _top(page, "eGFR: 25 mL/min/1.73 m²")
    auditor = _top(page, "For the auditor")
    trace = _top(page, "ReasoningStep")
    assert decision < suggestion < why < data < auditor < trace
    body = page.inner_text("body")
    assert "Delete the draft order before signing." in body
    # the data used with its date, in the configured time zone, named
    taken = format_time(TAKEN, ZoneInfo("Europe/Paris"))
    assert taken.endswith((" CET", " CEST")), taken
    assert taken in body and "times in Europe/Paris" in body
    clinician = page.inner_text("section.clinician")
    for engine in ("isA", "egfr =", "[rule", "mL/min/{1.73_m2}", "Terminal step"):
        assert engine not in clinician, engine
    _accessible(page)


def test_the_triage_page_names_the_patient_and_encounter_and_reads_as_labels(
    server: LiveServer, browser: Browser
) -> None:
    card = _card(server, TRIAGE, "Triage acuity: Immediate")
    page = _open(browser, card, "triage-immediate")

    context = page.inner_text("section.clinician dl")
    assert "born 2 Apr 1950" in context and "Patient/p-" in context
    assert "Encounter/e-" in context and "EMER" in context
    decision = _top(page, "Acuity: Immediate")
    criterion = _top(page, "Systolic blood pressure below 90 mmHg")
    measured = _top(page, "Systolic blood pressure: 85 mmHg")
    assert decision < criterion <= measured
    assert "No action was suggested." in page.inner_text("section.clinician")
    # the auditor's part keeps the engine's record: trace steps and the digests
    audit = page.inner_text("section.audit")
    for step in ("Intake", "Assess", "Route", "Explain", "Done"):
        assert step in audit
    assert "Ontology digest" in audit and "Request digest" in audit
    _accessible(page)
