"""The change page: one change to a deployment as a reviewer reads it, in one HTML document.

``GET /changes/{id}`` serves it to browsers (``Accept`` ranking ``text/html`` first, as for the
run page): where the change is in its lifecycle and who moved it there, what the policy checked,
the files it changes, the replay's report — every decision that changes with both proofs side by
side, and how many stay — and, once approved, how often it agreed with the active version on live
hook calls (shadow mode). Rendered from ``templates/change.html``: self-contained (inline style,
no script), every value escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.api.pages import render
from app.api.run_proof import proof_text
from app.changes.envelope import ChangeView


def _decision(side: Mapping[str, Any] | None) -> str:
    if not side:
        return "no decision"
    decision = side.get("decision")
    said = (
        f"{decision.get('property')} = {decision.get('value')}"
        if isinstance(decision, Mapping)
        else "no decision"
    )
    return f"{said} (ended at {side.get('terminal')})"


def _proof(side: Mapping[str, Any] | None) -> str:
    proof = side.get("proof") if side else None
    return proof_text(proof) if isinstance(proof, Mapping) else "no proof: nothing was decided"


def _changed(items: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each decision that changes, both sides in words and both proofs as text."""
    return [
        {
            "run_id": item.get("runId"),
            "before": _decision(item.get("before")),
            "after": _decision(item.get("after")),
            "before_proof": _proof(item.get("before")),
            "after_proof": _proof(item.get("after")),
        }
        for item in items
    ]


def render_change_page(change: ChangeView) -> str:
    """The page for one change (``templates/change.html``)."""
    impact = [e for e in change.events if e.state == "impact" and e.detail]
    replay, shadow = change.replay, change.shadow
    return render(
        "change.html",
        change=change,
        checks=(change.policy or {}).get("checks") or [],
        replay=replay,
        replay_changed=_changed(list((replay or {}).get("changed") or [])),
        impact=impact[-1].detail if impact else None,
        shadow=shadow,
        shadow_disagreements=_changed(list((shadow or {}).get("disagreements") or [])),
    )


__all__ = ["render_change_page"]
