"""Errors of the CDS Hooks layer, classified by who must act next (under ``HorismosError``).

Every error carries the HTTP status the route answers with and renders as a FHIR
``OperationOutcome`` whose issues name the offending field (``expression``); raised on another
route (the run routes share the client check) it is an RFC 9457 problem like any error there::

    CdsError
    ├── RequestInvalid        400  the client sent a malformed hook call or feedback body
    ├── Unauthorized          401  the client JWT is missing or does not verify
    ├── ServiceNotFound       404  no CDS service with that id in the ontology
    ├── HookInstanceConflict  409  a hookInstance reused with a different request body
    ├── PrefetchUnavailable   412  data the service needs could not be obtained
    ├── PayloadTooLarge       413  the request body is larger than the service accepts
    ├── UnsupportedMediaType  415  the body is not declared as JSON (``Content-Type``)
    ├── RunFailed             500  the run broke after it was claimed; it is recorded as failed
    ├── StoreUnavailable      503  the run could not be persisted; no decision is returned
    ├── HookDeadlinePassed    503  no answer within the service's end-to-end deadline
    └── DeploymentRefused     503  the service's deployment does not verify and is not served
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Self

from app.errors import HorismosError

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
    "too-costly",
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


class CdsError(HorismosError):
    """Base of the hierarchy; ``issues`` explain the failure field by field."""

    status = 500
    code = "cds"

    def __init__(self, *, issues: list[Issue]) -> None:
        first = issues[0].expression if issues else None
        super().__init__("; ".join(i.diagnostics for i in issues), where=first)
        self.issues = issues

    @property
    def status_code(self) -> int:
        return self.status

    def outcome(self) -> dict[str, Any]:
        return operation_outcome(self.issues)

    def problem(self) -> dict[str, Any]:
        # off the CDS routes (the run routes share their client check) the first issue's code
        # is the problem's
        body = super().problem()
        if self.issues:
            body["code"] = self.issues[0].code
        return body

    @classmethod
    def one(cls, code: IssueCode, diagnostics: str, expression: str | None = None) -> Self:
        return cls(issues=[Issue(code=code, diagnostics=diagnostics, expression=expression)])


class RequestInvalid(CdsError):
    """Raised when a hook request or feedback body breaks CDS Hooks 2.0 or carries bad FHIR."""

    status = 400


class Unauthorized(CdsError):
    """Raised when trusted issuers are configured and the bearer JWT is absent or invalid."""

    status = 401

    def headers(self) -> dict[str, str] | None:
        return {"WWW-Authenticate": 'Bearer realm="cds-services"'}


class ServiceNotFound(CdsError):
    """Raised when the path names a service the ontology does not declare."""

    status = 404


class HookInstanceConflict(CdsError):
    """Raised when a hookInstance already answered is sent again with a different body."""

    status = 409


class PrefetchUnavailable(CdsError):
    """Raised when a prefetch key cannot be obtained (no FHIR server, fetch failed, bad data)."""

    status = 412


class PayloadTooLarge(CdsError):
    """Raised when a request body exceeds the size limit of the CDS routes."""

    status = 413


class UnsupportedMediaType(CdsError):
    """Raised when a body is not sent as ``application/json``: a cross-origin page may send
    ``text/plain`` without a CORS preflight, so such a body never starts a run."""

    status = 415


class RunFailed(CdsError):
    """Raised when a claimed run breaks before it is answered; the run is stored as failed, so
    the same hookInstance is refused (409) and the EHR must send a new one."""

    status = 500


class StoreUnavailable(CdsError):
    """Raised when the run cannot be persisted; the decision is withheld."""

    status = 503

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": "5"}


class HookDeadlinePassed(CdsError):
    """Raised when a hook call reaches ``HORISMOS_HOOK_DEADLINE_SECONDS`` without an answer.

    No decision is returned. A run that had started carries on in its worker thread and is
    stored (writes it has not sent by then are not sent: the EHR has stopped waiting for the
    card that would explain them); the same hookInstance sent again gets its answer."""

    status = 503

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": "2"}


class DeploymentRefused(CdsError):
    """Raised for a service whose deployment did not load or verify: it is not served (its
    verification report is the body's issues) until its files are fixed; the other
    deployments serve."""

    status = 503
