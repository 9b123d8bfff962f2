"""What each card a hook run returns is remembered against: the declaration it came from and the
rules of the decision's proof, so that feedback (accepted, overridden and why) can be counted
per service, card and rule (``GET /analytics``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.ontology.model import CardDecl
from app.store.repo import CardIssue

#: The key of a card no declaration made: a draft order the service could not read.
UNREAD_ORDER_KEY = "(draft order not checked)"


def proof_rules(proof: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The rules whose derivations support the decided values, premises' own derivations
    included, in the order first met (the rules that were overruled are not among them)."""
    found: dict[str, None] = {}
    stack: list[Any] = list(reversed((proof or {}).get("values") or []))
    while stack:
        value = stack.pop()
        if not isinstance(value, Mapping):
            continue
        for derivation in value.get("derivations") or []:
            if not isinstance(derivation, Mapping):
                continue
            name = derivation.get("ruleName")
            if isinstance(name, str):
                found.setdefault(name, None)
            stack.extend(reversed(derivation.get("premises") or []))
    return tuple(found)


def card_issues(
    declared: Sequence[tuple[CardDecl, Mapping[str, Any]]],
    unread: Iterable[Mapping[str, Any]],
    rules: tuple[str, ...],
) -> list[CardIssue]:
    """One ``CardIssue`` per card of the answer: a declared card under its summary template,
    a card about an unread draft order under ``UNREAD_ORDER_KEY``."""
    issues = [CardIssue(uuid=str(c["uuid"]), key=UNREAD_ORDER_KEY) for c in unread]
    issues += [CardIssue(uuid=str(c["uuid"]), key=d.summary, rules=rules) for d, c in declared]
    return issues
