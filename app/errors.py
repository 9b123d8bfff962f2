"""Domain errors, classified by who must act next, and the one handler that maps them to HTTP.

::

    HorismosError                 base; carries the HTTP status, what went wrong and where
    ├── ClientError(status, …)    the caller must fix its request (4xx); says what and where
    │   ├── BadRequest       400  malformed or inconsistent input
    │   ├── NotFound         404  the named thing does not exist
    │   └── Conflict         409  the request contradicts stored state
    ├── UpstreamError        502  a server we called failed (``retryable`` says if a retry may help)
    │   └── UpstreamTimeout  504  it did not answer within the deadline
    └── Unavailable          503  a resource of ours (database, ontology) is not ready

Routes raise these and never build error JSON themselves. The handlers below answer in one of
two formats, chosen by the route, never by the error:

- the CDS Hooks routes (``/cds-services…``) answer with a FHIR ``OperationOutcome``, whose
  issues name the offending field (``expression``); ``app.cds.errors`` adds issues of its own;
- every other route answers with an RFC 9457 problem (``application/problem+json``):
  ``type`` (``about:blank``: the status says what kind), ``title`` (the status's phrase),
  ``status``, ``detail`` (what is wrong), ``code`` (a stable token), ``field`` (where: a JSON
  path, parameter or header) and the members an error adds (:meth:`HorismosError.extensions`).
  Request validation answers 422 with ``errors``: one ``{field, detail}`` per mistake.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

PROBLEM_MEDIA_TYPE = "application/problem+json"

log = logging.getLogger("horismos")


class HorismosError(Exception):
    """Base of every error the service maps to an HTTP answer."""

    status: int = 500
    code: str = "internal"

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def extensions(self) -> dict[str, Any]:
        """Members this error adds to its problem document (override to add some)."""
        return {}

    def problem(self) -> dict[str, Any]:
        """The RFC 9457 problem document of the answer."""
        return problem(self.status, self.message, code=self.code, field=self.where) | (
            self.extensions()
        )

    def outcome(self) -> dict[str, Any]:
        """The FHIR OperationOutcome of the answer on the CDS routes."""
        return operation_outcome(self.status, self.message, field=self.where)

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

    def extensions(self) -> dict[str, Any]:
        return {"retryable": self.retryable}


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


def problem(
    status: int, detail: str, *, code: str | None = None, field: str | None = None
) -> dict[str, Any]:
    """An RFC 9457 problem document: ``about:blank`` with the status's phrase as its title."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if code is not None:
        body["code"] = code
    if field is not None:
        body["field"] = field
    return body


#: The OperationOutcome issue code for an answer's status (FHIR R4B IssueType).
_ISSUE_CODES = {
    400: "invalid",
    401: "login",
    403: "forbidden",
    404: "not-found",
    405: "not-supported",
    409: "conflict",
    412: "incomplete",
    413: "too-costly",
    415: "not-supported",
    422: "invalid",
    502: "exception",
    503: "transient",
    504: "timeout",
}


def operation_outcome(status: int, diagnostics: str, *, field: str | None = None) -> dict[str, Any]:
    """A one-issue FHIR OperationOutcome for an answer with this status."""
    issue: dict[str, Any] = {
        "severity": "error",
        "code": _ISSUE_CODES.get(status, "exception"),
        "diagnostics": diagnostics,
    }
    if field is not None:
        issue["expression"] = [field]
    return {"resourceType": "OperationOutcome", "issue": [issue]}


#: Routes under this prefix answer errors as FHIR OperationOutcomes (CDS Hooks).
_CDS_PREFIX = "/cds-services"


def _on_cds_route(request: Request) -> bool:
    return request.url.path.startswith(_CDS_PREFIX)


def _answer(
    request: Request,
    status: int,
    *,
    problem_body: dict[str, Any],
    outcome_body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    if _on_cds_route(request):
        return JSONResponse(outcome_body, status_code=status, headers=headers)
    return JSONResponse(
        problem_body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE
    )


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HorismosError)
    return _answer(
        request,
        exc.status,
        problem_body=exc.problem(),
        outcome_body=exc.outcome(),
        headers=exc.headers(),
    )


