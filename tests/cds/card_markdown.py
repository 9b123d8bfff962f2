"""What every card's detail must look like once a CommonMark renderer (markdown-it-py) has
read it, as an EHR renders it — short, the advice and the facts that decided it, the proof on
the decision record: shared by the tests of the example deployments' cards, of the opioid
services' cards and of the cards of undecided and unread requests."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from app.ontology import load_ontology
from app.ontology.card_text import (
    DETAIL_MAX_CHARS,
    DETAIL_MAX_LINES,
    SUMMARY_MAX_LENGTH,
    TOKEN,
)
from app.ontology.deployments import find_deployments
from app.ontology.loader import default_ontology_paths

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
    "Bridge",
    "http://",
    "https://",
    "mm[Hg]",
    "{1.73_m2}",
    "Cel",
    "confidence None",
)
#: The proof's own wording, which stays on the decision record.
PROOF_WORDS = (
    "criterion met",
    "Also met",
    "ranked lower",
    "none on record",
    "Drafted for",
    "Condition on record: Condition",
    "Patient with observations",
    "ontology ",
    "could change it",
)
#: A code where a clinician expects a name (``SNOMED CT 5602001``, ``RxNorm 197696``).
BARE_CODE = re.compile(r"\b(RxNorm|SNOMED CT|LOINC|ICD-10-CM|ICD-10|CPT|NDC|CVX) \d")
#: A CamelCase or camelCase identifier (ChestPain, heartRate, EscalateToNurse).
IDENTIFIER = re.compile(r"\b[A-Z][a-z]+[A-Z][a-z]+\w*|\b[a-z]+[A-Z][a-z]+\w*")
#: Written so on purpose: units, a terminology's name, the CDS Hooks request field an
#: integrator must fix when a write was not authorized (``fhirAuthorization``), and FHIR's
#: datatype named by the validator in why a resource could not be read (``DateTime``).
WRITTEN_SO = {"mmHg", "RxNorm", "fhirAuthorization", "DateTime"}
#: A FHIR reference (``MedicationRequest/abc``): the record a reason names, not an identifier.
REFERENCE = re.compile(r"\b[A-Z][A-Za-z]+/[A-Za-z0-9\-.]{1,64}")


def declared_cards() -> set[tuple[str, str]]:
    cards: set[tuple[str, str]] = set()
    for source in find_deployments(default_ontology_paths()):
        ontology = load_ontology(source.paths)
        for service in ontology.services.values():
            cards.update((service.id, c.summary) for c in service.cards)
    return cards


def summary_matches(template: str, shown: str) -> bool:
    """Whether ``shown`` is what a card declared with summary ``template`` reads once its
    ``{{…}}`` placeholders are filled (a summary cut with ``…`` only needs to begin as the
    template does up to where it was cut)."""
    fixed = TOKEN.split(template)[::2]
    pattern = ".+?".join(re.escape(part) for part in fixed)
    if re.fullmatch(pattern, shown, flags=re.DOTALL):
        return True
    if not shown.endswith("…"):
        return False
    cut = shown[:-1]
    return any(
        re.fullmatch(".+?".join(re.escape(p) for p in fixed[:i]) + "(.*)", cut, flags=re.DOTALL)
        and cut.startswith(fixed[0][: len(cut)])
        for i in range(1, len(fixed) + 1)
    )


def shown_text(node: SyntaxTreeNode) -> str:
    """What a reader sees: inline text run together, one line per block."""
    if node.type == "text":
        return str(node.content)
    joint = "" if node.type == "inline" or (node.parent and node.parent.type == "inline") else "\n"
    return joint.join(shown_text(c) for c in node.children)


def _nested_list(tree: SyntaxTreeNode) -> SyntaxTreeNode | None:
    """The first bullet list with a bullet list inside one of its items (a proof's shape)."""
    for node in tree.walk():
        if node.type == "bullet_list" and any(
            d.type == "bullet_list" for item in node.children for d in item.walk() if d is not item
        ):
            return node
    return None


def check_card(detail: str, words: Iterable[str] = ()) -> str:
    """Assert the card's budget, structure and wording; return the text a reader sees.

    A card leads with the advice and the few facts that decided it and stays within
    ``DETAIL_MAX_CHARS`` and ``DETAIL_MAX_LINES``: no proof (no nested list), no engine wording,
    no bare code, no value the service did not have (``unknown``). The proof is on the
    decision record behind the card's link (``decision_record_text``)."""
    assert len(detail) <= DETAIL_MAX_CHARS, (len(detail), detail)
    assert len(detail.splitlines()) <= DETAIL_MAX_LINES, (len(detail.splitlines()), detail)
    md = MarkdownIt("commonmark")
    tree = SyntaxTreeNode(md.parse(detail))
    shown = shown_text(tree)
    assert _nested_list(tree) is None, f"a proof on the card:\n{detail}"
    assert shown.strip(), detail
    for expected in words:
        assert expected in shown, (expected, detail)
    for word in (*ENGINE_WORDS, *PROOF_WORDS):
        assert word not in shown, (word, detail)
    assert not BARE_CODE.search(shown), (BARE_CODE.search(shown), detail)
    assert not re.search(r"\bunknown\b", shown), detail
    identifiers = set(IDENTIFIER.findall(REFERENCE.sub("", shown))) - WRITTEN_SO
    assert not identifiers, (identifiers, detail)
    return shown


#: what a prescriber reads at a glance: every bundled summary fits (CDS Hooks allows 140)
SUMMARY_BUDGET = 100


def check_summary(summary: str) -> None:
    """A card summary within the budget a prescriber reads at a glance (and so within the one
    limit CDS Hooks sets), with no engine wording."""
    assert len(summary) <= min(SUMMARY_BUDGET, SUMMARY_MAX_LENGTH), (len(summary), summary)
    for word in (*ENGINE_WORDS, *PROOF_WORDS):
        assert word not in summary, (word, summary)
    assert not BARE_CODE.search(summary), summary


_TAG = re.compile(r"<[^>]+>")


def decision_record_text(client: TestClient, card: dict[str, Any]) -> str:
    """What the decision record behind the card's link shows: the run page's text, as a
    browser opens it (the proof as labelled statements, the data used with its dates), then the
    run's JSON (``GET /runs/{id}``: the undecided inputs with why each is incomplete and what it
    could change). Where the proof went when it left the card."""
    links = [link for link in card.get("links") or [] if link["label"].startswith("Decision")]
    assert links, card
    url = urlsplit(links[0]["url"])
    path = url.path + (f"?{url.query}" if url.query else "")
    page = client.get(path, headers={"Accept": "text/html"})
    assert page.status_code == 200, page.text
    document = client.get(path, headers={"Accept": "application/json"})
    assert document.status_code == 200, document.text
    text = re.sub(r"\s+", " ", html.unescape(_TAG.sub(" ", page.text)))
    return text + "\n" + json.dumps(document.json(), ensure_ascii=False)
