"""Read-only FHIR REST client (httpx) used to fetch what a CDS client did not prefetch.

Errors are typed by who must act next::

    FhirError                      a read failed; ``retryable`` says whether trying again can help
    ├── FhirUnavailable            connection failure, timeout, 5xx, 429        (retryable)
    └── FhirRefused                4xx: not found, forbidden, bad query         (not retryable)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

FHIR_JSON = "application/fhir+json"
MAX_PAGES = 10


@dataclass(kw_only=True)
class FhirError(Exception):
    """A FHIR read that did not produce data."""

    message: str
    url: str
    status: int | None = None
    retryable: bool = False
    outcome: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        Exception.__init__(self, self.message)


@dataclass(kw_only=True)
class FhirUnavailable(FhirError):
    """Raised on network errors, timeouts, 429 and 5xx: the server may answer later."""

    retryable: bool = True


@dataclass(kw_only=True)
class FhirRefused(FhirError):
    """Raised on 4xx answers: the same request will fail again."""


def _diagnostics(body: Any) -> str:
    if isinstance(body, dict) and body.get("resourceType") == "OperationOutcome":
        texts = [
            str(i.get("diagnostics") or i.get("details", {}).get("text") or i.get("code"))
            for i in body.get("issue", [])
            if isinstance(i, dict)
        ]
        return "; ".join(texts) or "OperationOutcome without diagnostics"
    return ""


class FhirClient:
    """Reads ``{base}/{query}`` with the CDS client's Bearer token."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, token: str | None) -> None:
        self._http = http
        self._base = base_url.rstrip("/")
        self._headers = {"Accept": FHIR_JSON}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def url(self, query: str) -> str:
        return query if query.startswith(("http://", "https://")) else f"{self._base}/{query}"

    async def read(self, query: str) -> dict[str, Any]:
        """GET a resource or a search; searchset pages are followed and merged (at most 10)."""
        url = self.url(query)
        body = await self._get(url)
        if body.get("resourceType") != "Bundle":
            return body
        entries = list(body.get("entry") or [])
        pages = 1
        while pages < MAX_PAGES:
            nxt = next(
                (ln.get("url") for ln in body.get("link", []) if ln.get("relation") == "next"), None
            )
            if not nxt:
                break
            body = await self._get(str(nxt))
            entries.extend(body.get("entry") or [])
            pages += 1
        merged = dict(body)
        merged["entry"] = entries
        merged.pop("link", None)
        return merged

    async def _get(self, url: str) -> dict[str, Any]:
        try:
            resp = await self._http.get(url, headers=self._headers)
        except httpx.TimeoutException as exc:
            raise FhirUnavailable(message=f"timed out reading {url}", url=url) from exc
        except httpx.HTTPError as exc:
            raise FhirUnavailable(message=f"cannot reach {url}: {exc}", url=url) from exc
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            detail = _diagnostics(body) or resp.reason_phrase
            cls = (
                FhirUnavailable
                if resp.status_code >= 500 or resp.status_code == 429
                else FhirRefused
            )
            raise cls(
                message=f"{resp.status_code} from {url}: {detail}",
                url=url,
                status=resp.status_code,
                outcome=body if isinstance(body, dict) else None,
            )
        if not isinstance(body, dict) or not isinstance(body.get("resourceType"), str):
            raise FhirRefused(
                message=f"{url} did not return a FHIR resource", url=url, status=resp.status_code
            )
        if body["resourceType"] == "OperationOutcome":
            raise FhirRefused(
                message=f"{url} answered with an OperationOutcome: {_diagnostics(body)}",
                url=url,
                status=resp.status_code,
                outcome=body,
            )
        return body
