"""What the run page shows, as stored (``RunPage``), and the few helpers each of its parts
(``app/api/run_clinician.py``, ``app/api/run_auditor.py``) formats values with.

The page's template is autoescaped; a cell built here with a tag (a value in bold, an id as
code) escapes its values itself and is passed on as ``Markup``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from html import escape
from typing import Any

from markupsafe import Markup

from app.api.pages import show_text
from app.ontology.model import humanise

__all__ = ["RunPage", "cells", "display_name", "escaped", "markup", "ran_at"]


@dataclass(frozen=True, kw_only=True)
class RunPage:
    """Everything the page shows, as stored."""

    document: Mapping[str, Any]  # the outcome JSON ``GET /runs/{id}`` returns
    created_at: datetime | None = None
    service_id: str | None = None
    hook: str | None = None
    patient: str | None = None
    deployment: str | None = None
    deployment_version: str | None = None
    ontology_digest: str | None = None
    request_digest: str | None = None
    effects: Sequence[Mapping[str, Any]] = ()
    #: the CDS response the EHR was given (its cards and their suggestions)
    response: Mapping[str, Any] | None = None
    #: the hook's context and prefetch as the run read them
    context: Mapping[str, Any] = field(default_factory=dict)
    prefetch: Mapping[str, Any] = field(default_factory=dict)
    #: labels of the deployment's steps, tools and properties, by local name and IRI
    names: Mapping[str, str] = field(default_factory=dict)
    zone: tzinfo = UTC


def escaped(value: Any) -> str:
    """Any value as escaped text (``app.api.pages.show_text``, escaped)."""
    return escape(show_text(value))


def markup(value: Any) -> Markup:
    """A value escaped as the page shows it (``escaped``), for a template cell."""
    return Markup(escaped(value))


def cells(rows: Iterable[Sequence[str]]) -> list[list[Markup]]:
    """Rows of cells that the parts built as escaped HTML."""
    return [[Markup(c) for c in row] for row in rows]


def display_name(page: RunPage, key: Any) -> str:
    """A step's, property's or tool's label (``page.names``), else its humanised name."""
    if key is None:
        return ""
    text = str(key)
    return page.names.get(text) or humanise(text)


def ran_at(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> Any:
    """When the run ran: its row's time, else its first step's."""
    if page.created_at is not None:
        return page.created_at
    return trace[0].get("at") if trace else None
