"""Tool errors, classified by who acts next.

::

    ToolError                 a call failed; the ActionStep retries (if ``retryable`` and budget
                              is left) and then takes ``horis:onError``
      kind="timeout"          no answer within ``horis:timeout`` (retryable)
      kind="error"            the tool or its server failed (retryable unless it said otherwise)
      kind="contract"         the call or its result is outside the declared contract (not
                              retryable: the same call would be refused the same way)
      AdapterUnavailable      an adapter-mediated tool (``fhir:``) with no handler registered by
                              the host: the effect is recorded as ``proposed``, never executed
    ToolLoadError             a binding that cannot resolve (unknown scheme, unregistered name,
                              bad dotted path): a configuration mistake, raised before any call
"""

from __future__ import annotations

from typing import Literal

ToolErrorKind = Literal["timeout", "error", "contract", "unavailable"]


class ToolError(Exception):
    """A tool call failed or returned something outside its contract."""

    def __init__(
        self, message: str, *, retryable: bool = False, kind: ToolErrorKind = "error"
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.kind: ToolErrorKind = kind

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "message": self.message, "retryable": self.retryable}


class AdapterUnavailable(ToolError):
    """No handler is registered for an adapter scheme: the effect stays ``proposed``."""

    def __init__(self, scheme: str) -> None:
        super().__init__(
            f"no {scheme}: adapter is registered; the effect is proposed, not executed",
            retryable=False,
            kind="unavailable",
        )
        self.scheme = scheme


class ToolLoadError(ValueError):
    """A binding that cannot resolve to anything callable."""
