"""What a run receives from its host: the clock, the Bridge, the tools, the text, a recording.

The interpreter reads nothing else from the outside world, which is what makes replay exact:
give it the same context (recorded Bridge answers and tool results substituted) and it walks the
same steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.bridge.protocol import Bridge
from app.ontology.model import ToolDef


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

    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def from_trace(cls, trace: list[dict[str, Any]]) -> Recording:
        rec = cls()
        rec._collect(trace, "")
        return rec

    def _collect(self, trace: list[dict[str, Any]], prefix: str) -> None:
        for entry in trace:
            key = prefix + str(entry.get("step"))
            self.calls.setdefault(key, []).extend(dict(c) for c in entry.get("calls", []))
            sub = entry.get("subflow")
            if isinstance(sub, Mapping):
                self._collect(list(sub.get("trace", [])), key + "/")

    def take(self, key: str, kind: str, op: str) -> dict[str, Any] | None:
        """The next recorded call of ``kind``/``op`` at step ``key``, or ``None``."""
        queue = self.calls.get(key, [])
        for i, call in enumerate(queue):
            if call.get("type") == kind and call.get("op") == op:
                return queue.pop(i)
        return None


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """Everything from outside that a run may use.

    ``now`` is the run's time (``horis:now`` effects, WaitStep timeouts); ``clock``, when given,
    timestamps trace entries (else every entry carries ``now``). ``bridge=None`` is a supported
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

    def time(self) -> datetime:
        return self.clock() if self.clock is not None else self.now

    def bridge_of(self, model: str | None) -> Bridge | None:
        """The Bridge that serves a step whose ``horis:model`` is ``model`` (None: no Bridge)."""
        return self.bridge_for(model) if self.bridge_for is not None else self.bridge
