"""The ``mock:`` backend: answers scripted by tests or by a JSON file.

A script maps each operation to a list of answers consumed in order; once a list is down to
its last answer, that answer repeats (so a demo file with one answer per operation serves any
number of runs). An answer is ``{"output": …, "confidence": 0.9}`` or ``{"error": "timeout" |
"provider" | "invalid" | "unavailable", "message": "…"}``; in tests it may also be a callable that
receives the request and returns such an answer. An operation with no script fails with
``BridgeError(kind="unavailable")``.

File form (``mock:/path/script.json``)::

    {"extract": [{"output": {"Patient": {"heartRate": 130}}, "confidence": 0.92}],
     "narrate": [{"output": "…", "confidence": 1.0}],
     "rank":    [{"output": ["OptionB", "OptionA"], "confidence": 0.85}]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from app.bridge.protocol import BridgeError, BridgeErrorKind, BridgeResult, check_confidence

Answer = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]
_KINDS: tuple[BridgeErrorKind, ...] = ("timeout", "provider", "invalid", "unavailable")


class MockBridge:
    """A scripted Bridge. ``calls`` records every request, in order, for assertions."""

    def __init__(
        self, script: Mapping[str, Sequence[Answer]] | None = None, *, model: str = "mock:"
    ) -> None:
        self._script: dict[str, list[Answer]] = {k: list(v) for k, v in (script or {}).items()}
        self._model = model
        self.calls: list[dict[str, Any]] = []

    @classmethod
    def from_file(cls, path: str | Path) -> MockBridge:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise BridgeError(f"{path}: a mock script is a JSON object", kind="invalid")
        return cls(cast(dict[str, list[Answer]], data), model=f"mock:{path}")

    @property
    def model(self) -> str:
        return self._model

    def _answer(self, request: dict[str, Any]) -> tuple[Any, float]:
        self.calls.append(request)
        answers = self._script.get(request["op"])
        if not answers:
            raise BridgeError(f"no scripted answer for {request['op']}", kind="unavailable")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if callable(answer):
            answer = answer(request)
        if "error" in answer:
            kind = answer["error"]
            raise BridgeError(
                str(answer.get("message", f"scripted {kind}")),
                kind=kind if kind in _KINDS else "provider",
            )
        return answer.get("output"), check_confidence(answer.get("confidence"))

    def extract(
        self,
        text: str,
        schema: Mapping[str, Any],
        *,
        feedback: Sequence[Mapping[str, Any]] = (),
    ) -> BridgeResult[dict[str, Any]]:
        request = {"op": "extract", "text": text, "schema": schema, "feedback": list(feedback)}
        output, confidence = self._answer(request)
        if not isinstance(output, dict):
            raise BridgeError("an extraction must be a JSON object", kind="invalid")
        return BridgeResult(output=output, confidence=confidence)

    def narrate(
        self, proof_text: str, audience: str | None, style: str | None
    ) -> BridgeResult[str]:
        request = {"op": "narrate", "proof": proof_text, "audience": audience, "style": style}
        output, confidence = self._answer(request)
        if not isinstance(output, str):
            raise BridgeError("a narration must be a string", kind="invalid")
        return BridgeResult(output=output, confidence=confidence)

    def rank(
        self, candidates: Sequence[str], criterion: str, *, text: str | None = None
    ) -> BridgeResult[list[str]]:
        request = {
            "op": "rank",
            "candidates": list(candidates),
            "criterion": criterion,
            "text": text,
        }
        output, confidence = self._answer(request)
        if not isinstance(output, list) or not all(isinstance(c, str) for c in output):
            raise BridgeError("a ranking must be a list of candidate names", kind="invalid")
        return BridgeResult(output=list(output), confidence=confidence)
