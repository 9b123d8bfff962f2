"""The run page's *Inputs* section: every input the run could not read completely, with its
state (absent, refused, stale, conflicting, unread, truncated) and why, in the words hydration
recorded (shown by the ``inputs`` macro of ``app/api/templates/run_parts.html``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.clinical_text import property_name


def inputs_view(rows: Any, *, names: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """What the section shows of a run's stored input status (``runs.inputs``): None when the
    run recorded none (a run on structured input, or stored before input status existed), else
    how many inputs it read, and each incomplete one by its label in ``names`` (property IRI →
    label, else its humanised name) with its state and reasons (detail, source)."""
    if not isinstance(rows, Sequence) or isinstance(rows, str):
        return None
    props = [r for r in rows if isinstance(r, Mapping)]
    incomplete = [
        {
            "name": property_name(str(r.get("property")), names),
            "state": r.get("state"),
            "reasons": [
                (why.get("detail"), why.get("source"))
                for why in r.get("reasons") or []
                if isinstance(why, Mapping)
            ],
        }
        for r in props
        if r.get("state") != "complete"
    ]
    return {"read": len(props), "incomplete": incomplete}
