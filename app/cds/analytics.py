"""The analytics report: per service, card and rule, how often cards fired, were accepted and
were overridden, and for which reasons, over a window of days (``GET /analytics``); and for each
change that decided beside the active version (shadow mode), how often it agreed on the
service's live runs of the window and, where it did not, on which cards and how the decision
would have moved.

Pure: it counts rows read from the store (``app.store.analytics``) and names things with the
labels the deployments give (a service's title, a rule's ``rdfs:label``, an override reason's
display). A card is counted under its declaration (its summary template), so the cards of one
declaration for different patients are one line; feedback stored before cards recorded their
declaration is counted under ``UNKNOWN``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.deployments import Deployments
from app.store.analytics import FeedbackRead, IssuedRow, ShadowRead

UNKNOWN = "(not recorded)"
_PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")


@dataclass(frozen=True, kw_only=True)
class Labels:
    """How the report names services, rules and override reasons."""

    services: Mapping[str, str] = field(default_factory=dict)  # service id → title
    rules: Mapping[str, str] = field(default_factory=dict)  # rule local name → label
    reasons: Mapping[str, str] = field(default_factory=dict)  # "system|code" → display

    @classmethod
    def of(cls, deployments: Deployments) -> Labels:
        """The labels every loaded deployment declares."""
        services: dict[str, str] = {}
        rules: dict[str, str] = {}
        reasons: dict[str, str] = {}
        for dep in deployments:
            ontology = dep.ontology
            if ontology is None:
                continue
            for svc in ontology.services.values():
                services[svc.id] = svc.title or svc.id
                for iri in {
                    *svc.override_reasons,
                    *(i for c in svc.cards for i in c.override_reasons or ()),
                }:
                    reason = ontology.individuals[iri]
                    reasons[reason.codes[0]] = reason.label or reason.codes[0]
            for rule in ontology.rules:
                rules.setdefault(rule.name, rule.label or rule.name)
        return cls(services=services, rules=rules, reasons=reasons)


def card_label(key: str) -> str:
    """A card declaration's summary template as a reader sees it: placeholders as "…"."""
    return _PLACEHOLDER.sub("…", key)


@dataclass
class Tally:
    """Counts for one service, card, rule or day."""

    fired: int = 0
    accepted: int = 0
    overridden: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add_feedback(self, row: FeedbackRead) -> None:
        if row.outcome == "accepted":
            self.accepted += 1
        elif row.outcome == "overridden":
            self.overridden += 1
            self.reasons[row.reason_code or ""] += 1

    def to_json(self, displays: Mapping[str, str]) -> dict[str, Any]:
        return {
            "fired": self.fired,
            "accepted": self.accepted,
            "overridden": self.overridden,
            "overriddenBy": [
                {
                    "reason": code or None,
                    "display": displays.get(code) or code or "no reason given",
                    "count": count,
                }
                for code, count in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
        }


@dataclass
class _Service:
    total: Tally = field(default_factory=Tally)
    cards: dict[str, Tally] = field(default_factory=dict)
    rules: dict[str, Tally] = field(default_factory=dict)
    days: dict[str, Tally] = field(default_factory=dict)
    shadow: dict[str, _Shadow] = field(default_factory=dict)  # by change id, first seen first

    def tallies(self, card: str | None, rules: Iterable[str], day: str) -> list[Tally]:
        return [
            self.total,
            self.cards.setdefault(card or UNKNOWN, Tally()),
            *(self.rules.setdefault(r, Tally()) for r in rules),
            self.days.setdefault(day, Tally()),
        ]


@dataclass
class _Shadow:
    """One change's agreement with the active version on one service's runs."""

    version: str | None
    status: str
    runs: int = 0
    agreed: int = 0
    disagreed: int = 0
    errors: int = 0
    #: (card key or None for a run without card, decision before, decision after) → runs
    differed: Counter[tuple[str | None, str, str]] = field(default_factory=Counter)

    def add(self, row: ShadowRead) -> None:
        self.runs += 1
        if row.error is not None or row.agree is None:
            self.errors += 1
        elif row.agree:
            self.agreed += 1
        else:
            self.disagreed += 1
            before, after = _decided(row.before), _decided(row.after)
            for key in dict.fromkeys(row.cards or (None,)):
                self.differed[(key, before, after)] += 1

    def to_json(self, change: str) -> dict[str, Any]:
        return {
            "change": change,
            "version": self.version,
            "status": self.status,
            "runs": self.runs,
            "agreed": self.agreed,
            "disagreed": self.disagreed,
            "errors": self.errors,
            "differed": [
                {
                    "card": key,
                    "label": card_label(key) if key is not None else NO_CARD,
                    "active": before,
                    "change": after,
                    "runs": count,
                }
                for (key, before, after), count in sorted(
                    self.differed.items(), key=lambda kv: (-kv[1], kv[0][0] or "", kv[0][1:])
                )
            ],
        }


#: How the report names a run on which the active version issued no card.
NO_CARD = "(no card)"


def _decided(outcome: Mapping[str, Any] | None) -> str:
    """A run's decision as the report shows it: its value, or that there was none."""
    decision = (outcome or {}).get("decision")
    value = decision.get("value") if isinstance(decision, Mapping) else None
    return str(value) if value is not None else "no decision"


def build_report(
    issued: Iterable[IssuedRow],
    feedback: Iterable[FeedbackRead],
    *,
    labels: Labels,
    since: datetime,
    until: datetime,
    shadow: Iterable[ShadowRead] = (),
) -> dict[str, Any]:
    """The report's JSON: one entry per service that issued cards, got feedback or was decided
    again by a change in shadow mode."""
    services: dict[str, _Service] = {}
    displays: dict[str, str] = dict(labels.reasons)
    for card in issued:
        day = card.at.date().isoformat()
        for tally in services.setdefault(card.service_id, _Service()).tallies(
            card.card_key, card.rules, day
        ):
            tally.fired += 1
    for row in feedback:
        if row.reason_code and row.reason_display:
            displays.setdefault(row.reason_code, row.reason_display)
        day = row.at.date().isoformat()
        for tally in services.setdefault(row.service_id, _Service()).tallies(
            row.card_key, row.rules, day
        ):
            tally.add_feedback(row)
    for result in shadow:
        changes = services.setdefault(result.service_id, _Service()).shadow
        changes.setdefault(
            result.change_id, _Shadow(version=result.change_version, status=result.change_status)
        ).add(result)
    return {
        "since": since.isoformat(),
        "until": until.isoformat(),
        "services": [
            {
                "service": sid,
                "title": labels.services.get(sid, sid),
                **svc.total.to_json(displays),
                "cards": [
                    {"card": key, "label": card_label(key), **t.to_json(displays)}
                    for key, t in _ranked(svc.cards)
                ],
                "rules": [
                    {"rule": name, "label": labels.rules.get(name, name), **t.to_json(displays)}
                    for name, t in _ranked(svc.rules)
                ],
                "days": [
                    {"day": day, **svc.days[day].to_json(displays)} for day in sorted(svc.days)
                ],
                "shadow": [change.to_json(cid) for cid, change in svc.shadow.items()],
            }
            for sid, svc in sorted(services.items())
        ],
    }


def _ranked(tallies: Mapping[str, Tally]) -> list[tuple[str, Tally]]:
    """Most overridden first, then most fired: what an author should look at first."""
    return sorted(tallies.items(), key=lambda kv: (-kv[1].overridden, -kv[1].fired, kv[0]))
