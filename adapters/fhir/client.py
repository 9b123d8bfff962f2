"""Read-only FHIR REST client (httpx) used to fetch what a CDS client did not prefetch.

Errors are typed by who must act next::

    FhirError                      a read failed; ``retryable`` says whether trying again can help
    ├── FhirUnavailable            connection failure, timeout, 5xx, 429        (retryable)
    └── FhirRefused                4xx: not found, forbidden, bad query; an invalid URL, a
        │                          ``next`` link to another origin (not retryable)
        └── FhirTooLarge           the answer passed the read's byte budget (``read`` turns it
                                   into a truncated read, never raises it)

A search that reaches its page or byte budget, whose ``next`` link leads back to a page already
read, or that holds fewer matches than its own ``total`` counts, is not an error:
:meth:`FhirClient.read` returns what it read with the reason it is *truncated*, and the caller
treats that key as incomplete (never as the whole answer).

Error messages reach the CDS client (in a 412), so they never quote low-level connection errors
(which would make the service a port scanner for whoever picks ``fhirServer``); the detail is
logged. The Bearer token only goes to ``fhirServer``'s origin: searchset ``next`` links
elsewhere are not followed, and redirects are not followed at all (the shared client's setting).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from app import json_input
from app.fhir_reads import (
    MAX_PAGES,
    MAX_RESPONSE_BYTES,
    NO_ANSWER,
    FhirRead,
    FhirRefused,
    FhirTooLarge,
    FhirUnavailable,
    short_of_total,
)
from app.fhir_urls import path_escapes

log = logging.getLogger("horismos.fhir")

FHIR_JSON = "application/fhir+json"


def _diagnostics(body: Any) -> str:
    if isinstance(body, dict) and body.get("resourceType") == "OperationOutcome":
        texts = [
            str(i.get("diagnostics") or i.get("details", {}).get("text") or i.get("code"))
            for i in body.get("issue", [])
            if isinstance(i, dict)
        ]
        return "; ".join(texts) or "OperationOutcome without diagnostics"
    return ""


def _next_link(bundle: dict[str, Any]) -> str | None:
    links = bundle.get("link")
    for link in links if isinstance(links, list) else []:
        if isinstance(link, dict) and link.get("relation") == "next" and link.get("url"):
            return str(link["url"])
    return None


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


class FhirClient:
    """Reads ``{base}/{query}`` with the CDS client's Bearer token."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        token: str | None,
        *,
        max_bytes: int = MAX_RESPONSE_BYTES,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self._http = http
        self._base = base_url.rstrip("/")
        self._headers = {"Accept": FHIR_JSON}
        self._max_bytes = max_bytes
        self._max_pages = max_pages
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def url(self, query: str) -> str:
        return query if query.startswith(("http://", "https://")) else f"{self._base}/{query}"

    def _checked(self, url: str) -> str:
        """``url``, unless its path has a segment a server resolves elsewhere (``..``, ``.``,
        encoded or not): ``Patient/..`` would read the FHIR base URL with the token."""
        try:
            raw_path = httpx.URL(url).raw_path.decode("ascii", "replace").split("?", 1)[0]
        except (httpx.InvalidURL, TypeError, ValueError):
            raise FhirRefused(message="the FHIR URL is not valid", url=url) from None
        if path_escapes(raw_path):
            raise FhirRefused(
                message="the FHIR query has a '.' or '..' path segment; it was not sent", url=url
            )
        return url

    async def read(self, query: str) -> FhirRead:
        """GET a resource or a search; searchset pages are followed and merged (at most
        ``max_pages``, all of them together at most ``max_bytes``), only while they stay on
        ``fhirServer``'s origin.

        A search that reaches either budget, or whose ``next`` link leads back to a page already
        read (a paging loop), is returned as read so far and *truncated*, with the reason: never
        a silently shortened list, and never a failed read either."""
        url = self._checked(self.url(query))
        budget = [self._max_bytes]
        try:
            body = await self._get(url, budget)
        except FhirTooLarge as exc:
            return FhirRead(body=None, truncated=exc.message)
        if body.get("resourceType") != "Bundle":
            return FhirRead(body=body)
        entries = list(body.get("entry") or [])
        seen = {url}
        truncated: str | None = None
        while (nxt := _next_link(body)) is not None:
            page = self._checked(self._same_origin(url, nxt))
            if page in seen:
                truncated = "its next link leads back to a page already read, a paging loop"
                break
            if len(seen) >= self._max_pages:
                truncated = f"it has more than {self._max_pages} pages"
                break
            seen.add(page)
            try:
                body = await self._get(page, budget)
            except FhirTooLarge as exc:
                truncated = exc.message
                break
            entries.extend(body.get("entry") or [])
        merged = dict(body)
        merged["entry"] = entries
        merged.pop("link", None)
        if truncated is None:
            truncated = short_of_total(merged)
        if truncated is not None:
            log.warning("search %s truncated: %s", url, truncated)
        return FhirRead(body=merged, truncated=truncated)

    def _same_origin(self, first: str, nxt: str) -> str:
        """The ``next`` link, resolved against the page that carried it; refused unless it is on
        ``fhirServer``'s origin (the Bearer token must not travel to another host)."""
        try:
            base = httpx.URL(self._base)
            target = httpx.URL(first).join(nxt)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise FhirRefused(
                message="a searchset 'next' link is not a valid URL", url=nxt
            ) from None
        if _origin(target) != _origin(base):
            log.warning("not following a 'next' link to another origin: %s", target)
            raise FhirRefused(
                message="the search's next page is on another server than fhirServer; "
                "it was not followed (the access token is only sent to fhirServer)",
                url=str(target),
            )
        return str(target)

    async def _get(self, url: str, budget: list[int]) -> dict[str, Any]:
        try:
            async with self._http.stream("GET", url, headers=self._headers) as resp:
                raw = await self._body(resp, url, budget)
        except httpx.InvalidURL as exc:
            log.info("invalid FHIR URL %s: %s", url, exc)
            raise FhirRefused(message="the FHIR URL is not valid", url=url) from None
        except UnicodeEncodeError:
            # a header value (the access token) an HTTP header cannot carry: nothing was sent
            raise FhirRefused(
                message="the access token holds characters an HTTP header cannot carry; it "
                "was not sent",
                url=url,
            ) from None
        except httpx.HTTPError as exc:
            # refused, reset, timed out, not HTTP at all: one text, so the answer does not tell
            # an open port from a closed one (the detail is logged)
            log.info("FHIR read of %s failed: %r", url, exc)
            raise FhirUnavailable(message=NO_ANSWER, url=url) from None
        try:
            body = json_input.loads(raw)
        except json_input.JsonRefused as exc:
            raise FhirRefused(
                message=f"the FHIR server's answer cannot be used: {exc.message}",
                url=url,
                status=resp.status_code,
            ) from None
        except ValueError:
            body = None
        if 300 <= resp.status_code < 400:
            raise FhirRefused(
                message=f"the FHIR server answered {resp.status_code}, a redirect; redirects are "
                "not followed (the access token only goes to fhirServer)",
                url=url,
                status=resp.status_code,
            )
        if resp.status_code >= 400:
            detail = _diagnostics(body) or resp.reason_phrase
            cls = (
                FhirUnavailable
                if resp.status_code >= 500 or resp.status_code == 429
                else FhirRefused
            )
            raise cls(
                message=f"the FHIR server answered {resp.status_code}: {detail}",
                url=url,
                status=resp.status_code,
                outcome=body if isinstance(body, dict) else None,
            )
        if not isinstance(body, dict) or not isinstance(body.get("resourceType"), str):
            raise FhirRefused(
                message="the FHIR server did not return a FHIR resource",
                url=url,
                status=resp.status_code,
            )
        if body["resourceType"] == "OperationOutcome":
            raise FhirRefused(
                message=f"the FHIR server answered with an OperationOutcome: {_diagnostics(body)}",
                url=url,
                status=resp.status_code,
                outcome=body,
            )
        return body

    async def _body(self, resp: httpx.Response, url: str, budget: list[int]) -> bytes:
        """The answer's bytes, refusing to read past what is left of the read's byte budget."""
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > budget[0]:
            raise self._too_large(url)
        chunks: list[bytes] = []
        async for chunk in resp.aiter_bytes():
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise self._too_large(url)
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, url: str) -> FhirTooLarge:
        log.warning("FHIR answer from %s exceeds %d bytes", url, self._max_bytes)
        return FhirTooLarge(
            message=f"the FHIR server's answer exceeds the {self._max_bytes}-byte limit",
            url=url,
        )
