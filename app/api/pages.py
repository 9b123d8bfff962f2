"""The service's HTML pages are Jinja2 templates (``app/api/templates``), autoescaped: every
value a template shows is escaped unless Python marked it as HTML it built and escaped itself
(``markupsafe.Markup``). One environment serves them all."""

from __future__ import annotations

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


def render(name: str, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return ENV.get_template(name).render(**context)
