"""What clinicians answered about the cards a hook run issued: feedback stored by card, the
issued cards it is stored against (run, declaration, rules, version) and the responses they
came in. Like the rest of the store, every function takes a ``Session`` and leaves committing
to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.db import dialect_insert
from app.store.models import Feedback, IssuedCard, Run, utcnow

#: Longest card uuid stored (the ``issued_cards.card_uuid`` column).
CARD_UUID_LENGTH = 200
_IN_BATCH = 500


def add_feedback(
    session: Session,
    *,
    service_id: str,
    card_uuid: str,
    outcome: str,
    outcome_timestamp: datetime,
    accepted_suggestions: list[Any] | None = None,
    override_reason: dict[str, Any] | None = None,
    run_id: str | None = None,
) -> tuple[Feedback, bool]:
    """Store feedback on a card; an identical re-POST returns the stored row and ``False``."""
    stmt = (
        dialect_insert(session, Feedback)
        .values(
            service_id=service_id,
            card_uuid=card_uuid,
            run_id=run_id,
            outcome=outcome,
            accepted_suggestions=accepted_suggestions,
            override_reason=override_reason,
            outcome_timestamp=outcome_timestamp,
            received_at=utcnow(),
        )
        .on_conflict_do_nothing(
            index_elements=["service_id", "card_uuid", "outcome", "outcome_timestamp"]
        )
        .returning(Feedback.id)
    )
    inserted = session.execute(stmt).scalar_one_or_none()
    if inserted is not None:
        return session.get_one(Feedback, inserted), True
    existing = session.execute(
        select(Feedback).where(
            Feedback.service_id == service_id,
            Feedback.card_uuid == card_uuid,
            Feedback.outcome == outcome,
            Feedback.outcome_timestamp == outcome_timestamp,
        )
    ).scalar_one()
    return existing, False


@dataclass(frozen=True, kw_only=True)
class FeedbackRow:
    """One feedback item to store (``add_feedbacks``)."""

    card_uuid: str
    outcome: str
    outcome_timestamp: datetime
    run_id: str | None = None
    accepted_suggestions: list[Any] | None = None
    override_reason: dict[str, Any] | None = None
    card_key: str | None = None
    rules: tuple[str, ...] = ()
    deployment_version: str | None = None
    reason_code: str | None = None  # the override reason as "system|code"


def add_feedbacks(session: Session, service_id: str, items: Sequence[FeedbackRow]) -> list[bool]:
    """Store many feedback items in a few statements; per item, whether it was new (an item
    identical to one stored, or to an earlier one of ``items``, is not)."""
    now = utcnow()
    created: list[bool] = []
    taken: set[tuple[str, str, datetime]] = set()
    for start in range(0, len(items), _IN_BATCH):
        chunk = items[start : start + _IN_BATCH]
        stmt = (
            dialect_insert(session, Feedback)
            .values(
                [
                    {
                        "service_id": service_id,
                        "card_uuid": item.card_uuid,
                        "run_id": item.run_id,
                        "outcome": item.outcome,
                        "accepted_suggestions": item.accepted_suggestions,
                        "override_reason": item.override_reason,
                        "card_key": item.card_key,
                        "rules": list(item.rules),
                        "deployment_version": item.deployment_version,
                        "reason_code": item.reason_code[:500] if item.reason_code else None,
                        "outcome_timestamp": item.outcome_timestamp,
                        "received_at": now,
                    }
                    for item in chunk
                ]
            )
            .on_conflict_do_nothing(
                index_elements=["service_id", "card_uuid", "outcome", "outcome_timestamp"]
            )
            .returning(Feedback.card_uuid, Feedback.outcome, Feedback.outcome_timestamp)
        )
        inserted = {
            (uuid, outcome, stamp.astimezone(UTC)) for uuid, outcome, stamp in session.execute(stmt)
        }
        for item in chunk:
            key = (item.card_uuid, item.outcome, item.outcome_timestamp.astimezone(UTC))
            created.append(key in inserted and key not in taken)
            taken.add(key)
    return created


def list_feedback(session: Session, *, service_id: str | None = None) -> list[Feedback]:
    stmt = select(Feedback).order_by(Feedback.id)
    if service_id is not None:
        stmt = stmt.where(Feedback.service_id == service_id)
    return list(session.execute(stmt).scalars())


@dataclass(frozen=True, kw_only=True)
class IssuedCardInfo:
    """What feedback on a card is stored against: the run, declaration, rules and version."""

    run_id: str
    card_key: str | None
    rules: tuple[str, ...]
    deployment_version: str | None
    #: the service that issued the card
    service_id: str = ""


def issued_cards(
    session: Session, service_ids: str | Sequence[str], card_uuids: Iterable[str]
) -> dict[str, IssuedCardInfo]:
    """``{card uuid: IssuedCardInfo}`` for those of ``card_uuids`` the services issued (by
    key, in batches; an id longer than any stored one is not looked up)."""
    ids = [service_ids] if isinstance(service_ids, str) else list(service_ids)
    wanted = [u for u in dict.fromkeys(card_uuids) if 0 < len(u) <= CARD_UUID_LENGTH]
    found: dict[str, IssuedCardInfo] = {}
    for start in range(0, len(wanted), _IN_BATCH):
        chunk = wanted[start : start + _IN_BATCH]
        rows = session.execute(
            select(
                IssuedCard.card_uuid,
                IssuedCard.run_id,
                IssuedCard.card_key,
                IssuedCard.rules,
                Run.deployment_version,
                IssuedCard.service_id,
            )
            .join(Run, Run.id == IssuedCard.run_id)
            .where(IssuedCard.service_id.in_(ids), IssuedCard.card_uuid.in_(chunk))
        )
        for uuid, run_id, key, rules, version, service in rows:
            found[uuid] = IssuedCardInfo(
                run_id=run_id,
                card_key=key,
                rules=tuple(rules or ()),
                deployment_version=version,
                service_id=service,
            )
    return found


def run_responses(session: Session, run_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """The stored CDS responses of the given runs, by run id (in batches)."""
    ids = list(dict.fromkeys(run_ids))
    found: dict[str, dict[str, Any] | None] = {}
    for start in range(0, len(ids), _IN_BATCH):
        rows = session.execute(
            select(Run.id, Run.response).where(Run.id.in_(ids[start : start + _IN_BATCH]))
        )
        found.update({run_id: response for run_id, response in rows})
    return found
