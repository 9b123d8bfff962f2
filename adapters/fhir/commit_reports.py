"""What a commit reports: each write's fate, recorded in the effect log as it happens
(:class:`WriteRecorder`), as one :class:`EffectReport` per write, and the errors that carry
them to the step (:class:`CommitFailed`, :class:`CommitRefused`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.fhir.writes import Answer
from app.store.effects import EffectLog, EffectRow, EffectState
from app.tools.errors import EffectNotExecuted, ToolError

log = logging.getLogger("horismos.commit")


@dataclass(frozen=True, kw_only=True)
class EffectReport:
    """What happened to one write."""

    effect_id: str
    tool: str
    target: str  # absolute URL of the resource
    expected_version: str | None
    element: str
    value: Any
    state: EffectState
    resource_type: str | None = None
    status: int | None = None
    new_version: str | None = None
    detail: str | None = None
    operation: str = "update"
    created: str | None = None  # "Type/id" a create made (or found already made)

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "created": self.created,
            "effectId": self.effect_id,
            "tool": self.tool,
            "target": self.target,
            "expectedVersion": self.expected_version,
            "resourceType": self.resource_type,
            "element": self.element,
            "value": self.value,
            "state": self.state,
            "status": self.status,
            "newVersion": self.new_version,
            "detail": self.detail,
        }


class CommitFailed(ToolError):
    """Raised by the handler when any effect is not ``accepted``; carries every effect's fate."""

    def __init__(self, effects: Sequence[EffectReport]) -> None:
        parts = [
            f"{e.effect_id}: {e.state}" + (f" ({e.detail})" if e.detail else "") for e in effects
        ]
        # a lost answer to a create may be asked again: its identifier makes the server answer
        # with the resource it already holds instead of creating a second one
        lost_creates = all(
            e.operation == "create" and e.state in ("unknown", "accepted") for e in effects
        )
        super().__init__("commit not accepted: " + "; ".join(parts), retryable=lost_creates)
        self.effects = tuple(effects)

    @property
    def conflicted(self) -> bool:
        """Whether the record changed since the decision was computed."""
        return any(e.state == "conflicted" for e in self.effects)

    def to_json(self) -> dict[str, object]:
        body = super().to_json()
        body["effects"] = [e.to_json() for e in self.effects]
        return body


class CommitRefused(EffectNotExecuted):
    """Raised by the handler when every write was ``refused``: no request left, so the ActionStep
    follows ``horis:next`` with the decision unwritten (``effect: "refused"`` in its trace entry,
    the message as its reason); carries every effect's fate."""

    def __init__(self, effects: Sequence[EffectReport]) -> None:
        reasons = [
            f"no {e.resource_type} was created: {e.detail}"
            if e.operation == "create"
            else f"{e.resource_type}.{e.element} was not written: {e.detail}"
            for e in effects
        ]
        super().__init__("; ".join(reasons), effect="refused")
        self.effects = tuple(effects)

    def to_json(self) -> dict[str, object]:
        body = super().to_json()
        body["effects"] = [e.to_json() for e in self.effects]
        return body


@dataclass(frozen=True, kw_only=True)
class PlannedWrite:
    """One write a call declares, before it is sent: what the log and the report name."""

    effect_id: str
    tool: str
    target: str
    expected: str | None
    resource_type: str
    element: str
    value: Any
    operation: str = "update"
    identifier: str | None = None  # system|value of a create
    recipients: list[str] = field(default_factory=list)

    def change(self) -> dict[str, Any]:
        """What the write changes, as the effect log keeps it (``remote_response.change``)."""
        out: dict[str, Any] = {"resourceType": self.resource_type, "operation": self.operation}
        if self.operation == "create":
            out.update(identifier=self.identifier, recipients=self.recipients)
        else:
            out.update(element=self.element, value=self.value)
        return out

    def build(self, state: EffectState, **kw: Any) -> EffectReport:
        return EffectReport(
            effect_id=self.effect_id,
            tool=self.tool,
            target=self.target,
            expected_version=self.expected,
            resource_type=self.resource_type,
            element=self.element,
            value=self.value,
            state=state,
            operation=self.operation,
            **kw,
        )


class WriteRecorder:
    """Writes one effect's states to the log and builds its report."""

    def __init__(self, effects: EffectLog, report: PlannedWrite, run_id: str) -> None:
        self.effects = effects
        self.report = report
        self.row = EffectRow(
            run_id=run_id,
            effect_id=report.effect_id,
            tool=report.tool,
            target=report.target,
            expected=report.expected,
        )

    def unsent(self, state: EffectState, response: dict[str, Any], **kw: Any) -> EffectReport:
        """No write left: one row, written once, in its final state."""
        self.effects.unsent(self.row, state, {**response, "change": self.report.change()})
        log.info(
            "effect %s of run %s: %s (nothing written)",
            self.row.effect_id,
            self.row.run_id,
            state,
        )
        return self.report.build(state, **kw)

    def attempt(self, request: dict[str, Any]) -> None:
        """The request is about to leave: ``attempted`` (one more attempt)."""
        self.effects.attempt(self.row, {"request": request, "change": self.report.change()})

    def settle(self, answer: Answer) -> EffectReport:
        """The answer to the request (or its absence): one update of the ``attempted`` row."""
        response = {**answer.response, "change": self.report.change()}
        if answer.detail and "error" not in response:
            response["reason"] = answer.detail
        self.effects.set(self.row.run_id, self.row.effect_id, answer.state, response)
        log.info("effect %s of run %s: %s", self.row.effect_id, self.row.run_id, answer.state)
        return self.report.build(
            answer.state,
            status=answer.status,
            new_version=answer.new_version,
            detail=answer.detail,
            created=answer.created,
        )
