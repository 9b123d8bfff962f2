"""What every card's detail must look like once a CommonMark renderer (markdown-it-py) has
read it, as an EHR renders it: shared by the tests of the example deployments' cards and of the
opioid services' cards."""

from __future__ import annotations

import re
from collections.abc import Iterable

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from app.ontology import load_ontology
from app.ontology.card_text import TOKEN
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
#: A CamelCase or camelCase identifier (ChestPain, heartRate, EscalateToNurse).
IDENTIFIER = re.compile(r"\b[A-Z][a-z]+[A-Z][a-z]+\w*|\b[a-z]+[A-Z][a-z]+\w*")
WRITTEN_SO = {"mmHg", "RxNorm"}


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
    """The first bullet list with a bullet list inside one of its items."""
    for node in tree.walk():
        if node.type == "bullet_list" and any(
            d.type == "bullet_list" for item in node.children for d in item.walk() if d is not item
        ):
            return node
    return None


def _undecided_list(tree: SyntaxTreeNode) -> SyntaxTreeNode | None:
    """The list of incomplete inputs after a bold "No … was decided" opening, if there is one."""
    blocks = tree.children
    for i, node in enumerate(blocks[:-1]):
        if node.type != "paragraph":
            continue
        opening = [n for n in node.children[0].children if shown_text(n).strip()]
        if (
            opening
            and opening[0].type == "strong"
            and shown_text(opening[0]).startswith("No ")
            and shown_text(opening[0]).endswith(" was decided")
            and blocks[i + 1].type == "bullet_list"
        ):
            return blocks[i + 1]
    return None


def check_card(detail: str, words: Iterable[str] = ()) -> list[str]:
    """Assert the card's structure and wording; return its proof's statements, one per item."""
    md = MarkdownIt("commonmark")
    tree = SyntaxTreeNode(md.parse(detail))
    shown = shown_text(tree)

    proof = _nested_list(tree)
    items: list[str] = []
    undecided = _undecided_list(tree)
    if "Missing data:" in shown:  # no decision: what was missing, said in a sentence
        assert proof is None and tree.children[-1].type == "paragraph", detail
    elif undecided is not None:
        # not decided on incomplete data: one item per input and why, in a clinician's words,
        # each with what it could have changed where a rule says so
        items = [shown_text(item.children[0]) for item in undecided.children]
        assert items and all(i.strip() for i in items), detail
        for item in undecided.children:
            for nested in item.children[1:]:
                assert nested.type == "bullet_list", detail
                assert all(
                    shown_text(n.children[0]).startswith("could change it: ")
                    for n in nested.children
                ), detail
    else:
        assert proof is not None, f"no nested list in:\n{detail}"
        first = proof.children[0]
        # the decision comes first, in bold, in the ontology's words
        opening = [n for n in first.children[0].children[0].children if shown_text(n).strip()]
        assert opening[0].type == "strong", detail
        # every statement is its own list item: nothing merged into one paragraph
        items = [shown_text(n.children[0]) for n in proof.walk() if n.type == "list_item"]
        assert len(items) >= 2 and all(":" in i for i in items), items
    for expected in words:
        assert expected in shown, (expected, detail)
    for word in ENGINE_WORDS:
        assert word not in shown, (word, detail)
    identifiers = set(IDENTIFIER.findall(shown)) - WRITTEN_SO
    assert not identifiers, (identifiers, detail)
    return items
