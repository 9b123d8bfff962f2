"""What each card a hook run returns is remembered against: the declaration it came from and the
rules of the decision's proof, so that feedback (accepted, overridden and why) can be counted
per service, card and rule (``GET /analytics``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.clinical_text import proof_rules
from app.ontology.model import CardDecl, local_name
from app.store.run_rows import CardIssue

#: The key of a card no declaration made: a draft order the service could not read.
UNREAD_ORDER_KEY = "(draft order not checked)"


def rule_names(proof: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The local names of the rules whose derivations support the decided values, premises'
    own derivations included, in the order first met (``clinical_text.proof_rules``)."""
    return tuple(local_name(rule) for rule in proof_rules(proof))


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
