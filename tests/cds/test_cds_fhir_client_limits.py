"""The FHIR read client's limits: the token stays on fhirServer's origin, answers are bounded
(a search past its budget is truncated, never whole), an invalid URL is a typed refusal (httpx
MockTransport: a unit test of the HTTP client)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from adapters.fhir.client import FhirClient, FhirRead, FhirRefused

BASE = "https://ehr.example.test/fhir"


def _page(entries: int, nxt: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [
            {"resource": {"resourceType": "Observation", "id": f"o{i}"}} for i in range(entries)
        ],
    }
    if nxt:
        body["link"] = [{"relation": "next", "url": nxt}]
    return body


def _read(
    pages: dict[str, dict[str, Any]], query: str, *, base: str = BASE, **kw: Any
) -> tuple[Any, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def serve(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        key = str(request.url)
        if key not in pages:
            return httpx.Response(404, json={"resourceType": "OperationOutcome", "issue": []})
        return httpx.Response(200, json=pages[key])

    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
            return await FhirClient(http, base, "secret-token", **kw).read(query)

    try:
        return anyio.run(go), seen
    except FhirRefused as exc:
        return exc, seen


def test_next_pages_on_the_same_origin_are_followed_and_merged() -> None:
    pages = {
        f"{BASE}/Observation?patient=1": _page(2, f"{BASE}/Observation?page=2"),
        f"{BASE}/Observation?page=2": _page(1, None),
    }
    result, seen = _read(pages, "Observation?patient=1")
    assert isinstance(result, FhirRead) and result.truncated is None
    assert result.body is not None and len(result.body["entry"]) == 3
    assert len(seen) == 2


def test_a_next_link_to_another_host_is_not_followed_and_gets_no_token() -> None:
    evil = "https://collector.example.org/steal?page=2"
    pages = {f"{BASE}/Observation?patient=1": _page(2, evil), evil: _page(1, None)}
    result, seen = _read(pages, "Observation?patient=1")
    assert isinstance(result, FhirRefused)
    assert "another server" in result.message
    assert [r.url.host for r in seen] == ["ehr.example.test"]


@pytest.mark.parametrize(
    "nxt", ["http://ehr.example.test/fhir/Observation?page=2", "https://ehr.example.test:8443/x"]
)
def test_a_next_link_to_another_scheme_or_port_is_refused(nxt: str) -> None:
    pages = {f"{BASE}/Observation?patient=1": _page(1, nxt), nxt: _page(1, None)}
    result, seen = _read(pages, "Observation?patient=1")
    assert isinstance(result, FhirRefused)
    assert len(seen) == 1


def test_an_answer_larger_than_the_limit_is_truncated_with_nothing_read() -> None:
    pages = {f"{BASE}/Observation?patient=1": _page(200, None)}
    result, _seen = _read(pages, "Observation?patient=1", max_bytes=1_000)
    assert isinstance(result, FhirRead) and result.body is None
    assert result.truncated is not None and "1000-byte limit" in result.truncated


def test_the_byte_limit_covers_all_pages_and_keeps_the_pages_read_as_truncated() -> None:
    pages = {
        f"{BASE}/Observation?patient=1": _page(5, f"{BASE}/Observation?page=2"),
        f"{BASE}/Observation?page=2": _page(5, None),
    }
    first_page = len(httpx.Response(200, json=pages[f"{BASE}/Observation?patient=1"]).content)
    result, seen = _read(pages, "Observation?patient=1", max_bytes=first_page + 10)
    assert isinstance(result, FhirRead) and result.body is not None
    assert len(result.body["entry"]) == 5
    assert result.truncated is not None and "byte limit" in result.truncated
    assert len(seen) == 2


def test_a_search_past_its_page_budget_is_truncated_after_the_budget() -> None:
    pages = {
        f"{BASE}/Observation?page={n}": _page(1, f"{BASE}/Observation?page={n + 1}")
        for n in range(1, 6)
    }
    result, seen = _read(pages, "Observation?page=1", max_pages=3)
    assert isinstance(result, FhirRead) and result.body is not None
    assert len(result.body["entry"]) == 3 and len(seen) == 3
    assert result.truncated == "it has more than 3 pages"


def test_a_paging_loop_is_truncated_at_the_page_read_again() -> None:
    pages = {
        f"{BASE}/Observation?page=1": _page(1, f"{BASE}/Observation?page=2"),
        f"{BASE}/Observation?page=2": _page(1, f"{BASE}/Observation?page=1"),
    }
    result, seen = _read(pages, "Observation?page=1")
    assert isinstance(result, FhirRead) and result.body is not None
    assert len(result.body["entry"]) == 2 and len(seen) == 2
    assert result.truncated is not None and "paging loop" in result.truncated


def test_an_invalid_server_url_is_a_refusal_not_a_crash() -> None:
    result, seen = _read({}, "Patient/1", base="https://host:abc")
    assert isinstance(result, FhirRefused)
    assert seen == []


def test_a_search_holding_fewer_matches_than_its_total_is_truncated() -> None:
    page = _page(3, None) | {"total": 40}
    page["entry"].append(
        {"resource": {"resourceType": "Patient", "id": "p1"}, "search": {"mode": "include"}}
    )
    result, _seen = _read({f"{BASE}/Observation?patient=1": page}, "Observation?patient=1")
    assert isinstance(result, FhirRead) and result.body is not None
    assert result.truncated == "the search counted 40 matches and sent 3"

    whole = _page(3, None) | {"total": 3}
    result, _seen = _read({f"{BASE}/Observation?patient=1": whole}, "Observation?patient=1")
    assert isinstance(result, FhirRead) and result.truncated is None
