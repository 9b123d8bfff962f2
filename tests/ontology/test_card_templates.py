"""A card's detail template over the deciding facts, and its source, as Turtle declares them:
paths with filters, ``because.P``, sections per rule; a mistake in any of them is a load error
naming the card, and an unusable documentation page is refused (docs/vocabulary.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fhir.resources.R4B.plandefinition import PlanDefinitionAction

from app.ontology import OntologyError, card_text, load_ontology
from app.plandefinition.export import _card_action

ROOT = Path(__file__).resolve().parents[2]
IMMEDIATE = 'horis:detail "**Immediate**: {{because.acuity}}. See the patient now." ]'


def _triage_with(tmp_path: Path, old: str, new: str) -> Path:
    text = (ROOT / "ontologies/triage.ttl").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "triage.ttl"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _load_error(path: Path) -> str:
    with pytest.raises(OntologyError) as caught:
        load_ontology([path])
    return str(caught.value)


def test_the_bundled_triage_card_names_its_deciding_facts_with_because() -> None:
    service = load_ontology([ROOT / "ontologies/triage.ttl"]).service("horismos-triage")
    immediate = service.cards[0]
    assert immediate.detail is not None and "{{because.acuity}}" in immediate.detail
    assert dict(immediate.paths)["because.acuity"][0][0].endswith("#acuity")
    assert service.documentation is not None and service.documentation.startswith("https://")


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{{#rule.NoSuchRule}}x{{/rule.NoSuchRule}}", "NoSuchRule is not a declared rule"),
        ("{{focus.hasSymptom[noSuchFilter].label}}", "noSuchFilter"),
        ("{{#because.acuity}} left open", "is not closed or not opened"),
        ("{{nothing.acuity}}", "is not a placeholder"),
    ],
)
def test_a_template_mistake_is_a_load_error(tmp_path: Path, template: str, said: str) -> None:
    path = _triage_with(tmp_path, IMMEDIATE, f'horis:detail "{template}" ]')
    assert said in _load_error(path)


def test_a_documentation_page_must_be_an_absolute_url(tmp_path: Path) -> None:
    path = _triage_with(
        tmp_path,
        "horis:documentation <https://horismos.dev/docs/examples#emergency-department-triage-"
        "horismos-triage>",
        'horis:documentation "docs/examples.md"',
    )
    assert "is not an absolute http(s) URL" in _load_error(path)


def test_a_topic_is_a_coding_with_its_display(tmp_path: Path) -> None:
    path = _triage_with(
        tmp_path,
        '    horis:title "ED triage acuity" ;\n',
        '    horis:title "ED triage acuity" ;\n'
        '    horis:topic [ horis:code "http://example.org/topics|triage" ;'
        ' rdfs:label "Triage" ] ;\n',
    )
    service = load_ontology([path]).service("horismos-triage")
    assert service.topic == ("http://example.org/topics", "triage", "Triage")


def test_sections_keep_what_holds_and_drop_what_does_not() -> None:
    text = "A{{#rule.X}}, with {{focus.p}}{{/rule.X}}{{^focus.q}}, none{{/focus.q}}."
    values = {"focus.p": "Temazepam", "focus.q": "unknown"}
    filled = card_text.fill(
        text, lambda n: values.get(n, "unknown"), markdown=False, holds=lambda n: n == "rule.X"
    )
    assert filled == "A, with Temazepam, none."
    assert card_text.static_length(text) == len("A.")


def test_a_card_links_the_pages_it_declares_in_order(tmp_path: Path) -> None:
    links = (
        'horis:link [ horis:label "ESI handbook" ; horis:url "https://example.org/esi" ] , '
        '[ horis:label "Local pathway" ; horis:url "https://example.org/pathway" ] ;\n'
    )
    path = _triage_with(tmp_path, IMMEDIATE, links + IMMEDIATE)
    ontology = load_ontology([path])
    immediate = ontology.service("horismos-triage").cards[0]
    assert immediate.links == (
        ("ESI handbook", "https://example.org/esi"),
        ("Local pathway", "https://example.org/pathway"),
    )
    # read as a PlanDefinition, the card's action documents the same pages
    action = _card_action(ontology, immediate)
    PlanDefinitionAction.model_validate(action)
    assert [(d["display"], d["url"]) for d in action["documentation"]] == list(immediate.links)


@pytest.mark.parametrize(
    ("link", "said"),
    [
        ('[ horis:label "ESI" ; horis:url "esi.html" ]', "is not an absolute http(s) URL"),
        ('[ horis:url "https://example.org/esi" ]', "label"),
        ('[ horis:label " " ; horis:url "https://example.org/esi" ]', "label is empty"),
        ('[ horis:label "ESI" ; horis:url "https://[::1" ]', "is not an absolute http(s) URL"),
        ('[ horis:label "ESI" ; horis:url "https://ex.org/a b" ]', "is not an absolute"),
    ],
)
def test_a_card_link_needs_a_label_and_a_web_page(tmp_path: Path, link: str, said: str) -> None:
    path = _triage_with(tmp_path, IMMEDIATE, f"horis:link {link} ;\n{IMMEDIATE}")
    assert said in _load_error(path)
