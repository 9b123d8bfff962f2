"""What happened to the cards the services issued, read back for ``GET /analytics``.

Two reads, one per table: the cards issued (``issued_cards`` joined to their run's time and
deployment version) and the feedback on them. Both are aggregated in Python by the caller
(``app.api.analytics``): the rules of a card are a JSON list, which the two backends expand
differently, and a window of days holds few enough rows to count in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import Feedback, IssuedCard, Run

#: Rows read per round trip.
_BATCH = 2000


@dataclass(frozen=True, kw_only=True)
class IssuedRow:
    """A card a run returned: when, by which service and version, from which declaration."""

    service_id: str
    card_key: str | None
    rules: tuple[str, ...]
    at: datetime
    deployment_version: str | None


@dataclass(frozen=True, kw_only=True)
class FeedbackRead:
    """What a clinician did with a card, and what the card was about."""

    service_id: str
    card_key: str | None
    rules: tuple[str, ...]
    outcome: str
    reason_code: str | None
    reason_display: str | None
    at: datetime
    deployment_version: str | None


def issued_since(
    session: Session, since: datetime, *, service_id: str | None = None
) -> Iterator[IssuedRow]:
    """Every card issued by a run created at or after ``since`` (one service's, if given)."""
    query = (
        select(
            IssuedCard.service_id,
            IssuedCard.card_key,
            IssuedCard.rules,
            Run.created_at,
            Run.deployment_version,
        )
        .join(Run, Run.id == IssuedCard.run_id)
        .where(Run.created_at >= since)
        .order_by(Run.created_at)
    )
    if service_id is not None:
        query = query.where(IssuedCard.service_id == service_id)
    for sid, key, rules, at, version in session.execute(query.execution_options(yield_per=_BATCH)):
        yield IssuedRow(
            service_id=sid,
            card_key=key,
            rules=tuple(rules or ()),
            at=at,
            deployment_version=version,
        )


def _display(reason: Any) -> str | None:
    coding = reason.get("reason") if isinstance(reason, dict) else None
    display = coding.get("display") if isinstance(coding, dict) else None
    return display if isinstance(display, str) else None


def feedback_since(
    session: Session, since: datetime, *, service_id: str | None = None
) -> Iterator[FeedbackRead]:
    """Every feedback item whose outcome happened at or after ``since``."""
    query = (
        select(
            Feedback.service_id,
            Feedback.card_key,
            Feedback.rules,
            Feedback.outcome,
            Feedback.reason_code,
            Feedback.override_reason,
            Feedback.outcome_timestamp,
            Feedback.deployment_version,
        )
        .where(Feedback.outcome_timestamp >= since)
        .order_by(Feedback.outcome_timestamp)
    )
    if service_id is not None:
        query = query.where(Feedback.service_id == service_id)
    rows = session.execute(query.execution_options(yield_per=_BATCH))
    for sid, key, rules, outcome, code, reason, at, version in rows:
        yield FeedbackRead(
            service_id=sid,
            card_key=key,
            rules=tuple(rules or ()),
            outcome=outcome,
            reason_code=code,
            reason_display=_display(reason),
            at=at,
            deployment_version=version,
        )
