"""The run page's *Inputs* section: every input the run could not read completely, with its
state (absent, refused, stale, conflicting, unread, truncated) and why, in the words hydration
recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from app.clinical_text import property_name


def _text(value: Any) -> str:
    return "" if value is None else escape(str(value))


def inputs_section(rows: Any, *, names: Mapping[str, str] | None = None) -> str:
    """The section's HTML for a run's stored input status (``runs.inputs``); empty when the run
    recorded none (a run on structured input, or stored before input status existed). Each
    input is named by its label in ``names`` (property IRI → label), else its humanised name;
    the section sits in the clinician's part of the page (a level-3 heading)."""
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        return ""
    props = [r for r in rows if isinstance(r, Mapping)]
    incomplete = [r for r in props if r.get("state") != "complete"]
    head = '<h3>Inputs <span class="muted">(what the decision could read)</span></h3>'
    if not incomplete:
        return head + f'<p class="muted">All {len(props)} inputs the run read were complete.</p>'
    body = "".join(
        "<tr>"
        f"<td>{_text(property_name(str(r.get('property')), names))}</td>"
        f'<td><span class="st warn">{_text(r.get("state"))}</span></td>'
        "<td>"
        + "".join(
            f'<div>{_text(why.get("detail"))} <span class="muted">{_text(why.get("source"))}'
            "</span></div>"
            for why in r.get("reasons") or []
            if isinstance(why, Mapping)
        )
        + "</td></tr>"
        for r in incomplete
    )
    complete = len(props) - len(incomplete)
    return (
        head + '<table class="inputs"><thead><tr><th>Input</th><th>State</th><th>Why</th></tr>'
        f"</thead><tbody>{body}</tbody></table>"
        f'<p class="muted">{complete} other input(s) were complete.</p>'
    )
