"""Errors of the CDS Hooks layer, classified by who must act next.

Every error carries the HTTP status the route answers with and renders as a FHIR
``OperationOutcome`` whose issues name the offending field (``expression``)::

    CdsError
    ├── RequestInvalid        400  the client sent a malformed hook call or feedback body
    ├── Unauthorized          401  the client JWT is missing or does not verify
    ├── ServiceNotFound       404  no CDS service with that id in the ontology
    ├── HookInstanceConflict  409  a hookInstance reused with a different request body
    ├── PrefetchUnavailable   412  data the service needs could not be obtained
    └── StoreUnavailable      503  the run could not be persisted; no decision is returned
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

IssueCode = Literal[
    "invalid",
    "required",
    "value",
    "structure",
    "security",
    "login",
    "not-found",
    "conflict",
    "not-supported",
    "incomplete",
    "timeout",
    "exception",
    "transient",
    "processing",
    "duplicate",
]


@dataclass(frozen=True, kw_only=True)
class Issue:
    """One OperationOutcome issue: what is wrong and where (a FHIRPath-like expression)."""

    code: IssueCode
    diagnostics: str
    expression: str | None = None
    severity: Literal["error", "fatal", "warning"] = "error"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "diagnostics": self.diagnostics,
        }
        if self.expression:
            out["expression"] = [self.expression]
        return out


def operation_outcome(issues: list[Issue]) -> dict[str, Any]:
    return {"resourceType": "OperationOutcome", "issue": [i.to_json() for i in issues]}


@dataclass(kw_only=True)
class CdsError(Exception):
    """Base of the hierarchy; ``issues`` explain the failure field by field."""

    issues: list[Issue] = field(default_factory=list)
    status_code: ClassVar[int] = 500

    def __post_init__(self) -> None:
        Exception.__init__(self, "; ".join(i.diagnostics for i in self.issues))

    def outcome(self) -> dict[str, Any]:
        return operation_outcome(self.issues)

    @classmethod
    def one(cls, code: IssueCode, diagnostics: str, expression: str | None = None) -> CdsError:
        return cls(issues=[Issue(code=code, diagnostics=diagnostics, expression=expression)])


@dataclass(kw_only=True)
class RequestInvalid(CdsError):
    """Raised when a hook request or feedback body breaks CDS Hooks 2.0 or carries bad FHIR."""

    status_code: ClassVar[int] = 400


@dataclass(kw_only=True)
class Unauthorized(CdsError):
    """Raised when trusted issuers are configured and the bearer JWT is absent or invalid."""

    status_code: ClassVar[int] = 401


@dataclass(kw_only=True)
class ServiceNotFound(CdsError):
    """Raised when the path names a service the ontology does not declare."""

    status_code: ClassVar[int] = 404


@dataclass(kw_only=True)
class HookInstanceConflict(CdsError):
    """Raised when a hookInstance already answered is sent again with a different body."""

    status_code: ClassVar[int] = 409


@dataclass(kw_only=True)
class PrefetchUnavailable(CdsError):
    """Raised when a prefetch key cannot be obtained (no FHIR server, fetch failed, bad data)."""

    status_code: ClassVar[int] = 412


@dataclass(kw_only=True)
class StoreUnavailable(CdsError):
    """Raised when the run cannot be persisted; the decision is withheld."""

    status_code: ClassVar[int] = 503
