"""What happened to the cards the services issued, read back for ``GET /analytics``.

Three reads: the cards issued (``issued_cards`` joined to their run's time and deployment
version), the feedback on them, and what changes in shadow mode decided beside the active
version (``shadow_results`` joined to their run and change, with the cards the run issued). All
are aggregated in Python by the caller (``app.api.analytics``): the rules of a card are a JSON
list, which the two backends expand differently, and a window of days holds few enough rows to
count in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import Change, Feedback, IssuedCard, Run, ShadowResult

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
    """Every card issued by a run created at or after ``since`` (one service's, if given); a run
    computed ahead of an order-sign call showed its cards to nobody (the run that reused it
    issued its own), nor did one an ``$apply`` call made (``origin``), so neither is counted."""
    query = (
        select(
            IssuedCard.service_id,
            IssuedCard.card_key,
            IssuedCard.rules,
            Run.created_at,
            Run.deployment_version,
        )
        .join(Run, Run.id == IssuedCard.run_id)
        .where(Run.created_at >= since, Run.ahead_key.is_(None), Run.origin.is_(None))
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


@dataclass(frozen=True, kw_only=True)
class ShadowRead:
    """What a change decided beside the active version on one live run, and what the run
    answered: the keys of the cards it issued (the active version's)."""

    change_id: str
    change_version: str | None
    change_status: str
    service_id: str
    agree: bool | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    error: str | None
    at: datetime
    cards: tuple[str | None, ...]


def shadow_since(
    session: Session, since: datetime, *, service_id: str | None = None
) -> list[ShadowRead]:
    """Every shadow decision of a run created at or after ``since`` (one service's, if given)."""
    query = (
        select(
            ShadowResult.change_id,
            Change.candidate_version,
            Change.status,
            Run.service_id,
            ShadowResult.run_id,
            ShadowResult.agree,
            ShadowResult.before,
            ShadowResult.after,
            ShadowResult.error,
            Run.created_at,
        )
        .join(Run, Run.id == ShadowResult.run_id)
        .join(Change, Change.id == ShadowResult.change_id)
        .where(Run.created_at >= since, Run.service_id.is_not(None))
        .order_by(Run.created_at, ShadowResult.id)
    )
    if service_id is not None:
        query = query.where(Run.service_id == service_id)
    rows = session.execute(query).all()
    differing = [r[4] for r in rows if r[5] is False]
    cards: dict[str, list[str | None]] = {}
    for start in range(0, len(differing), _BATCH):
        issued = select(IssuedCard.run_id, IssuedCard.card_key).where(
            IssuedCard.run_id.in_(differing[start : start + _BATCH])
        )
        for run_id, key in session.execute(issued.order_by(IssuedCard.id)):
            cards.setdefault(run_id, []).append(key)
    return [
        ShadowRead(
            change_id=change_id,
            change_version=version,
            change_status=status,
            service_id=sid,
            agree=agree,
            before=before,
            after=after,
            error=error,
            at=at,
            cards=tuple(cards.get(run_id, ())),
        )
        for change_id, version, status, sid, run_id, agree, before, after, error, at in rows
    ]
