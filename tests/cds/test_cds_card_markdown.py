"""Every card of every bundled deployment, rendered by a CommonMark renderer (markdown-it-py) as
an EHR would: the proof is a nested list of labelled statements, values carry the units
clinicians write, data carries its date, and no engine notation reaches the reader."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from app.clinical_text import format_time, md_escape
from app.ontology import load_ontology
from app.ontology.deployments import find_deployments
from app.ontology.loader import default_ontology_paths
from tests.cds.card_scenarios import SCENARIOS, TAKEN

OpenClient = Callable[..., AbstractContextManager[TestClient]]

#: What a clinician must never have to read on a card.
ENGINE_WORDS = (
    "isA",
    "took its",
    " edge",
    "onUnreachable",
    "fallback",
    "Terminal step",
    "[rule",
    "was not assigned",
    "Not completed",
    "names no FHIR server",
    "Bridge",
    "http://",
    "https://",
    "mm[Hg]",
    "{1.73_m2}",
    "Cel",
    "confidence None",
)
#: A CamelCase or camelCase identifier (ChestPain, heartRate, EscalateToNurse).
IDENTIFIER = re.compile(r"\b[A-Z][a-z]+[A-Z][a-z]+\w*|\b[a-z]+[A-Z][a-z]+\w*")
WRITTEN_SO = {"mmHg", "RxNorm"}


def _declared_cards() -> set[tuple[str, str]]:
    cards: set[tuple[str, str]] = set()
    for source in find_deployments(default_ontology_paths()):
        ontology = load_ontology(source.paths)
        for service in ontology.services.values():
            cards.update((service.id, c.summary) for c in service.cards)
    return cards


@pytest.fixture(scope="module")
def md() -> MarkdownIt:
    return MarkdownIt("commonmark")


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def test_every_declared_card_has_a_scenario() -> None:
    """A new card in a bundled deployment needs a scenario here, so it is rendered too."""
    assert _declared_cards() == set(SCENARIOS)


def _card(client: TestClient, service: str, summary: str) -> dict[str, Any]:
    make, _words = SCENARIOS[(service, summary)]
    resp = client.post(f"/cds-services/{service}", json=make())
    assert resp.status_code == 200, resp.text
    cards = [c for c in resp.json()["cards"] if c["summary"] == summary]
    assert len(cards) == 1, resp.json()["cards"]
    return cards[0]


def _text(node: SyntaxTreeNode) -> str:
    """What a reader sees: inline text run together, one line per block."""
    if node.type == "text":
        return str(node.content)
    joint = "" if node.type == "inline" or (node.parent and node.parent.type == "inline") else "\n"
    return joint.join(_text(c) for c in node.children)


def _nested_list(tree: SyntaxTreeNode) -> SyntaxTreeNode | None:
    """The first bullet list with a bullet list inside one of its items."""
    for node in tree.walk():
        if node.type == "bullet_list" and any(
            d.type == "bullet_list" for item in node.children for d in item.walk() if d is not item
        ):
            return node
    return None


@pytest.mark.parametrize("key", sorted(SCENARIOS), ids=lambda k: f"{k[0]}:{k[1]}")
def test_each_card_renders_as_labelled_statements_with_units_and_dates(
    client: TestClient, md: MarkdownIt, key: tuple[str, str]
) -> None:
    service, summary = key
    card = _card(client, service, summary)
    tree = SyntaxTreeNode(md.parse(card["detail"]))
    shown = _text(tree)

    proof = _nested_list(tree)
    items: list[str] = []
    if "Missing data:" in shown:  # no decision: what was missing, said in a sentence
        assert proof is None and tree.children[-1].type == "paragraph", card["detail"]
    else:
        assert proof is not None, f"no nested list in:\n{card['detail']}"
        first = proof.children[0]
        # the decision comes first, in bold, in the ontology's words
        opening = [n for n in first.children[0].children[0].children if _text(n).strip()]
        assert opening[0].type == "strong", card["detail"]
        # every statement is its own list item: nothing merged into one paragraph
        items = [_text(n.children[0]) for n in proof.walk() if n.type == "list_item"]
        assert len(items) >= 2 and all(":" in i for i in items), items
    for words in SCENARIOS[key][1]:
        assert words in shown, (words, card["detail"])
    for word in ENGINE_WORDS:
        assert word not in shown, (word, card["detail"])
    identifiers = set(IDENTIFIER.findall(shown)) - WRITTEN_SO
    assert not identifiers, (identifiers, card["detail"])
    for line in items:
        if "Observation" in line:  # a measurement says when it was taken
            assert f"Observation, {format_time(TAKEN)}" in line, line


def test_a_card_shows_dates_in_the_configured_time_zone(make_app_client: OpenClient) -> None:
    key = ("horismos-triage", "Triage acuity: Non-urgent")
    with make_app_client(timezone="America/New_York") as client:
        card = _card(client, *key)
    taken = format_time(TAKEN, ZoneInfo("America/New_York"))
    assert taken.endswith((" EDT", " EST")), taken
    assert f"Heart rate: 72 /min — Observation, {taken}" in card["detail"]


def test_a_triage_card_without_a_fhir_server_has_no_write_back_notice(
    client: TestClient,
) -> None:
    """No server to write to means no write was possible: nothing to report, and no error."""
    card = _card(client, "horismos-triage", "Triage acuity: Immediate")
    assert "EHR" not in card["detail"], card["detail"]
    assert "FHIR server" not in card["detail"], card["detail"]


def test_free_text_in_a_card_cannot_become_markup(md: MarkdownIt) -> None:
    hostile = "1. <img src=x onerror=alert(1)> **bold** [link](http://x) # title\n- item"
    html = md.render(md_escape(hostile))
    assert "<img" not in html and "<strong>" not in html and "<a " not in html
    assert "<ol" not in html and "<h1" not in html and "<li" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
