"""What a run receives from its host: the clock, the Bridge, the tools, the text, a recording.

The interpreter reads nothing else from the outside world, which is what makes replay exact:
give it the same context (recorded Bridge answers and tool results substituted) and it walks the
same steps. The host's monotonic timer only measures how long steps and calls took (the trace's
``elapsedMs``); no decision reads it, so a replay without one walks the same steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.bridge.protocol import Bridge
from app.ontology.model import ToolDef
from app.runtime.trace import BridgeCall, ToolCall, TraceEntry
from app.world.inputs import InputStatus


class ToolPort(Protocol):
    """The part of ``app.tools.ToolInvoker`` the interpreter uses."""

    def invoke(
        self,
        tool: ToolDef,
        args: dict[str, Any],
        *,
        timeout: float,
        now: datetime | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]: ...


@dataclass
class Recording:
    """Recorded Bridge answers and tool results of an earlier run, by step path.

    Built from a trace (``Recording.from_trace``). Each step's calls are consumed in the order
    they were made; a step the recorded run never reached has none, and its Bridge calls then
    behave as if no Bridge were configured.
    """

    calls: dict[str, list[BridgeCall | ToolCall]] = field(default_factory=dict)

    @classmethod
    def from_trace(cls, trace: Sequence[TraceEntry | Mapping[str, Any]]) -> Recording:
        from app.runtime.trace import parse_trace

        rec = cls()
        rec._collect(parse_trace(trace), "")
        return rec

    def _collect(self, trace: list[TraceEntry], prefix: str) -> None:
        for entry in trace:
            key = prefix + entry.step
            self.calls.setdefault(key, []).extend(c.model_copy(deep=True) for c in entry.calls)
            if entry.subflow is not None:
                self._collect(entry.subflow.trace, key + "/")

    def take(self, key: str, kind: str, op: str) -> BridgeCall | ToolCall | None:
        """The next recorded call of ``kind``/``op`` at step ``key``, or ``None``."""
        queue = self.calls.get(key, [])
        for i, call in enumerate(queue):
            if call.type == kind and call.op == op:
                return queue.pop(i)
        return None


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Everything from outside that a run may use.

    ``now`` is the run's time (``horis:now`` effects, WaitStep timeouts); ``clock``, when given,
    timestamps trace entries (else every entry carries ``now``); ``timer``, when given, is a
    monotonic clock in seconds that measures each step and call (``elapsedMs``); ``deadline``,
    on that timer, is when the run's outside calls must be done by: a tool call gets what is
    left of it as its timeout, at most its own ``horis:timeout``. ``bridge=None`` is a supported
    configuration: perception and proposals take their fallbacks, narration renders the proof.
    ``recorded`` turns the run into a replay: Bridge answers and non-idempotent tool results come
    from it, and idempotent tools re-run only with ``rerun_idempotent``. ``bridge_for``, when
    given, picks the Bridge for a step's ``horis:model`` (the host builds it, e.g.
    ``app.bridge.BridgeResolver``); without it ``bridge`` serves every step.
    """

    now: datetime
    bridge: Bridge | None = None
    tools: ToolPort | None = None
    text: str | None = None
    run_id: str = "run"
    recorded: Recording | None = None
    rerun_idempotent: bool = False
    clock: Callable[[], datetime] | None = None
    bridge_for: Callable[[str | None], Bridge | None] | None = None
    timer: Callable[[], float] | None = None
    deadline: float | None = None
    #: what hydration could not read completely; None when the host records no input status
    inputs: InputStatus | None = None

    def time(self) -> datetime:
        return self.clock() if self.clock is not None else self.now

    def tick(self) -> float | None:
        """The monotonic timer's reading, or None without a timer."""
        return self.timer() if self.timer is not None else None

    def time_left(self, budget: float) -> float:
        """``budget`` seconds, cut to what is left before ``deadline`` (never below 0)."""
        if self.deadline is None or self.timer is None:
            return budget
        return max(0.0, min(budget, self.deadline - self.timer()))

    def bridge_of(self, model: str | None) -> Bridge | None:
        """The Bridge that serves a step whose ``horis:model`` is ``model`` (None: no Bridge)."""
        return self.bridge_for(model) if self.bridge_for is not None else self.bridge
