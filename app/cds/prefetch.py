"""Prefetch: render the service's templates and gather every key's data for one hook call.

Keys the client sent are used as sent (``null`` = the client has no such data). Keys it did not
send, or sent as an ``OperationOutcome`` (its own fetch failed), are read from ``fhirServer``
with the client's Bearer token, concurrently and under one deadline for the whole hook. A key
whose data cannot be obtained stops the call with 412 naming the key and a reason; a failed
connection is reported generically (the detail is logged, not sent to the caller).

A search cut off — its page or byte budget reached, a paging loop, a searchset the client sent
with a ``next`` page it did not send, or one holding fewer matches than its ``total`` — is no
failure of the call: the key is *truncated*
(:attr:`Gathered.truncated`), and every property it feeds is an incomplete input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from app.cds.errors import Issue, PrefetchUnavailable
from app.cds.fhir_data import readable
from app.cds.requests import HookRequest
from app.data_notes import Unreadable
from app.fhir_reads import (
    MAX_PAGES,
    MAX_RESPONSE_BYTES,
    NO_ANSWER,
    FhirError,
    FhirRead,
    FhirReaders,
    short_of_total,
)
from app.ontology.hooks import USER_TOKENS
from app.ontology.model import PrefetchTemplate

_TOKEN = re.compile(r"\{\{\s*([A-Za-z0-9_.]+)\s*\}\}")


class Unrenderable(Exception):
    """A template names a context field or user token this call does not carry."""


def render(template: str, context: dict[str, Any]) -> str:
    """Fill ``{{context.x}}`` and the CDS Hooks 2.0 user tokens (``Unrenderable`` if absent)."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.startswith("context."):
            value: Any = context
            for part in name.split(".")[1:]:
                value = value.get(part) if isinstance(value, dict) else None
            if not isinstance(value, str | int) or value == "":
                raise Unrenderable(name)
            return str(value)
        if name in USER_TOKENS:
            user = context.get("userId")
            rtype, _, rid = str(user or "").partition("/")
            if rtype != USER_TOKENS[name] or not rid:
                raise Unrenderable(name)
            return rid
        raise Unrenderable(name)

    # a value is data, never syntax: it cannot add search parameters or a fragment
    return _TOKEN.sub(lambda m: quote(fill(m), safe="/:"), template)


@dataclass(frozen=True, kw_only=True)
class Gathered:
    """Every prefetch key's data (``None`` = no data) and where it came from."""

    data: dict[str, dict[str, Any] | None]
    fetched: tuple[str, ...]  # keys read from fhirServer by the service
    #: keys whose search was cut off (a page or byte budget, a paging loop) → why; their data
    #: is what was read before the cut (None when nothing could be)
    truncated: dict[str, str] = field(default_factory=dict)
    #: keys → the resources left out of their data as not valid FHIR R4 (unread records)
    invalid: dict[str, list[Unreadable]] = field(default_factory=dict)


def _is_outcome(value: Any) -> bool:
    return isinstance(value, dict) and value.get("resourceType") == "OperationOutcome"


def _has_next(value: Any) -> bool:
    """Whether a Bundle the client sent says it has a next page (which it did not send)."""
    if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
        return False
    links = value.get("link")
    return isinstance(links, list) and any(
        isinstance(link, dict) and link.get("relation") == "next" for link in links
    )


async def gather(
    templates: Sequence[PrefetchTemplate],
    request: HookRequest,
    http: httpx.AsyncClient,
    *,
    readers: FhirReaders,
    deadline: float,
    max_bytes: int = MAX_RESPONSE_BYTES,
    max_pages: int = MAX_PAGES,
) -> Gathered:
    data: dict[str, dict[str, Any] | None] = {}
    to_fetch: dict[str, str] = {}
    reasons: dict[str, str] = {}
    truncated: dict[str, str] = {}
    invalid: dict[str, list[Unreadable]] = {}
    for t in templates:
        if t.key in request.prefetch and not _is_outcome(request.prefetch[t.key]):
            value = request.prefetch[t.key]
            if _has_next(value):
                truncated[t.key] = "the client sent its first page only"
            elif (short := short_of_total(value)) is not None:
                truncated[t.key] = short
            if value is not None:  # after the count: a record left out is unread, not missing
                value, bad = readable(value, f"prefetch.{t.key}")
                if bad:
                    invalid[t.key] = bad
            data[t.key] = value
            continue
        if _is_outcome(request.prefetch.get(t.key)):
            reasons[t.key] = "the client's prefetch for it is an OperationOutcome"
        try:
            to_fetch[t.key] = render(t.query, request.context)
        except Unrenderable:
            data[t.key] = None  # the template does not apply to this call: no such data
            reasons.pop(t.key, None)
    if not to_fetch:
        return Gathered(data=data, fetched=(), truncated=truncated, invalid=invalid)
    if request.fhir_server is None:
        raise PrefetchUnavailable(
            issues=[
                Issue(
                    code="incomplete",
                    diagnostics=(
                        f"prefetch key {key!r} was not provided"
                        + (f" ({reasons[key]})" if key in reasons else "")
                        + " and the request has no fhirServer to read it from"
                    ),
                    expression=f"prefetch.{key}",
                )
                for key in to_fetch
            ]
        )
    token = request.authorization.access_token if request.authorization else None
    client = readers(http, request.fhir_server, token, max_bytes=max_bytes, max_pages=max_pages)
    results: dict[str, FhirRead] = {}
    failures: dict[str, FhirError] = {}

    async def fetch(key: str, query: str) -> None:
        try:
            results[key] = await client.read(query)
        except FhirError as exc:
            failures[key] = exc

    with anyio.move_on_after(deadline) as scope:
        async with anyio.create_task_group() as tg:
            for key, query in to_fetch.items():
                tg.start_soon(fetch, key, query)
    issues: list[Issue] = []
    for key, query in to_fetch.items():
        if key in failures:
            exc = failures[key]
            issues.append(
                Issue(
                    code="transient" if exc.retryable else "not-found",
                    diagnostics=f"prefetch key {key!r} ({query}) could not be read: {exc.message}",
                    expression=f"prefetch.{key}",
                )
            )
        elif key not in results:  # the hook's deadline passed: said like any missing answer
            issues.append(
                Issue(
                    code="transient",
                    diagnostics=f"prefetch key {key!r} ({query}) could not be read: {NO_ANSWER}",
                    expression=f"prefetch.{key}",
                )
            )
    if issues or scope.cancelled_caught:
        raise PrefetchUnavailable(issues=issues)
    for key, read in results.items():
        body = read.body
        if body is not None:
            body, bad = readable(body, f"prefetch.{key}")
            if bad:
                invalid[key] = bad
        data[key] = body
        if read.truncated is not None:
            truncated[key] = read.truncated
    return Gathered(data=data, fetched=tuple(to_fetch), truncated=truncated, invalid=invalid)
