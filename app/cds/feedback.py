"""``POST /cds-services/{id}/feedback``: what the clinician did with each card.

Each item is stored (``app.store.feedback.add_feedbacks``) and linked to the run whose response
carried the card, found by key in ``issued_cards``; feedback naming a card the service never
returned is refused (400, nothing of the request stored). An identical re-POST is harmless.
Listeners registered with ``add_listener`` are told about every newly stored item, after it is
committed; the commit adapter uses this to reconcile the effect of an accepted suggestion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.cds.errors import Issue, RequestInvalid, ServiceNotFound, StoreUnavailable
from app.cds.requests import FeedbackItem, parse_feedback
from app.cds_vocabulary import FEEDBACK_OUTCOMES
from app.store import feedback as feedback_store
from app.store import session_scope
from app.store.db import describe_error

log = logging.getLogger("horismos.cds.feedback")
#: At most this many issues are listed when items name unknown cards.
_MAX_ISSUES = 20


@dataclass(frozen=True, kw_only=True)
class StoredFeedback:
    """One newly stored feedback item, as listeners see it."""

    service_id: str
    run_id: str | None
    card_uuid: str
    outcome: str
    accepted_suggestions: tuple[str, ...]
    card: dict[str, Any] | None  # the card as it was returned, when the run is known


FeedbackListener = Callable[[StoredFeedback], None]


def _timestamp(item: FeedbackItem, i: int) -> datetime:
    """The item's instant, in UTC as it is stored. One with no offset (a date, a local time) is
    not an instant, and one whose UTC time falls outside the calendar
    (``0001-01-01T00:00:00+01:00``) cannot be stored: both are the client's to correct."""
    where = f"feedback[{i}].outcomeTimestamp"
    try:
        stamp = datetime.fromisoformat(item.outcomeTimestamp.replace("Z", "+00:00"))
    except ValueError:
        raise RequestInvalid.one("invalid", f"{where} must be an ISO 8601 instant", where) from None
    if stamp.tzinfo is None:
        raise RequestInvalid.one(
            "invalid", f"{where} must be an ISO 8601 instant with a time zone offset", where
        )
    try:
        return stamp.astimezone(UTC)
    except OverflowError:
        raise RequestInvalid.one(
            "invalid", f"{where} lies outside the years 0001 to 9999 in UTC", where
        ) from None


def _check(items: list[FeedbackItem]) -> None:
    issues: list[Issue] = []
    for i, item in enumerate(items):
        if item.outcome not in FEEDBACK_OUTCOMES:
            issues.append(
                Issue(
                    code="invalid",
                    diagnostics=f"feedback[{i}].outcome must be 'accepted' or 'overridden'",
                    expression=f"feedback[{i}].outcome",
                )
            )
        if item.outcome == "accepted" and not item.acceptedSuggestions:
            continue  # a card accepted without suggestions is plain acknowledgement
        for j, s in enumerate(item.acceptedSuggestions or []):
            if not isinstance(s.get("id"), str):
                issues.append(
                    Issue(
                        code="required",
                        diagnostics=f"feedback[{i}].acceptedSuggestions[{j}].id is required",
                        expression=f"feedback[{i}].acceptedSuggestions[{j}].id",
                    )
                )
    if issues:
        raise RequestInvalid(issues=issues)


def _card_of(response: dict[str, Any] | None, card_uuid: str) -> dict[str, Any] | None:
    for card in (response or {}).get("cards", []):
        if isinstance(card, dict) and card.get("uuid") == card_uuid:
            return card
    return None


def _shown(card_uuid: str) -> str:
    return repr(card_uuid if len(card_uuid) <= 64 else card_uuid[:64] + "…")


