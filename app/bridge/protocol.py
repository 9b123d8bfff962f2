"""The Bridge protocol (docs/bridge.md): the whole neural surface, three calls.

Errors::

    BridgeError            a call did not produce a usable answer; the step takes its fallback
      kind="timeout"       the provider did not answer within the Bridge's timeout
      kind="provider"      the provider answered with an error (HTTP status, connection, refusal)
      kind="invalid"       the answer did not have the forced shape (no tool call, bad confidence)
      kind="unavailable"   nothing to answer with (an exhausted mock script, no recording)
    BridgeConfigError      a model string that names no known backend (a configuration mistake)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from app.digest import canonical_digest

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

BridgeErrorKind = Literal["timeout", "provider", "invalid", "unavailable"]


@dataclass(frozen=True, kw_only=True)
class BridgeResult(Generic[T]):
    """One call's output and the single confidence the provider reported for it."""

    output: T
    confidence: float


class BridgeError(Exception):
    """A Bridge call failed; the interpreter turns it into the step's fallback edge."""

    def __init__(self, message: str, *, kind: BridgeErrorKind = "provider") -> None:
        super().__init__(message)
        self.kind: BridgeErrorKind = kind
        self.message = message

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


class BridgeConfigError(ValueError):
    """A model string names no backend this host knows (``mock:…`` and ``claude:…`` do)."""


@runtime_checkable
class Bridge(Protocol):
    """What the interpreter needs from an LLM provider."""

    @property
    def model(self) -> str:
        """The model string the Bridge was built from (recorded in traces)."""
        ...

    def extract(
        self,
        text: str,
        schema: Mapping[str, Any],
        *,
        feedback: Sequence[Mapping[str, Any]] = (),
    ) -> BridgeResult[dict[str, Any]]:
        """Text → an object conforming to ``schema``. ``feedback`` lists the gate violations
        of the previous attempt (structured, never prose) on a bounded retry."""
        ...

    def narrate(
        self, proof_text: str, audience: str | None, style: str | None
    ) -> BridgeResult[str]:
        """A rendered proof → prose for ``audience``."""
        ...

    def rank(
        self, candidates: Sequence[str], criterion: str, *, text: str | None = None
    ) -> BridgeResult[list[str]]:
        """Order graph-derived candidates by ``criterion`` (best first); ``text`` is the
        request's free text the criterion may refer to."""
        ...


def schema_hash(schema: Mapping[str, Any]) -> str:
    """A stable digest of a JSON Schema, recorded with every extraction in the trace."""
    return "sha256:" + canonical_digest(schema)


def with_confidence(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The derived schema plus a required ``confidence`` number in [0, 1]."""
    out = dict(schema)
    props = dict(out.get("properties") or {})
    props["confidence"] = {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "description": "how confident you are that the extraction is faithful to the text",
    }
    out["type"] = "object"
    out["properties"] = props
    required = [r for r in out.get("required") or [] if r != "confidence"]
    out["required"] = [*required, "confidence"]
    return out


def check_confidence(value: object) -> float:
    """A provider's confidence as a float in [0, 1]; anything else is an invalid answer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BridgeError(f"confidence must be a number, got {value!r}", kind="invalid")
    if not 0 <= value <= 1:
        raise BridgeError(f"confidence {value} is outside [0, 1]", kind="invalid")
    return float(value)
