"""``POST /cds-services/{id}/feedback``: what the clinician did with each card.

Each item is stored (``store.repo.add_feedback``) and linked to the run whose response carried
the card; an identical re-POST is harmless. Listeners registered with ``add_listener`` are told
about every newly stored item, after it is committed; the commit adapter uses this to reconcile
the effect of an accepted suggestion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, String, cast, select
from sqlalchemy.exc import SQLAlchemyError

from app.cds.errors import Issue, RequestInvalid, ServiceNotFound, StoreUnavailable
from app.cds.requests import FeedbackItem, parse_feedback
from app.ontology.model import Ontology
from app.store import Run, repo, session_scope

log = logging.getLogger("horismos.cds.feedback")
OUTCOMES = ("accepted", "overridden")


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
    try:
        return datetime.fromisoformat(item.outcomeTimestamp.replace("Z", "+00:00"))
    except ValueError:
        raise RequestInvalid.one(
            "invalid",
            f"feedback[{i}].outcomeTimestamp must be an ISO 8601 instant",
            f"feedback[{i}].outcomeTimestamp",
        ) from None


def _check(items: list[FeedbackItem]) -> None:
    issues: list[Issue] = []
    for i, item in enumerate(items):
        if item.outcome not in OUTCOMES:
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


def _find_card(session: Any, service_id: str, card_uuid: str) -> tuple[str | None, Any]:
    """The run whose stored response carries the card (a text match over the service's runs)."""
    needle = f'%"{card_uuid}"%'
    rows = session.execute(
        select(Run.id, Run.response)
        .where(Run.service_id == service_id, cast(Run.response, String).like(needle))
        .limit(5)
    ).all()
    for run_id, response in rows:
        for card in (response or {}).get("cards", []):
            if card.get("uuid") == card_uuid:
                return run_id, card
    return None, None


def store_feedback(
    *,
    ontology: Ontology,
    engine: Engine,
    service_id: str,
    body: Any,
    listeners: list[FeedbackListener],
) -> dict[str, Any]:
    try:
        ontology.service(service_id)
    except KeyError:
        raise ServiceNotFound.one(
            "not-found", f"no CDS service {service_id!r} is declared", "id"
        ) from None
    items = parse_feedback(body).feedback
    _check(items)
    stamps = [_timestamp(item, i) for i, item in enumerate(items)]
    fresh: list[StoredFeedback] = []
    try:
        with session_scope(engine) as session:
            for item, stamp in zip(items, stamps, strict=True):
                run_id, card = _find_card(session, service_id, item.card)
                _row, created = repo.add_feedback(
                    session,
                    service_id=service_id,
                    card_uuid=item.card,
                    outcome=item.outcome,
                    outcome_timestamp=stamp,
                    accepted_suggestions=item.acceptedSuggestions,
                    override_reason=item.overrideReason,
                    run_id=run_id,
                )
                if created:
                    fresh.append(
                        StoredFeedback(
                            service_id=service_id,
                            run_id=run_id,
                            card_uuid=item.card,
                            outcome=item.outcome,
                            accepted_suggestions=tuple(
                                str(s["id"]) for s in item.acceptedSuggestions or []
                            ),
                            card=card,
                        )
                    )
    except SQLAlchemyError as exc:
        log.error("feedback for %s could not be stored: %s", service_id, exc)
        raise StoreUnavailable.one("transient", "feedback could not be stored; retry") from None
    for entry in fresh:
        for listener in listeners:
            try:
                listener(entry)
            except Exception:  # a listener's failure must not undo stored feedback
                log.exception("feedback listener %r failed for card %s", listener, entry.card_uuid)
    return {"stored": len(fresh), "duplicates": len(items) - len(fresh)}
