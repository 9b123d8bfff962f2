"""Tool errors, classified by who acts next.

::

    ToolError                 a call failed; the ActionStep retries (if ``retryable`` and budget
                              is left) and then takes ``horis:onError``
      kind="timeout"          no answer within ``horis:timeout`` (retryable)
      kind="error"            the tool or its server failed (retryable unless it said otherwise)
      kind="contract"         the call or its result is outside the declared contract (not
                              retryable: the same call would be refused the same way)
      EffectNotExecuted       the call deliberately sent nothing, so the outside world is as
                              it was: the ActionStep records ``effect`` (``proposed`` or
                              ``refused``) and the reason in its trace entry, asserts nothing
                              into the World and follows ``horis:next`` — not ``onError``: the
                              decision stands, only its write did not happen
        AdapterUnavailable    an adapter-mediated tool (``fhir:``) with no handler registered by
                              the host: the effect is ``proposed``, never executed
        (commit refusals)     the adapter would not send the write (a missing SMART scope, no
                              hydrated target, a value without a code): ``refused``
    ToolLoadError             a binding that cannot resolve (unknown scheme, unregistered name,
                              bad dotted path): a configuration mistake, raised before any call
"""

from __future__ import annotations

from typing import Literal

ToolErrorKind = Literal["timeout", "error", "contract", "unavailable", "refused"]
NotExecuted = Literal["proposed", "refused"]


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


class EffectNotExecuted(ToolError):
    """No request was sent: the effect is ``proposed`` or ``refused``, not failed.

    Raised only when nothing reached the outside world, so there is nothing to fail closed on:
    the interpreter records ``effect`` and the reason (``message``) in the step's trace entry,
    asserts none of the tool's effects and follows ``horis:next``. A write that was sent and did
    not land (conflicted, failed, unknown) is a plain :class:`ToolError` and takes ``onError``.
    Never retried: the same call would be declined the same way.
    """

    def __init__(self, message: str, *, effect: NotExecuted) -> None:
        super().__init__(
            message,
            retryable=False,
            kind="unavailable" if effect == "proposed" else "refused",
        )
        self.effect: NotExecuted = effect


class AdapterUnavailable(EffectNotExecuted):
    """No handler is registered for an adapter scheme: the effect stays ``proposed``."""

    def __init__(self, scheme: str) -> None:
        super().__init__(
            f"no {scheme}: adapter is registered; the effect is proposed, not executed",
            effect="proposed",
        )
        self.scheme = scheme


class ToolLoadError(ValueError):
    """A binding that cannot resolve to anything callable."""
