"""Per-instance cards (``horis:forEach``) and card text placeholders (``{{focus.P}}``,
``{{instance.P}}``), over HTTP with a small order-sign deployment
(tests/data/language/per_instance.ttl), and the load and verification errors of both."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from app.cds.response_check import check_response
from app.ontology import OntologyError, load_ontology, verify
from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text, shown_text

ONTOLOGY = Path(__file__).parents[1] / "data/language/per_instance.ttl"
BASE = "https://cds.example.test"
FLAGGED, PLAIN = "5640", "723"
SERVICE = "https://example.org/each#Service"

OpenClient = Callable[..., AbstractContextManager[TestClient]]


def order(pid: str, rxnorm: str, name: str | None) -> dict[str, Any]:
    resource = fx.draft_order(pid, rxnorm)
    if name is not None:
        resource["medicationCodeableConcept"]["text"] = name
    return resource


def order_sign(*orders: tuple[str, str | None]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pid = "p-" + fx.new_id()
    resources = [order(pid, code, name) for code, name in orders]
    body = fx.order_sign(pid, resources, fhir_server=None)
    return body, resources


def call(client: TestClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    resp = client.post("/cds-services/each-order", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert check_response(answer) == []
    cards: list[dict[str, Any]] = answer["cards"]
    return cards


def test_one_card_per_flagged_order_naming_it_and_acting_on_it_only(
    make_app_client: OpenClient,
) -> None:
    body, (first, plain, second) = order_sign(
        (FLAGGED, "Ibuprofen 400 mg"), (PLAIN, "Amoxicillin 500 mg"), (FLAGGED, "Ibuprofen 800 mg")
    )
    with make_app_client(ontology_paths=[ONTOLOGY], public_base_url=BASE) as client:
        cards = call(client, body)
        records = [decision_record_text(client, c) for c in cards]

    assert [c["summary"] for c in cards] == [
        "Review Ibuprofen 400 mg (one of 3 orders)",
        "Review Ibuprofen 800 mg (one of 3 orders)",
    ]
    assert [c["indicator"] for c in cards] == ["warning", "warning"]
    for card, resource, record in zip(cards, (first, second), records, strict=True):
        [suggestion] = card["suggestions"]
        assert suggestion["label"] == f"Cancel {resource['medicationCodeableConcept']['text']}"
        assert suggestion["actions"] == [
            {
                "type": "delete",
                "description": suggestion["label"],
                "resourceId": f"MedicationRequest/{resource['id']}",
            }
        ]
        assert card["detail"].startswith("Reconsider Ibuprofen ")
        assert "verdict review" in card["detail"]  # an individual by its label
        # why this order was flagged, as a clinician reads a proof: on the decision record
        # behind the card's link; the card itself carries no engine notation
        assert "Flagged order" in record, record[:3000]
        assert "[rule" not in card["detail"] and "isA" not in card["detail"]
    assert plain["id"] not in str(cards)


def test_no_matching_instance_no_card(make_app_client: OpenClient) -> None:
    body, _ = order_sign((PLAIN, "Amoxicillin 500 mg"))
    with make_app_client(ontology_paths=[ONTOLOGY], public_base_url=BASE) as client:
        assert call(client, body) == []


def test_values_are_escaped_in_the_detail_and_a_long_summary_is_shortened(
    make_app_client: OpenClient,
) -> None:
    sly = "Ibu*profen* [click](https://evil.example) <b>x</b> " + "very long name " * 8
    body, _ = order_sign((FLAGGED, sly))
    with make_app_client(ontology_paths=[ONTOLOGY], public_base_url=BASE) as client:
        [card] = call(client, body)

    summary = card["summary"]
    assert len(summary) < 140 and summary.endswith("…")
    assert summary.startswith("Review Ibu*profen* [click](https://evil.example) <b>x</b> very")
    # rendered, the Markdown detail shows the value as written: no emphasis, link or HTML
    tree = SyntaxTreeNode(MarkdownIt("commonmark").parse(card["detail"]))
    assert [n.type for n in tree.children[:2]] == ["paragraph", "paragraph"], card["detail"]
    full, detail = (shown_text(n) for n in tree.children[:2])
    name = " ".join(sly.split())
    assert full == f"Summary in full: Review {name} (one of 1 orders)"  # the whole summary
    assert detail == f"Reconsider {name}: verdict review."


# --- load and verification errors ----------------------------------------------------------


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = ONTOLOGY.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "variant.ttl"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("{{instance.drugName}} (one", "{{instance.drugNme}} (one", "drugNme is not a declared"),
        ("{{focus.orderCount}}", "{{orderCount}}", "{{orderCount}} is not a placeholder"),
        (
            "horis:forEach ( :hasOrder ) ;\n"
            "                 horis:where ( [ horis:property :flagged ; horis:is true ] ) ;",
            "",
            "the card has no horis:forEach",
        ),
    ],
)
def test_a_placeholder_naming_nothing_is_a_load_error(
    tmp_path: Path, old: str, new: str, says: str
) -> None:
    with pytest.raises(OntologyError) as caught:
        load_ontology([_variant(tmp_path, old, new)])
    problems = caught.value.problems
    assert problems, "no problem reported"
    for problem in problems:
        assert problem.node == SERVICE and problem.path is not None
        assert problem.path.startswith("horis:card")
        assert says in problem.message


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        # a summary whose fixed text alone exceeds the limit
        ("Review {{instance.drugName}}", "Review " + "x" * 140 + " {{instance.drugName}}", "140"),
        # the instance's property read on the focus
        ("{{focus.orderCount}}", "{{focus.drugName}}", "drugName belongs to Order, not to Patient"),
        # following a literal property yields no instances
        ("horis:forEach ( :hasOrder )", "horis:forEach ( :hasOrder :drugName )", "literals"),
    ],
)
def test_card_texts_and_instances_are_verified(
    tmp_path: Path, old: str, new: str, says: str
) -> None:
    problems = verify(load_ontology([_variant(tmp_path, old, new)]))
    assert any(p.node == SERVICE and says in p.message for p in problems), [
        str(p) for p in problems
    ]


def test_values_are_written_as_a_reader_expects() -> None:
    from decimal import Decimal

    from app.ontology.card_text import shorten, show

    def label(iri: str) -> str | None:
        return {"https://example.org/each#Review": "review"}.get(iri)

    assert show([Decimal("180.000")], label) == "180"
    assert show([Decimal("67.456")], label) == "67.46"
    assert show([True, "https://example.org/each#Review"], label) == "yes, review"
    assert show([], label) == "unknown"  # no value is said, never guessed
    assert shorten("word " * 40, 30) == "word word word word word…"
    assert len(shorten("x" * 200, 139)) == 139
