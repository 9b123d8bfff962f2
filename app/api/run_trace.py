"""The run's trace as the run page's table shows it: one row per step, a subflow's steps
numbered beneath its step, each with its tool and Bridge calls and the notes the stored entry
carries (the ``trace`` macro of ``app/api/templates/run_parts.html``); and the narrations its
steps recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.api.pages import show_text

__all__ = ["narrations", "trace_rows"]


def _call(call: Mapping[str, Any]) -> dict[str, Any]:
    """One tool or Bridge call of a step as the trace shows it: what, its status, and the error
    message or the confidence beneath."""
    if call.get("type") == "tool":
        what = f"tool {show_text(call.get('tool'))}"
        if call.get("attempt") is not None:
            what += f" (attempt {show_text(call.get('attempt'))})"
    else:
        what = f"Bridge {show_text(call.get('op'))}"
        if call.get("model"):
            what += f" ({show_text(call.get('model'))})"
    error = call.get("error")
    if call.get("status"):
        status = str(call.get("status"))
    elif isinstance(error, Mapping):
        status = f"error: {error.get('kind', 'error')}"
    else:
        status = "ok"
    detail = None
    if isinstance(error, Mapping) and error.get("message"):
        detail = error.get("message")
    elif call.get("confidence") is not None:
        detail = f"confidence {show_text(call.get('confidence'))}"
    return {"what": what, "status": status, "detail": detail}


def trace_rows(trace: Sequence[Mapping[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    """The trace's rows, a subflow's steps numbered beneath its step (``3.1``, ``3.2``…)."""
    rows: list[dict[str, Any]] = []
    for i, entry in enumerate(trace, 1):
        number = f"{prefix}{i}"
        calls = [c for c in entry.get("calls") or [] if isinstance(c, Mapping)]
        said = {str((c.get("error") or {}).get("message")) for c in calls}
        notes: list[str] = []
        for key in ("skipped", "reason", "effect"):
            if entry.get(key) and str(entry[key]) not in said:
                notes.append(f"{key}: {show_text(entry[key])}")
        if isinstance(entry.get("error"), Mapping):
            notes.append(f"error: {show_text(entry['error'].get('message'))}")
        for key in ("goal", "requires"):
            cond = entry.get(key)
            if isinstance(cond, Mapping) and "holds" in cond:
                notes.append(f"{key} {'holds' if cond['holds'] else 'does not hold'}")
        if entry.get("selected"):
            notes.append(f"selected: {show_text(entry['selected'])}")
        at = str(entry.get("at") or "")
        rows.append(
            {
                "number": number,
                "entry": entry,
                "violations": [v for v in entry.get("violations") or [] if isinstance(v, Mapping)],
                "calls": [_call(c) for c in calls],
                "notes": notes,
                "at": at,
                "at_short": at.split("T", 1)[1][:12] if "T" in at else at,
            }
        )
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            rows.extend(trace_rows(subflow.get("trace") or [], prefix=f"{number}."))
    return rows


def narrations(trace: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each step's recorded narration (a subflow's steps included), with the step's name."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for entry in trace:
        narration = entry.get("narration")
        if isinstance(narration, Mapping) and narration.get("text"):
            out.append((str(entry.get("step")), narration))
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            out.extend(narrations(subflow.get("trace") or []))
    return out
