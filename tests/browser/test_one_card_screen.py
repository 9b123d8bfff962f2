"""What a prescriber sees of one order in a real browser: the cards every service of the default
discovery answers for one extended-release opioid order, rendered as a CDS client shows them
(summary, indicator, detail as CommonMark, suggestion and link buttons, in a column of the
width a client gives its cards) in Debian's Chromium at 1280×800, must fit that one screen.

The page is this test's own minimal CDS client: the Sandbox renders the same fields. A
screenshot is kept under ``test-artifacts/browser/``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from playwright.sync_api import Browser, sync_playwright

from tests.cds.test_one_card_per_order import OXYCODONE_ER_20, draft, every_service, store
from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import OXYCODONE_IR_5, TEMAZEPAM_20, ago, order, patient

pytestmark = pytest.mark.fhirserver

OpenClient = Callable[..., AbstractContextManager[TestClient]]
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts/browser"
SCREEN = {"width": 1280, "height": 800}
COLOURS = {"info": "#0b6bcb", "warning": "#b35c00", "critical": "#b00020"}

PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Cards</title>
<style>
body {{ margin: 0; font: 14px/1.45 system-ui, sans-serif; color: #1a1a1a; }}
header {{ height: 56px; background: #263238; color: #fff; padding: 0 16px; display: flex;
         align-items: center; font-weight: 600; }}
main {{ display: flex; }}
.order {{ width: 560px; padding: 16px; border-right: 1px solid #ddd; }}
.cards {{ width: 640px; padding: 16px; }}
.card {{ border: 1px solid #ccc; border-left: 6px solid var(--c); border-radius: 4px;
        padding: 10px 14px; margin-bottom: 12px; }}
.card h2 {{ font-size: 15px; margin: 0 0 6px; }}
.card p, .card ul {{ margin: 4px 0; }}
.card ul {{ padding-left: 20px; }}
button, a.link {{ display: inline-block; margin: 6px 6px 0 0; padding: 4px 10px; font: inherit;
                 border: 1px solid #888; border-radius: 3px; background: #f5f5f5;
                 color: #1a1a1a; text-decoration: none; }}
.source {{ color: #555; font-size: 12px; }}
</style></head><body><header>Rx View — sign order</header><main>
<section class="order"><h1 style="font-size:16px">{drug}</h1></section>
<section class="cards" id="cards">{cards}</section></main></body></html>"""


def render(cards: list[dict[str, Any]], drug: str) -> str:
    md = MarkdownIt("commonmark", {"html": False})
    out = []
    for card in cards:
        buttons = "".join(
            f"<button>{html.escape(s['label'])}</button>" for s in card.get("suggestions", ())
        )
        links = "".join(
            f'<a class="link" href="{html.escape(link["url"])}">{html.escape(link["label"])}</a>'
            for link in card.get("links", ())
        )
        if card.get("overrideReasons"):
            buttons += "<button>Dismiss with a reason</button>"
        out.append(
            f'<article class="card" style="--c: {COLOURS[card["indicator"]]}">'
            f"<h2>{html.escape(card['summary'])}</h2>"
            f'<div class="source">{html.escape(card["source"]["label"])}</div>'
            f"{md.render(card.get('detail') or '')}<div>{buttons}{links}</div></article>"
        )
    return PAGE.format(drug=html.escape(drug), cards="".join(out))


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def test_the_cards_of_one_opioid_order_fit_one_screen(
    client: TestClient, fhir_server: FhirServer, browser: Browser
) -> None:
    pid = "screen-" + fhir_server.new_id()
    store(
        fhir_server,
        patient(pid),
        *(
            order(f"{pid}-oxy-{i}", pid, OXYCODONE_IR_5, authored=ago(days), dose=2, frequency=3)
            for i, days in enumerate((120, 90, 60, 30))
        ),
        order(f"{pid}-tem", pid, TEMAZEPAM_20, authored=ago(20)),
    )
    drafts = [draft(f"{pid}-er", pid, OXYCODONE_ER_20, frequency=2)]
    cards = every_service(client, fhir_server, "order-sign", pid, drafts)
    assert cards

    page = browser.new_page(viewport=SCREEN)
    try:
        page.set_content(render(cards, OXYCODONE_ER_20[1]))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "one-order-cards.png"), full_page=True)
        bottom = page.evaluate("document.getElementById('cards').getBoundingClientRect().bottom")
        # everything a clinician reads about the order is on the screen, without scrolling
        assert bottom <= SCREEN["height"], bottom
        assert page.evaluate("document.documentElement.scrollHeight") <= SCREEN["height"]
        seen = page.inner_text("#cards")
        assert seen.count("oxycodone ER 20 mg tablet") == 1, seen
    finally:
        page.close()