def _location(loc: Sequence[int | str]) -> str:
    """``("body", "instances", 0, "id")`` as ``body.instances[0].id``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    """A request FastAPI could not parse into a route's parameters: 422 naming each field."""
    assert isinstance(exc, RequestValidationError)
    errors = [{"field": _location(e["loc"]), "detail": str(e["msg"])} for e in exc.errors()]
    first = errors[0] if errors else {"field": "body", "detail": "the request is invalid"}
    detail = f"{first['field']}: {first['detail']}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more)"
    body = problem(422, detail, code="invalid", field=first["field"]) | {"errors": errors}
    outcome = operation_outcome(422, detail, field=first["field"])
    return _answer(request, 422, problem_body=body, outcome_body=outcome)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    """What the routing itself answers (no such path, method not allowed), in the route's
    error format."""
    assert isinstance(exc, HTTPException)
    detail = str(exc.detail) if exc.detail else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404:
        detail = f"no route {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return _answer(
        request,
        exc.status_code,
        problem_body=problem(exc.status_code, detail),
        outcome_body=operation_outcome(exc.status_code, detail),
        headers=dict(exc.headers) if exc.headers else None,
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """An error no handler knows: a 500 saying nothing of the data (the log has the traceback)."""
    return _answer(
        request,
        500,
        problem_body=problem(500, "internal error", code="internal"),
        outcome_body=operation_outcome(500, "internal error"),
    )


async def _database(request: Request, exc: Exception) -> JSONResponse:
    """A database failure no route translated: 503 when the database is unavailable (down,
    hung past its timeouts, pool exhausted), else a 500; logged without the data concerned."""
    from app.store.db import describe_error, is_unavailable

    if not is_unavailable(exc):
        log.error(
            "database error on %s %s: %s", request.method, request.url.path, describe_error(exc)
        )
        return await _unexpected(request, exc)
    log.warning("database unavailable on %s: %s", request.url.path, describe_error(exc))
    return await _handle(
        request, Unavailable("the database is unavailable; retry later", where="database")
    )


class FieldError(BaseModel):
    """One mistake of a request that failed validation."""

    field: str = Field(description="Where: body.instances[0].id, a query parameter, a header")
    detail: str = Field(description="What is wrong there")


class Problem(BaseModel):
    """An error answer outside the CDS routes (RFC 9457, ``application/problem+json``)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="about:blank: the status says what kind of problem")
    title: str = Field(description="The HTTP status's phrase")
    status: int
    detail: str = Field(description="What is wrong, for a person")
    code: str | None = Field(default=None, description="A stable token for programs")
    field: str | None = Field(default=None, description="Where: a JSON path, parameter, header")
    errors: list[FieldError] | None = Field(
        default=None, description="Request validation (422): every mistake with its field"
    )


def _problem_documented(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with every error answer described as the handlers give it: on the
    CDS routes an OperationOutcome (also for FastAPI's validation error), elsewhere a problem
    (``application/problem+json``; validation errors with ``errors``)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    problem_schema = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem_schema.pop("$defs", {}))
    schemas["Problem"] = problem_schema
    as_problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    as_outcome = {"application/json": {"schema": {"$ref": "#/components/schemas/OperationOutcome"}}}
    validation = "#/components/schemas/HTTPValidationError"
    for path, operations in document.get("paths", {}).items():
        cds = path.startswith(_CDS_PREFIX)
        for operation in operations.values():
            for status, answer in operation.get("responses", {}).items():
                if not status.isdigit() or int(status) < 400:
                    continue
                content = answer.get("content", {})
                invalid = content.get("application/json", {}).get("schema", {}).get("$ref")
                if cds and invalid == validation and "OperationOutcome" in schemas:
                    answer["content"] = as_outcome
                elif not cds and invalid == validation:
                    answer["content"] = as_problem
                elif not cds and not any(kind.endswith("json") for kind in content):
                    answer["content"] = {**as_problem, **content}  # a page for browsers stays
    return document


def document_problems(app: FastAPI) -> None:
    """Make ``app.openapi()`` describe error answers as the handlers give them."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _problem_documented(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def install_error_handlers(app: FastAPI) -> None:
    """Register the one mapping from errors to HTTP answers: domain errors, request validation,
    routing, database failures that reach a route untranslated, and anything else."""
    from sqlalchemy.exc import SQLAlchemyError

    app.add_exception_handler(HorismosError, _handle)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(SQLAlchemyError, _database)
    app.add_exception_handler(Exception, _unexpected)
    document_problems(app)