def _issued(
    session: Any, service_id: str, items: list[FeedbackItem], issuers: Sequence[str]
) -> dict[str, tuple[feedback_store.IssuedCardInfo, dict[str, Any] | None]]:
    """``{card uuid: (what it was issued against, card)}`` for every item, looked up by key
    among the cards of ``issuers`` (the service, or the services a combined service combines);
    refuses the request (400 naming each item, nothing stored) when it names a card the
    service never issued."""
    runs = feedback_store.issued_cards(session, issuers, [item.card for item in items])
    unknown = [
        Issue(
            code="not-found",
            diagnostics=f"feedback[{i}].card {_shown(item.card)} is not a card service "
            f"{service_id!r} returned",
            expression=f"feedback[{i}].card",
        )
        for i, item in enumerate(items)
        if item.card not in runs
    ]
    if unknown:
        raise RequestInvalid(issues=unknown[:_MAX_ISSUES])
    responses = feedback_store.run_responses(session, [i.run_id for i in runs.values()])
    return {uuid: (i, _card_of(responses.get(i.run_id), uuid)) for uuid, i in runs.items()}


def _add(session: Any, rows: list[feedback_store.FeedbackRow], issuers: list[str]) -> list[bool]:
    """Store ``rows``, each under the service that issued its card; per row, whether it was
    new."""
    created: dict[int, bool] = {}
    for issuer in dict.fromkeys(issuers):
        mine = [i for i, s in enumerate(issuers) if s == issuer]
        news = feedback_store.add_feedbacks(session, issuer, [rows[i] for i in mine])
        created.update(zip(mine, news, strict=True))
    return [created[i] for i in range(len(rows))]


def reason_code(item: FeedbackItem) -> str | None:
    """The chosen override reason as ``system|code`` (CDS Hooks ``overrideReason.reason``), or
    None when the item gives none."""
    reason = (item.overrideReason or {}).get("reason")
    if not isinstance(reason, dict) or not isinstance(reason.get("code"), str):
        return None
    system = reason.get("system")
    return f"{system if isinstance(system, str) else ''}|{reason['code']}"


def store_feedback(
    *,
    services: Container[str],
    engine: Engine,
    service_id: str,
    body: Any,
    listeners: list[FeedbackListener],
    members: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Store feedback on cards ``service_id`` returned; ``services`` are the service ids the
    deployments declare (feedback on a deployment not served now is still stored);
    ``members``: each combined service's services, whose cards its cards are (feedback on a
    combined card is stored against the service that issued its lead card)."""
    if service_id not in services:
        raise ServiceNotFound.one("not-found", f"no CDS service {service_id!r} is declared", "id")
    items = parse_feedback(body).feedback
    _check(items)
    stamps = [_timestamp(item, i) for i, item in enumerate(items)]
    try:
        with session_scope(engine) as session:
            issuers = (members or {}).get(service_id, (service_id,))
            issued = _issued(session, service_id, items, issuers)
            rows = [
                feedback_store.FeedbackRow(
                    card_uuid=item.card,
                    outcome=item.outcome,
                    outcome_timestamp=stamp,
                    accepted_suggestions=item.acceptedSuggestions,
                    override_reason=item.overrideReason,
                    run_id=issued[item.card][0].run_id,
                    card_key=issued[item.card][0].card_key,
                    rules=issued[item.card][0].rules,
                    deployment_version=issued[item.card][0].deployment_version,
                    reason_code=reason_code(item) if item.outcome == "overridden" else None,
                )
                for item, stamp in zip(items, stamps, strict=True)
            ]
            created = _add(session, rows, [issued[i.card][0].service_id for i in items])
        fresh = [
            StoredFeedback(
                service_id=issued[item.card][0].service_id,
                run_id=issued[item.card][0].run_id,
                card_uuid=item.card,
                outcome=item.outcome,
                accepted_suggestions=tuple(str(s["id"]) for s in item.acceptedSuggestions or []),
                card=issued[item.card][1],
            )
            for item, new in zip(items, created, strict=True)
            if new
        ]
    except SQLAlchemyError as exc:
        log.error("feedback for %s could not be stored: %s", service_id, describe_error(exc))
        raise StoreUnavailable.one("transient", "feedback could not be stored; retry") from None
    for entry in fresh:
        for listener in listeners:
            try:
                listener(entry)
            except Exception:  # a listener's failure must not undo stored feedback
                log.exception("feedback listener %r failed for card %s", listener, entry.card_uuid)
    return {"stored": len(fresh), "duplicates": len(items) - len(fresh)}
