"""Calls to the outside world — the Bridge and tools — recorded in the trace and, on replay,
substituted from a recording (``RunContext.recorded``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from app.bridge.protocol import Bridge, BridgeError, BridgeErrorKind, BridgeResult
from app.ontology.model import ToolDef
from app.runtime.context import RunContext
from app.runtime.trace import BridgeCall, CallError, ToolCall, TraceEntry
from app.tools.errors import AdapterUnavailable, EffectNotExecuted, ToolError, ToolErrorKind

T = TypeVar("T")


def _error(raw: Mapping[str, Any] | None) -> CallError | None:
    return None if raw is None else CallError.model_validate(raw)


@dataclass
class ExternalCalls:
    """Every call a step makes leaves a record in its trace entry's ``calls``."""

    ctx: RunContext

    def _elapsed(self, record: BridgeCall | ToolCall, started: float | None) -> None:
        ended = self.ctx.tick()
        if started is not None and ended is not None:
            record.elapsedMs = (ended - started) * 1000

    def bridge_call(
        self,
        entry: TraceEntry,
        key: str,
        op: str,
        call: Callable[[], BridgeResult[T]] | None,
        details: dict[str, Any],
        *,
        bridge: Bridge | None = None,
    ) -> BridgeResult[T]:
        """Make (or, on replay, substitute) one Bridge call; ``bridge`` is the one ``call`` uses
        (the step's own model, else the host's Bridge): its model is recorded as ``model``."""
        record = BridgeCall(op=op, **details)
        entry.calls.append(record)
        if self.ctx.recorded is not None:
            found = self.ctx.recorded.take(key, "bridge", op)
            record.substituted = True
            if not isinstance(found, BridgeCall):
                record.error = CallError(kind="unavailable", message="not in the recording")
                raise BridgeError("the recorded run made no such call", kind="unavailable")
            if found.error is not None:
                record.error = found.error
                raise BridgeError(found.error.message, kind=cast(BridgeErrorKind, found.error.kind))
            record.output, record.confidence = found.output, found.confidence
            output: Any = found.output
            return BridgeResult(output=output, confidence=float(found.confidence or 0.0))
        if call is None:
            raise BridgeError("no Bridge configured", kind="unavailable")
        used = bridge if bridge is not None else self.ctx.bridge
        record.model = used.model if used is not None else None
        started = self.ctx.tick()
        try:
            result = call()
        except BridgeError as exc:
            record.error = _error(exc.to_json())
            raise
        finally:
            self._elapsed(record, started)
        record.output, record.confidence = result.output, result.confidence
        return result

    def tool_call(
        self, entry: TraceEntry, key: str, tool: ToolDef, args: dict[str, Any], attempt: int
    ) -> dict[str, Any]:
        record = ToolCall(
            tool=tool.name,
            binding=tool.binding,
            idempotent=tool.idempotent,
            attempt=attempt + 1,
            args=args,
        )
        entry.calls.append(record)
        recorded = self.ctx.recorded
        if recorded is not None and not (tool.idempotent and self.ctx.rerun_idempotent):
            found = recorded.take(key, "tool", "invoke")
            record.substituted = True
            if not isinstance(found, ToolCall):
                record.error = CallError(kind="unavailable", message="not in the recording")
                raise ToolError("the recorded run made no such call", kind="unavailable")
            return self._replayed_tool(record, found)
        if recorded is not None:
            recorded.take(key, "tool", "invoke")  # re-run instead; keep the queue aligned
        if self.ctx.tools is None:
            record.error = CallError(kind="unavailable", message="no tools configured")
            raise ToolError("no tool invoker configured", kind="unavailable")
        timeout = self.ctx.time_left(tool.timeout)
        if timeout <= 0:
            record.error = CallError(
                kind="timeout", message="the run's deadline passed before the call", retryable=False
            )
            raise ToolError("the run's deadline passed before the call", kind="timeout")
        started = self.ctx.tick()
        try:
            result = self.ctx.tools.invoke(
                tool, args, timeout=timeout, now=self.ctx.now, run_id=self.ctx.run_id
            )
        except EffectNotExecuted as exc:  # nothing was sent: proposed or refused
            record.status = exc.effect
            record.error = _error(exc.to_json())
            raise
        except ToolError as exc:
            record.error = _error(exc.to_json())
            raise
        except Exception as exc:  # a misbehaving host port is still a tool failure
            record.error = CallError(kind="error", message=str(exc), retryable=False)
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._elapsed(record, started)
        record.result = result
        return result

    def _replayed_tool(self, record: ToolCall, found: ToolCall) -> dict[str, Any]:
        if found.status == "proposed":
            record.status = "proposed"
            raise AdapterUnavailable("fhir")
        if found.status == "refused":
            record.status = "refused"
            record.error = found.error
            message = found.error.message if found.error else "the write was refused"
            raise EffectNotExecuted(message or "the write was refused", effect="refused")
        error = found.error
        if error is not None:
            record.error = error
            raise ToolError(
                error.message, retryable=bool(error.retryable), kind=cast(ToolErrorKind, error.kind)
            )
        result = found.result
        record.result = result
        return dict(result) if isinstance(result, dict) else {}
