"""The closed value sets of CDS Hooks 2.0 that this service writes and reads, each defined
once: the Turtle compiler refuses a declaration outside them, the response check refuses a
response outside them, and the OpenAPI description lists them (https://cds-hooks.hl7.org/2.0/)."""

from __future__ import annotations

from typing import Literal, get_args

#: ``card.indicator``, from least to most urgent
Indicator = Literal["info", "warning", "critical"]
#: ``card.selectionBehavior``
SelectionBehavior = Literal["at-most-one", "any"]
#: ``action.type`` of a suggestion's actions and of ``systemActions``
ActionType = Literal["create", "update", "delete"]
#: what a suggestion declared in Turtle may do besides an action: offer advice only
SuggestionActionType = Literal[ActionType, "none"]
#: ``link.type``
LinkType = Literal["absolute", "smart"]
#: ``feedback.outcome``
FeedbackOutcome = Literal["accepted", "overridden"]

INDICATORS: tuple[Indicator, ...] = get_args(Indicator)
SELECTION_BEHAVIORS: tuple[SelectionBehavior, ...] = get_args(SelectionBehavior)
ACTION_TYPES: tuple[ActionType, ...] = get_args(ActionType)
SUGGESTION_ACTION_TYPES: tuple[SuggestionActionType, ...] = get_args(SuggestionActionType)
LINK_TYPES: tuple[LinkType, ...] = get_args(LinkType)
FEEDBACK_OUTCOMES: tuple[FeedbackOutcome, ...] = get_args(FeedbackOutcome)


def listed(values: tuple[str, ...]) -> str:
    """``"info", "warning" or "critical"``: a value set as a message names it."""
    quoted = [f'"{v}"' for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
