"""A run's status, defined once: what a run that ended can be (``Outcome.status``), and what a
stored run can be (``runs.status``: those, or ``running`` while a hook call holds its claim)."""

from __future__ import annotations

from typing import Literal, get_args

#: An ended run: decided or not, ``completed``; waiting in a WaitStep, ``suspended``; broken,
#: ``failed``.
OutcomeStatus = Literal["completed", "suspended", "failed"]
#: A stored run: an ended run's status, or ``running`` (claimed, not yet ended).
RunStatus = Literal["running", OutcomeStatus]

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
OUTCOME_STATUSES: tuple[str, ...] = get_args(OutcomeStatus)

__all__ = ["OUTCOME_STATUSES", "RUN_STATUSES", "OutcomeStatus", "RunStatus"]
