"""Domain errors, classified by who must act next, and the one handler that maps them to HTTP.

::

    HorismosError                 base; carries the HTTP status and renders its own JSON body
    ├── ClientError(status, …)    the caller must fix its request (4xx); says what and where
    │   ├── BadRequest       400  malformed or inconsistent input
    │   ├── NotFound         404  the named thing does not exist
    │   └── Conflict         409  the request contradicts stored state
    ├── UpstreamError        502  a server we called failed (``retryable`` says if a retry may help)
    │   └── UpstreamTimeout  504  it did not answer within the deadline
    └── Unavailable          503  a resource of ours (database, ontology) is not ready

Routes raise these and never build error JSON themselves. A layer that needs a different body
shape (the CDS routes answer with a FHIR OperationOutcome) subclasses ``ClientError`` or
``HorismosError`` and overrides ``to_body``; the handler below stays the single mapping.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

log = logging.getLogger("horismos")


class HorismosError(Exception):
    """Base of every error the service maps to an HTTP answer."""

    status: int = 500
    code: str = "internal"

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def to_body(self) -> dict[str, Any]:
        """The JSON body of the HTTP answer; override for another shape."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.where is not None:
            error["where"] = self.where
        return {"error": error}

    def headers(self) -> dict[str, str] | None:
        return None


class ClientError(HorismosError):
    """The request cannot be served as sent; ``where`` names the offending part (a JSON path,
    parameter or header)."""

    def __init__(
        self,
        status: int,
        code: str,
        where: str | None,
        message: str,
    ) -> None:
        if not 400 <= status < 500:
            raise ValueError(f"a client error needs a 4xx status, not {status}")
        super().__init__(message, where=where)
        self.status = status
        self.code = code


class BadRequest(ClientError):
    """Raised when input is malformed or inconsistent."""

    def __init__(self, *, where: str | None, message: str, code: str = "invalid") -> None:
        super().__init__(400, code, where, message)


class NotFound(ClientError):
    """Raised when a run, effect, service or other named thing does not exist."""

    def __init__(self, *, where: str | None, message: str, code: str = "not-found") -> None:
        super().__init__(404, code, where, message)


class Conflict(ClientError):
    """Raised when the request contradicts stored state (e.g. a reused hookInstance)."""

    def __init__(self, *, where: str | None, message: str, code: str = "conflict") -> None:
        super().__init__(409, code, where, message)


class UpstreamError(HorismosError):
    """Raised when a server we depend on (FHIR server, tool endpoint) failed."""

    status = 502
    code = "upstream"

    def __init__(self, message: str, *, retryable: bool, where: str | None = None) -> None:
        super().__init__(message, where=where)
        self.retryable = retryable

    def to_body(self) -> dict[str, Any]:
        body = super().to_body()
        body["error"]["retryable"] = self.retryable
        return body


class UpstreamTimeout(UpstreamError):
    """Raised when a server we depend on did not answer within the deadline."""

    status = 504
    code = "timeout"

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message, retryable=True, where=where)


class Unavailable(HorismosError):
    """Raised when one of our own resources (database, ontology) cannot serve right now."""

    status = 503
    code = "unavailable"

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": "5"}


async def _handle(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HorismosError)
    return JSONResponse(exc.to_body(), status_code=exc.status, headers=exc.headers())


#: Routes under this prefix answer errors as FHIR OperationOutcomes (CDS Hooks).
_CDS_PREFIX = "/cds-services"


async def _database(request: Request, exc: Exception) -> JSONResponse:
    """A database failure no route translated: 503 when the database is unavailable (down,
    hung past its timeouts, pool exhausted), else a 500; logged without the data concerned."""
    from app.store.db import describe_error, is_unavailable

    if not is_unavailable(exc):
        log.error(
            "database error on %s %s: %s", request.method, request.url.path, describe_error(exc)
        )
        return JSONResponse(
            {"error": {"code": "internal", "message": "internal error"}}, status_code=500
        )
    log.warning("database unavailable on %s: %s", request.url.path, describe_error(exc))
    message = "the database is unavailable; retry later"
    body: dict[str, Any]
    if request.url.path.startswith(_CDS_PREFIX):
        issue = {"severity": "error", "code": "transient", "diagnostics": message}
        body = {"resourceType": "OperationOutcome", "issue": [issue]}
    else:
        body = Unavailable(message, where="database").to_body()
    return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from domain errors to HTTP answers, and the one for database
    failures that reach a route untranslated."""
    from sqlalchemy.exc import SQLAlchemyError

    app.add_exception_handler(HorismosError, _handle)
    app.add_exception_handler(SQLAlchemyError, _database)
