"""A write's effect as the commit adapter logs it (:class:`app.store.effects.EffectLog`): sent
(``attempted``, one attempt), then moved to the state its answer, or the lack of one, gave."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from app.store.effects import EffectLog, EffectRow, EffectState


def log_effect(
    engine: Engine,
    *,
    run_id: str,
    effect_id: str,
    tool: str,
    target: str,
    expected: str | None = None,
    state: EffectState,
    response: dict[str, Any] | None = None,
) -> None:
    """Log the effect attempted, then ``state`` with ``response`` (what the server answered)."""
    log = EffectLog(engine)
    row = EffectRow(run_id=run_id, effect_id=effect_id, tool=tool, target=target, expected=expected)
    log.attempt(row, response or {})
    log.set(run_id, effect_id, state, response or {})
