"""Free text on a card (a FHIR resource's text, a language model's narration, a filled
``{{…}}`` value) goes through one escaper, ``app.ontology.card_text.markdown_escape``; rendered
by a CommonMark renderer (markdown-it-py) as an EHR renders a card's detail, it must read as
the text itself, on one line, wherever the card puts it: alone, opening a line after another,
inside a sentence, as a list item, in bold or in italics."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

from app.clinical_text import proof_markdown
from app.ontology.card_text import fill, markdown_escape, plain
from tests.support.depth import examples

MD = MarkdownIt("commonmark")

#: Where a card's Markdown puts escaped text, and the HTML each place must render to.
PLACES: list[tuple[str, str]] = [
    ("{}", "<p>{}</p>\n"),
    ("Opening line\n{}", "<p>Opening line\n{}</p>\n"),
    ("Before {} after.", "<p>Before {} after.</p>\n"),
    ("- {}", "<ul>\n<li>{}</li>\n</ul>\n"),
    ("- first\n  - {}", "<ul>\n<li>first\n<ul>\n<li>{}</li>\n</ul>\n</li>\n</ul>\n"),
    ("**{}**", "<p><strong>{}</strong></p>\n"),
    ("*{}*", "<p><em>{}</em></p>\n"),
]


def assert_reads_as_written(text: str) -> None:
    shown = escapeHtml(plain(text))
    for markdown, html in PLACES:
        source = markdown.format(markdown_escape(text))
        assert MD.render(source) == html.format(shown), (text, source)


@pytest.mark.parametrize(
    "text",
    [
        "1. first\n2) second",
        "2) second",
        "1.5 mg twice a day",  # no backslash may show before the number
        "123456789. not a list either",
        "- item",
        "+ item",
        "* item",
        "= a setext underline",
        "===",
        "---",
        "***",
        "# a heading",
        "### a heading ###",
        "> a quote",
        "*emphasis* and **strong** and _under_ and __score__",
        "`code` and ``more code``",
        "```fenced",
        "~~~fenced and ~~struck~~",
        "[a link](https://evil.example) and ![an image](x.png)",
        "[ref]: https://evil.example",
        "<http://evil.example> and <b>bold</b> and <!-- comment -->",
        "<img src=x onerror=alert(1)>",
        "&amp; &lt; &#42; &copy;",
        "a | table | row",
        "trailing backslash\\",
        "back\\*slash\\",
        "    four spaces: not code",
        "tab\tand\nline\r\nbreaks\x00and\x1fcontrols",
        "1. <img src=x onerror=alert(1)> **bold** [link](http://x) # title\n- item",
    ],
)
def test_markup_in_free_text_reads_as_written(text: str) -> None:
    assert_reads_as_written(text)


MARKUP = "\\`*_[]()<>&#!|~-+=.:;{}\"' \t\n0123456789ab"


@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet=MARKUP, min_size=1, max_size=24) | st.text(min_size=1, max_size=24))
@example("1)")
@example("-")
def test_any_text_reads_as_written(text: str) -> None:
    if not plain(text):  # nothing to show: the renderer shows nothing either
        assert markdown_escape(text) == ""
        return
    assert_reads_as_written(text)


def test_a_filled_value_reads_as_written_and_the_template_keeps_its_markup() -> None:
    value = "1. *Ibuprofen* [x](y)"
    detail = fill("**{{instance.drugName}}**: reconsider", lambda _: value, markdown=True)
    assert MD.render(detail) == f"<p><strong>{escapeHtml(value)}</strong>: reconsider</p>\n"


def test_free_text_in_a_proof_reads_as_written() -> None:
    text = "1. first\n2) second <b>x</b> *y*"
    fact: dict[str, Any] = {"name": "note", "valueText": text, "provenance": "api"}
    proof = {"values": [{**fact, "derivations": [{"ruleLabel": "# rule", "premises": [fact]}]}]}
    html = MD.render(proof_markdown(proof))
    shown = escapeHtml("Note: 1. first 2) second <b>x</b> *y*")
    assert f"<li><strong>{shown}</strong> — criterion met: # rule\n<ul>\n<li>{shown}" in html
    assert "<ol" not in html and "<em>" not in html and "<h1" not in html
