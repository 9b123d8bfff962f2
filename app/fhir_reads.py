"""Reading FHIR, as the core asks for it: what one read of a hook call's data gives back (the
body, and why it is not the whole answer), the errors it raises, and the reader port itself.

:class:`FhirReaders` builds the reader of one call (its server, token and budgets); the service
uses the HTTP client of ``adapters.fhir.client``, chosen at the composition root. A read either
gives a body (a resource, or a searchset with every page merged) or raises a :class:`FhirError`
saying whether the same request may succeed later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

#: What the caller learns when no FHIR answer came back, whatever the reason.
NO_ANSWER = "the FHIR server could not be reached or did not answer in time"
#: The most pages one ``read`` follows, unless the caller says otherwise.
MAX_PAGES = 10
#: The most one ``read`` (all its pages) takes in, in bytes, unless the caller says otherwise.
MAX_RESPONSE_BYTES = 20_000_000


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


@dataclass(kw_only=True)
class FhirTooLarge(FhirRefused):
    """Raised by a page read past the read's byte budget; ``read`` makes it a truncation."""


@dataclass(frozen=True, kw_only=True)
class FhirRead:
    """What one ``read`` got: the resource, or the searchset with every page read merged (None
    when not even the first answer fitted the byte budget), and why it is not the whole answer
    (``truncated``; None when it is)."""

    body: dict[str, Any] | None
    truncated: str | None = None


def _mode(entry: dict[str, Any]) -> Any:
    search = entry.get("search")
    return search.get("mode", "match") if isinstance(search, dict) else "match"


def short_of_total(bundle: Any) -> str | None:
    """Why a searchset holds fewer matches than its own ``total`` counts (a server that cut the
    answer without a ``next`` link), or None. Entries of ``search.mode`` ``include`` or
    ``outcome`` are not matches."""
    if not isinstance(bundle, dict) or bundle.get("type") != "searchset":
        return None
    total = bundle.get("total")
    if not isinstance(total, int) or isinstance(total, bool):
        return None
    entries = bundle.get("entry")
    matches = sum(
        1
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict) and _mode(e) == "match"
    )
    if total <= matches:
        return None
    return f"the search counted {total} matches and sent {matches}"


class FhirReader(Protocol):
    """Reads one FHIR server for one hook call."""

    async def read(self, query: str) -> FhirRead:
        """``query`` (a relative URL such as ``Observation?patient=1``) read whole, its
        searchset pages followed within the budgets; raises :class:`FhirError`."""
        ...


class FhirReaders(Protocol):
    """Builds the reader of one call: its server, bearer token and budgets."""

    def __call__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        token: str | None,
        *,
        max_bytes: int,
        max_pages: int,
    ) -> FhirReader: ...
