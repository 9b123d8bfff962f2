"""Card text templates: a card's ``horis:summary``, ``horis:detail`` and a suggestion's
``horis:label`` may hold ``{{…}}`` placeholders filled from the run's facts::

    horis:summary "{{instance.drugName}}: {{focus.totalMme}} MME/day, at or over 50" ;

========================  ================================================================
``focus.P``               the values of property ``P`` (local name) on the run's focus
``instance.P``            the values of ``P`` on the card's instance (a ``horis:forEach``
                          card only)
========================  ================================================================

Values are written as text: an individual or class by its ``rdfs:label``, a decimal with at most
two decimals, a boolean as ``yes``/``no``, several values joined by ``, ``, no value as
``unknown`` (nothing is made up). A summary is plain text (whitespace and control characters
become one space); in a detail, which is Markdown, each filled value is escaped so a value can
never add emphasis, links or HTML (``markdown_escape``, the escaper of all free text on a
card). Pure: parsing, checking and writing values only; the card builder looks the values up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Literal

from app.ontology.model import Value

Scope = Literal["focus", "instance"]

TOKEN = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_NAME = re.compile(r"^(focus|instance)\.([A-Za-z_][A-Za-z0-9_-]*)$")
#: What CommonMark (and GitHub's tables and strikethrough) can read as markup anywhere in a line.
_MARKUP = re.compile(r"([\\`*_\[\]<>&#|~!])")
#: What is markup only where a line starts: a list or setext-heading marker, or an ordered
#: list's number and its delimiter (the delimiter is escaped: a backslash before a digit would
#: be shown).
_LEADING = re.compile(r"^([-+=]|[0-9]+(?=[.)]))")
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")

#: what a placeholder without a value is written as
UNKNOWN = "unknown"


def placeholders(text: str) -> list[str]:
    """Every placeholder's text (``instance.drugName``), in order."""
    return [m.group(1) for m in TOKEN.finditer(text)]


def parse_name(name: str) -> tuple[Scope, str] | None:
    """``("instance", "drugName")`` for ``instance.drugName``; None when it is not a name."""
    found = _NAME.match(name)
    if found is None:
        return None
    scope: Scope = "focus" if found.group(1) == "focus" else "instance"
    return scope, found.group(2)


def static_length(text: str) -> int:
    """The length of the text without its placeholders (what no value can shorten)."""
    return len(TOKEN.sub("", text))


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
        return named if named is not None else value
    return str(value)


def fill(text: str, lookup: Callable[[str], str], *, markdown: bool) -> str:
    """``text`` with each placeholder replaced by ``lookup(name)`` (escaped for Markdown when
    ``markdown``; else made plain)."""

    def one(match: re.Match[str]) -> str:
        value = lookup(match.group(1))
        return markdown_escape(value) if markdown else plain(value)

    return TOKEN.sub(one, text)


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


__all__ = [
    "TOKEN",
    "UNKNOWN",
    "Scope",
    "fill",
    "markdown_escape",
    "parse_name",
    "placeholders",
    "plain",
    "shorten",
    "show",
    "static_length",
]
