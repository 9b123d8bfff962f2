"""The service's HTML pages are Jinja2 templates (``app/api/templates``), autoescaped: every
value a template shows is escaped unless Python marked it as HTML it built and escaped itself
(``markupsafe.Markup``). One environment serves them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def show_text(value: Any) -> str:
    """Any value as the pages show it: strings as they are, nothing for None, ``true``/``false``,
    numbers as written, everything else as compact JSON (templates escape it: ``|show``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


ENV.filters["show"] = show_text


def render(name: str, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return ENV.get_template(name).render(**context)
