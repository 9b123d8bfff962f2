"""Calls to the outside world — the Bridge and tools — recorded in the trace and, on replay,
substituted from a recording (``RunContext.recorded``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from app.bridge.protocol import Bridge, BridgeError, BridgeResult
from app.ontology.model import ToolDef
from app.runtime.context import RunContext
from app.tools.errors import AdapterUnavailable, EffectNotExecuted, ToolError

T = TypeVar("T")


@dataclass
class ExternalCalls:
    """Every call a step makes leaves a record in its trace entry's ``calls``."""

    ctx: RunContext

    def bridge_call(
        self,
        entry: dict[str, Any],
        key: str,
        op: str,
        call: Callable[[], BridgeResult[T]] | None,
        details: dict[str, Any],
        *,
        bridge: Bridge | None = None,
    ) -> BridgeResult[T]:
        """Make (or, on replay, substitute) one Bridge call; ``bridge`` is the one ``call`` uses
        (the step's own model, else the host's Bridge): its model is recorded as ``model``."""
        record: dict[str, Any] = {"type": "bridge", "op": op, **details}
        entry["calls"].append(record)
        if self.ctx.recorded is not None:
            found = self.ctx.recorded.take(key, "bridge", op)
            record["substituted"] = True
            if found is None:
                record["error"] = {"kind": "unavailable", "message": "not in the recording"}
                raise BridgeError("the recorded run made no such call", kind="unavailable")
            if found.get("error"):
                record["error"] = found["error"]
                raise BridgeError(
                    str(found["error"].get("message", "")),
                    kind=found["error"].get("kind", "provider"),
                )
            record.update(output=found.get("output"), confidence=found.get("confidence"))
            output: Any = found.get("output")
            return BridgeResult(output=output, confidence=float(found["confidence"]))
        if call is None:
            raise BridgeError("no Bridge configured", kind="unavailable")
        used = bridge if bridge is not None else self.ctx.bridge
        record["model"] = used.model if used is not None else None
        started = self.ctx.time()
        try:
            result = call()
        except BridgeError as exc:
            record["error"] = exc.to_json()
            raise
        finally:
            record["elapsedMs"] = (self.ctx.time() - started).total_seconds() * 1000
        record.update(output=result.output, confidence=result.confidence)
        return result

    def tool_call(
        self, entry: dict[str, Any], key: str, tool: ToolDef, args: dict[str, Any], attempt: int
    ) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": "tool",
            "op": "invoke",
            "tool": tool.name,
            "binding": tool.binding,
            "idempotent": tool.idempotent,
            "attempt": attempt + 1,
            "args": args,
        }
        entry["calls"].append(record)
        recorded = self.ctx.recorded
        if recorded is not None and not (tool.idempotent and self.ctx.rerun_idempotent):
            found = recorded.take(key, "tool", "invoke")
            record["substituted"] = True
            if found is None:
                record["error"] = {"kind": "unavailable", "message": "not in the recording"}
                raise ToolError("the recorded run made no such call", kind="unavailable")
            return self._replayed_tool(record, found)
        if recorded is not None:
            recorded.take(key, "tool", "invoke")  # re-run instead; keep the queue aligned
        if self.ctx.tools is None:
            record["error"] = {"kind": "unavailable", "message": "no tools configured"}
            raise ToolError("no tool invoker configured", kind="unavailable")
        started = self.ctx.time()
        try:
            result = self.ctx.tools.invoke(
                tool, args, timeout=tool.timeout, now=self.ctx.now, run_id=self.ctx.run_id
            )
        except EffectNotExecuted as exc:  # nothing was sent: proposed or refused
            record["status"] = exc.effect
            record["error"] = exc.to_json()
            raise
        except ToolError as exc:
            record["error"] = exc.to_json()
            raise
        except Exception as exc:  # a misbehaving host port is still a tool failure
            record["error"] = {"kind": "error", "message": str(exc), "retryable": False}
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            record["elapsedMs"] = (self.ctx.time() - started).total_seconds() * 1000
        record["result"] = result
        return result

    def _replayed_tool(self, record: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
        if found.get("status") == "proposed":
            record["status"] = "proposed"
            raise AdapterUnavailable("fhir")
        if found.get("status") == "refused":
            record["status"] = "refused"
            record["error"] = found.get("error")
            message = (found.get("error") or {}).get("message", "the write was refused")
            raise EffectNotExecuted(str(message), effect="refused")
        error = found.get("error")
        if error:
            record["error"] = error
            raise ToolError(
                str(error.get("message", "")),
                retryable=bool(error.get("retryable", False)),
                kind=error.get("kind", "error"),
            )
        result = found.get("result")
        record["result"] = result
        return dict(result) if isinstance(result, dict) else {}
