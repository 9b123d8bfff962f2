"""A FHIR server that misbehaves, as the EHR sees the hook call it serves: slow, failing,
malformed, redirecting, paging for ever, huge. A read that failed is a prompt 412 naming the
prefetch key and what went wrong, and nothing is stored; a search cut off (paging for ever, past
its page or byte budget) is answered with every input it feeds recorded *truncated*, never as the
whole answer. Nothing is decided from what could not be read, and the service stays bounded in
time and memory (a loopback server scripted per test; real database on
both backends, real HTTP through the ASGI app)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from tests.cds import clinical as fx
from tests.support.rogue_http import Answer, RogueServer, rogue_server

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"
TIMEOUT = 1.0


@pytest.fixture
def fhir() -> Iterator[RogueServer]:
    with rogue_server() as server:
        yield server


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(
        fhir_timeout_seconds=TIMEOUT, max_fhir_response_bytes=200_000, reconcile_interval_seconds=0
    ) as c:
        yield c


def _vitals_from(fhir: RogueServer) -> tuple[dict[str, Any], str]:
    """A triage call whose vitals must be read from ``fhir``; everything else is prefetched."""
    pid, eid = fx.new_id(), fx.new_id()
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir.base + "/fhir",
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "conditions": fx.searchset([]),
        },
    )
    return body, pid


def _issue(resp: Any) -> dict[str, Any]:
    """The first issue of a 412; every issue concerns the vitals key (or an element of it)."""
    assert resp.status_code == 412, resp.text
    issues = resp.json()["issue"]
    assert all(i["expression"][0].startswith("prefetch.vitals") for i in issues), issues
    return dict(issues[0])


def _nothing_stored(engine: Engine) -> None:
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar_one() == 0


def test_a_slow_fhir_server_is_a_412_at_the_deadline(
    client: TestClient, fhir: RogueServer, engine: Engine
) -> None:
    fhir.on("/fhir/Observation", Answer.json(fx.searchset([]), delay=30))
    body, _ = _vitals_from(fhir)
    started = time.monotonic()
    issue = _issue(client.post(TRIAGE, json=body))
    assert time.monotonic() - started < TIMEOUT + 4
    assert "did not answer in time" in issue["diagnostics"]
    _nothing_stored(engine)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_failing_fhir_server_is_a_transient_412_with_its_status(
    client: TestClient, fhir: RogueServer, engine: Engine, status: int
) -> None:
    outcome = {"resourceType": "OperationOutcome", "issue": [{"diagnostics": "index rebuilding"}]}
    fhir.on("/fhir/Observation", Answer.json(outcome, status=status))
    body, _ = _vitals_from(fhir)
    issue = _issue(client.post(TRIAGE, json=body))
    assert issue["code"] == "transient"
    assert str(status) in issue["diagnostics"] and "index rebuilding" in issue["diagnostics"]
    _nothing_stored(engine)


@pytest.mark.parametrize(
    "answer",
    [
        Answer(body=b"{not json", headers={"content-type": "application/fhir+json"}),
        Answer(body=b"<html>gateway</html>", headers={"content-type": "text/html"}),
        Answer.json({"entry": []}),  # JSON, but no resource
    ],
    ids=["broken-json", "html", "no-resource-type"],
)
def test_a_malformed_fhir_answer_is_a_412(
    client: TestClient, fhir: RogueServer, engine: Engine, answer: Answer
) -> None:
    fhir.on("/fhir/Observation", answer)
    body, _ = _vitals_from(fhir)
    _issue(client.post(TRIAGE, json=body))
    _nothing_stored(engine)


def test_a_searchset_that_is_not_valid_fhir_is_an_unread_input_not_a_refused_call(
    client: TestClient, fhir: RogueServer
) -> None:
    """A Bundle whose entries are not a list is the server's answer, read as FHIR and refused:
    the call is answered, every vital sign that search feeds is unread, and triage waits (a
    412 would show the clinician no card at all)."""
    fhir.on(
        "/fhir/Observation",
        Answer.json({"resourceType": "Bundle", "type": "searchset", "entry": "nope"}),
    )
    body, _ = _vitals_from(fhir)
    resp = client.post(TRIAGE, json=body)
    assert resp.status_code == 200, resp.text
    run = resp.json()["extension"]["dev.horismos.run"]
    assert "decision" not in run
    stored = client.get(f"/runs/{run['runId']}").json()
    [heart] = [i for i in stored["inputs"] if i["property"].endswith("#heartRate")]
    assert heart["state"] == "unread"


def test_a_redirect_is_not_followed_and_the_token_stays_home(
    client: TestClient, engine: Engine
) -> None:
    with rogue_server() as fhir, rogue_server() as elsewhere:
        elsewhere.on("/fhir/Observation", Answer.json(fx.searchset([])))
        target = elsewhere.base + "/fhir/Observation?patient=x"
        fhir.on("/fhir/Observation", Answer(status=302, headers={"location": target}))
        body, _ = _vitals_from(fhir)
        issue = _issue(client.post(TRIAGE, json=body))
        assert "302" in issue["diagnostics"]
        assert elsewhere.seen == []  # the token never left for the other server
    _nothing_stored(engine)


def _truncated(client: TestClient, resp: Any) -> dict[str, Any]:
    """The answered call's input status by property, read back from ``GET /runs/{id}``; every
    vital sign fed by the cut-off search is truncated."""
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
    rows = client.get(f"/runs/{run_id}").json()["inputs"]
    inputs = {r["property"].rsplit("#", 1)[-1]: r for r in rows}
    for name in ("heartRate", "respRate", "spo2", "systolicBP", "temperature"):
        assert inputs[name]["state"] == "truncated", inputs[name]
    assert inputs["age"]["state"] == "complete"  # the Patient key was read whole
    return inputs


def test_a_paging_loop_is_a_truncated_input_not_a_list_read_ten_times(
    client: TestClient, fhir: RogueServer
) -> None:
    body, pid = _vitals_from(fhir)
    page = fx.searchset([fx.observation(pid, "8867-4", 80, "/min")])
    page["link"] = [{"relation": "next", "url": fhir.base + "/fhir/Observation?page=again"}]
    fhir.on("/fhir/Observation", Answer.json(page))
    inputs = _truncated(client, client.post(TRIAGE, json=body))
    (reason,) = inputs["heartRate"]["reasons"]
    assert reason["source"] == "prefetch.vitals"
    assert "paging loop" in reason["detail"]
    assert len(fhir.seen) == 2  # the first page and the link back to it: no more


def test_a_search_with_more_pages_than_read_is_truncated_not_a_shortened_list(
    client: TestClient, fhir: RogueServer
) -> None:
    body, pid = _vitals_from(fhir)

    def page(path: str) -> Answer:
        n = int(path.split("page=")[1]) if "page=" in path else 0
        bundle = fx.searchset([fx.observation(pid, "8867-4", 80, "/min")])
        bundle["link"] = [{"relation": "next", "url": f"{fhir.base}/fhir/Observation?page={n + 1}"}]
        return Answer.json(bundle)

    fhir.on("/fhir/Observation", page)
    inputs = _truncated(client, client.post(TRIAGE, json=body))
    (reason,) = inputs["heartRate"]["reasons"]
    assert reason["detail"] == (
        "The 'vitals' search was cut off (it has more than 10 pages): more heart rate data "
        "may exist than was read"
    )
    assert len(fhir.seen) == 10


def test_a_huge_answer_is_a_truncated_input_and_is_not_read_to_the_end(
    client: TestClient, fhir: RogueServer
) -> None:
    body, pid = _vitals_from(fhir)
    sent: list[int] = []
    entry = json.dumps({"resource": fx.observation(pid, "8867-4", 80, "/min")}).encode()

    def endless() -> Iterator[bytes]:
        yield b'{"resourceType": "Bundle", "type": "searchset", "entry": ['
        for i in range(100_000):  # some 40 MB if it were all read
            sent.append(len(entry))
            yield (b"," if i else b"") + entry
        yield b"]}"

    fhir.on("/fhir/Observation", lambda _path: Answer(body=endless()))
    inputs = _truncated(client, client.post(TRIAGE, json=body))
    assert "200000-byte limit" in inputs["heartRate"]["reasons"][0]["detail"]
    assert sum(sent) < 5_000_000  # the service stopped reading long before the end
