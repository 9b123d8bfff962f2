"""Card text templates: a card's ``horis:summary``, ``horis:detail`` and a suggestion's
``horis:label`` may hold ``{{…}}`` placeholders filled from the run's facts::

    horis:summary "{{instance.drugName}}: {{focus.totalMme}} MME/day, at or over 50" ;

==========================  ==============================================================
``focus.P``                 the values of property ``P`` (local name) on the run's focus
``instance.P``              the values of ``P`` on the card's instance (a ``horis:forEach``
                            card only)
``focus.P.Q``               a path: the values of ``Q`` on the values of ``P``
``focus.P[F].Q``            the same, keeping only the values of ``P`` on which ``F`` is true
                            (``focus.hasStoredOrder[activeAmbulatoryBenzodiazepine].drugName``:
                            the benzodiazepines on record, by name)
``because.P``               what decided ``P`` on the focus, as a clinician reads it: the
                            criterion met and up to three of the data it rests on, each with
                            its unit and date (``Systolic blood pressure below 90 mmHg:
                            systolic blood pressure 85 mmHg, 2 Dec 2026 04:53 UTC``)
==========================  ==============================================================

A section ``{{#X}}…{{/X}}`` is kept only when ``X`` holds, ``{{^X}}…{{/X}}`` only when it does
not: ``X`` a value placeholder (it holds when it has a value that is not ``no``) or ``rule.R``
(it holds when rule ``R`` is among the criteria the decision's proof rests on). Sections do not
nest. A card names the facts that decided it in its template; the whole proof stays on the
decision record behind the card's link.

Values are written as text: an individual or class by its ``rdfs:label``, a decimal with at most
two decimals, a date or time by its day (``30 Nov 2026``), a boolean as ``yes``/``no``, several
values joined by ``, ``, no value as ``unknown`` (nothing is made up). A summary is plain text
(whitespace and control characters become one space); in a detail, which is Markdown, each
filled value is escaped so a value can never add emphasis, links or HTML (``markdown_escape``,
the escaper of all free text on a card). Pure: parsing, checking and writing values only; the
card builder looks the values up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from app.ontology.rules import Value

TOKEN = re.compile(r"\{\{\s*([^{}#^/]*?)\s*\}\}")
#: ``{{#X}}…{{/X}}`` or ``{{^X}}…{{/X}}``: kept when ``X`` holds (``#``) or does not (``^``)
SECTION = re.compile(r"\{\{\s*([#^])\s*([^{}]*?)\s*\}\}(.*?)\{\{\s*/\s*\2\s*\}\}", re.DOTALL)
_ANY_TAG = re.compile(r"\{\{[^{}]*\}\}")
_IDENT = r"[A-Za-z_][A-Za-z0-9_-]*"
_STEP = re.compile(rf"^({_IDENT})(?:\[({_IDENT})\])?$")
_RULE = re.compile(rf"^rule\.({_IDENT})$")
_BECAUSE = re.compile(rf"^because\.({_IDENT})$")

#: A card summary's length limit: CDS Hooks wants it "less than 140 characters". Every check of
#: a summary (the loader, the card builder, the response check, the OpenAPI model) reads this.
SUMMARY_MAX_LENGTH = 139
#: A bundled card's detail budget: what a clinician reads in a few seconds (the proof is on the
#: decision record behind the card's link).
DETAIL_MAX_CHARS = 600
DETAIL_MAX_LINES = 8
#: What CommonMark (and GitHub's tables and strikethrough) can read as markup anywhere in a line.
_MARKUP = re.compile(r"([\\`*_\[\]<>&#|~!])")
#: What is markup only where a line starts: a list or setext-heading marker, or an ordered
#: list's number and its delimiter (the delimiter is escaped: a backslash before a digit would
#: be shown).
_LEADING = re.compile(r"^([-+=]|[0-9]+(?=[.)]))")
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")
_BRACES = re.compile(r"\{\{|\}\}")

_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}(?=$|T)")

#: what a placeholder without a value is written as
UNKNOWN = "unknown"


def placeholders(text: str) -> list[str]:
    """Every placeholder's text (``instance.drugName``), in order: values, and the names the
    sections test (``rule.HighDose``)."""
    names = [m.group(2) for m in SECTION.finditer(text)]
    return [*names, *(m.group(1) for m in TOKEN.finditer(SECTION.sub(r"\3", text)))]


def stray_tags(text: str) -> list[str]:
    """Section tags left once every well-formed section is read (an unclosed ``{{#X}}``, a
    ``{{/X}}`` without its opening): a load error."""
    inner = SECTION.sub(r"\3", text)
    return [t for t in _ANY_TAG.findall(inner) if TOKEN.fullmatch(t) is None]


@dataclass(frozen=True)
class Name:
    """A parsed placeholder: ``scope`` ``focus``/``instance`` with its path of (property,
    filter or None) steps, ``because`` with the one property, or ``rule`` with the rule."""

    scope: Literal["focus", "instance", "because", "rule"]
    steps: tuple[tuple[str, str | None], ...]


def parse(name: str) -> Name | None:
    """The placeholder ``name`` read; None when it is not one."""
    for pattern, scope in ((_RULE, "rule"), (_BECAUSE, "because")):
        found = pattern.match(name)
        if found is not None:
            return Name(cast(Any, scope), ((found.group(1), None),))
    head, _, rest = name.partition(".")
    if head not in ("focus", "instance") or not rest:
        return None
    steps: list[tuple[str, str | None]] = []
    for part in rest.split("."):
        step = _STEP.match(part)
        if step is None:
            return None
        steps.append((step.group(1), step.group(2)))
    return Name(cast(Any, head), tuple(steps))


def static_length(text: str) -> int:
    """The length of the text without its placeholders and sections (what no value can
    shorten)."""
    return len(TOKEN.sub("", SECTION.sub("", text)))


def inert(text: str, limit: int | None = None) -> str:
    """Text taken from elsewhere (a PlanDefinition's title) as a card text that holds no
    placeholder: each ``{{`` and ``}}`` split by a space; cut to ``limit`` characters."""
    out = _BRACES.sub(lambda m: m.group(0)[0] + " " + m.group(0)[1], text)
    return out[:limit] if limit else out


def plain(text: str) -> str:
    """One line of plain text: whitespace and control characters become one space."""
    return _SPACE.sub(" ", text).strip()


def markdown_escape(text: str) -> str:
    """Free text as CommonMark that a renderer shows as that text, on one line (see
    :func:`plain`): every character that could add emphasis, code, a link, an image, HTML or
    an entity is backslash-escaped, and a leading list, heading, quote or setext marker is
    defused, so the text may stand anywhere in a line, at its start or in a list item."""
    escaped = _MARKUP.sub(r"\\\1", plain(text))
    return _LEADING.sub(_defuse, escaped, count=1)


def _defuse(found: re.Match[str]) -> str:
    marker = found.group(1)
    return marker + "\\" if marker[0].isdigit() else "\\" + marker


def show(values: Sequence[Value], label: Callable[[str], str | None]) -> str:
    """Values as text (``label`` names an IRI, None when it is not a node of the ontology)."""
    if not values:
        return UNKNOWN
    return ", ".join(_one(v, label) for v in values)


def _one(value: Value, label: Callable[[str], str | None]) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Decimal):
        rounded = value.quantize(Decimal("0.01")) if value.is_finite() else value
        return format(rounded.normalize(), "f")
    if isinstance(value, str):
        named = label(value)
        if named is not None:
            return named
        day = _ISO_DAY.match(value)
        if day is None:
            return value
        try:
            return _day(date.fromisoformat(day.group(0)))
        except ValueError:
            return value
    if isinstance(value, date):  # a datetime too: its day, as a clinician writes it
        return _day(value)
    return str(value)


def _day(value: date) -> str:
    return f"{value.day} {value:%b} {value.year:04d}"


def fill(
    text: str,
    lookup: Callable[[str], str],
    *,
    markdown: bool,
    holds: Callable[[str], bool] | None = None,
) -> str:
    """``text`` with each section kept or dropped as ``holds(name)`` says (without ``holds``,
    a section holds when its placeholder has a value: not ``unknown``, not ``no``), then each
    placeholder replaced by ``lookup(name)`` (escaped for Markdown when ``markdown``; else made
    plain)."""

    def test(name: str) -> bool:
        if holds is not None:
            return holds(name)
        return lookup(name) not in (UNKNOWN, "no", "")

    def section(match: re.Match[str]) -> str:
        kept = test(match.group(2)) == (match.group(1) == "#")
        return match.group(3) if kept else ""

    def one(match: re.Match[str]) -> str:
        value = lookup(match.group(1))
        return markdown_escape(value) if markdown else plain(value)

    return TOKEN.sub(one, SECTION.sub(section, text))


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters with an ellipsis, at a word boundary when
    one is near the end."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit - 25:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def absolute_http(url: str) -> bool:
    """Whether ``url`` is an absolute http(s) URL (what a card's source or link may name)."""
    if any(c.isspace() for c in url):
        return False
    try:
        parts = urlsplit(url)
        host = parts.hostname
        _port = parts.port
    except ValueError:  # an unclosed IPv6 bracket, a port that is not a number
        return False
    return parts.scheme in ("http", "https") and bool(host)


__all__ = [
    "DETAIL_MAX_CHARS",
    "DETAIL_MAX_LINES",
    "SECTION",
    "SUMMARY_MAX_LENGTH",
    "TOKEN",
    "UNKNOWN",
    "Name",
    "absolute_http",
    "fill",
    "inert",
    "markdown_escape",
    "parse",
    "placeholders",
    "plain",
    "shorten",
    "show",
    "static_length",
    "stray_tags",
]
