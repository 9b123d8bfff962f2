"""The ``claude:`` backend through the ``anthropic`` SDK.

Every call is one Messages API request that forces a single tool call
(``tool_choice={"type": "tool", "name": …}``); the tool's input schema is the contract (for
``extract``: the derived schema plus a required ``confidence``). The SDK's own retries are off:
retries are declared in the ontology (``horis:retries``) and driven by the interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic

from app.bridge.protocol import BridgeError, BridgeResult, check_confidence, with_confidence

EXTRACT_TOOL = "record_extraction"
NARRATE_TOOL = "record_narration"
RANK_TOOL = "record_ranking"

_EXTRACT_SYSTEM = (
    "Extract facts stated in the user's text into the record_extraction tool. Use only the "
    "names the schema allows; leave out anything the text does not state. Report your "
    "confidence that the record is faithful to the text."
)
_NARRATE_SYSTEM = (
    "Explain the given proof to the stated audience in plain prose. Say nothing the proof "
    "does not say."
)
_RANK_SYSTEM = (
    "Order the candidates by the criterion, best first, using only the given candidate names."
)


class ClaudeBridge:
    """A Bridge backed by the Anthropic Messages API (or anything speaking it at ``base_url``)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_tokens: int = 2048,
    ) -> None:
        self._model = model
        self._max_tokens = max_tokens
        self._client = anthropic.Anthropic(
            api_key=api_key or "unset",
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
        )

    @property
    def model(self) -> str:
        return f"claude:{self._model}"

    def close(self) -> None:
        self._client.close()

    def _forced_call(
        self, *, system: str, content: str, tool: str, description: str, schema: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            message = self._client.messages.create(
                model=self._model,
                max_tokens=self._max_tokens,
                system=system,
                messages=[{"role": "user", "content": content}],
                tools=[{"name": tool, "description": description, "input_schema": schema}],
                tool_choice={"type": "tool", "name": tool},
            )
        except anthropic.APITimeoutError as exc:
            raise BridgeError(f"the model did not answer in time: {exc}", kind="timeout") from exc
        except anthropic.APIError as exc:
            raise BridgeError(f"the model provider failed: {exc}", kind="provider") from exc
        for block in message.content:
            if block.type == "tool_use" and block.name == tool:
                return dict(block.input)
        raise BridgeError(f"the answer did not call {tool}", kind="invalid")

    def extract(
        self,
        text: str,
        schema: Mapping[str, Any],
        *,
        feedback: Sequence[Mapping[str, Any]] = (),
    ) -> BridgeResult[dict[str, Any]]:
        content = text
        if feedback:
            content = (
                f"{text}\n\nYour previous record was rejected by validation. Violations "
                f"(JSON):\n{json.dumps(list(feedback), default=str)}\nCorrect the record."
            )
        answer = self._forced_call(
            system=_EXTRACT_SYSTEM,
            content=content,
            tool=EXTRACT_TOOL,
            description="Record the typed facts stated in the text.",
            schema=with_confidence(schema),
        )
        confidence = check_confidence(answer.pop("confidence", None))
        return BridgeResult(output=answer, confidence=confidence)

    def narrate(
        self, proof_text: str, audience: str | None, style: str | None
    ) -> BridgeResult[str]:
        content = (
            f"Audience: {audience or 'clinician'}\nStyle: {style or 'concise'}\n\n{proof_text}"
        )
        answer = self._forced_call(
            system=_NARRATE_SYSTEM,
            content=content,
            tool=NARRATE_TOOL,
            description="Record the explanation.",
            schema={
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["text", "confidence"],
            },
        )
        text = answer.get("text")
        if not isinstance(text, str):
            raise BridgeError("the narration has no text", kind="invalid")
        return BridgeResult(output=text, confidence=check_confidence(answer.get("confidence")))

    def rank(
        self, candidates: Sequence[str], criterion: str, *, text: str | None = None
    ) -> BridgeResult[list[str]]:
        content = f"Criterion: {criterion}\nCandidates: {', '.join(candidates)}"
        if text:
            content += f"\n\nRequest:\n{text}"
        answer = self._forced_call(
            system=_RANK_SYSTEM,
            content=content,
            tool=RANK_TOOL,
            description="Record the candidates in order, best first.",
            schema={
                "type": "object",
                "properties": {
                    "ranking": {
                        "type": "array",
                        "items": {"type": "string", "enum": [*candidates]},
                    },
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["ranking", "confidence"],
            },
        )
        ranking = answer.get("ranking")
        if not isinstance(ranking, list) or not all(isinstance(c, str) for c in ranking):
            raise BridgeError("the ranking is not a list of names", kind="invalid")
        return BridgeResult(output=ranking, confidence=check_confidence(answer.get("confidence")))
