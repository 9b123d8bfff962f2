"""The terminology port in a hook call, over HTTP: a diagnosis coded with a code only an earlier
expansion of its value set lists, a drug ordered by a product code a concept map reaches, a
terminology server that answers, and one that stalls — each answered the way a clinician can
trust, with what was read and from which versions on the run."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.terminology import fixture as tx
from tests.terminology.served import served_terminology

OpenClient = Callable[..., AbstractContextManager[TestClient]]
SERVICE = "/cds-services/terminology-check"
DISORDER = "Opioid use disorder on record"
NSAID = "NSAID among the orders"
UNDECIDED = "Not decided: diagnoses or orders could not be read"
EMBEDDED_VALUE_SETS = [f"{tx.OUD}|1.0.0", f"{tx.OUD}|2.0.0"]


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(ontology_paths=[tx.DEPLOYMENT]) as c:
        yield c


def _call(
    *, diagnosis: str | None = None, drug: str = tx.IBUPROFEN, system: str = fx.SNOMED
) -> dict[str, Any]:
    pid = fx.new_id()
    conditions = []
    if diagnosis is not None:
        condition = fx.condition(pid, diagnosis)
        condition["code"]["coding"][0]["system"] = system
        conditions.append(condition)
    return fx.order_sign(
        pid,
        [fx.draft_order(pid, drug)],
        fhir_server=None,
        prefetch={"conditions": fx.searchset(conditions)},
    )


def _answer(client: TestClient, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The one card's summary and the stored run."""
    resp = client.post(SERVICE, json=body)
    assert resp.status_code == 200, resp.text
    [card] = resp.json()["cards"]
    run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
    return str(card["summary"]), client.get(f"/runs/{run_id}").json()


def _notes(run: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [n for n in run.get("dataQuality") or [] if n["rule"] == rule]


# --- the embedded terminology: the deployment's own files -----------------------------------


def test_a_diagnosis_in_the_current_expansion_decides_without_a_note(client: TestClient) -> None:
    summary, run = _answer(client, _call(diagnosis=tx.CURRENT))
    assert summary == DISORDER
    assert not _notes(run, "earlier-expansion")
    assert run["terminology"]["kind"] == "embedded"
    assert "hl7.terminology.r4#7.0.1" in run["terminology"]["packages"]
    assert run["terminology"]["valueSets"] == EMBEDDED_VALUE_SETS
    assert run["terminology"]["conceptMaps"] == [f"{tx.MAP}|1.0.0"]


def test_a_code_only_an_earlier_expansion_lists_counts_with_a_note(client: TestClient) -> None:
    summary, run = _answer(client, _call(diagnosis=tx.RETIRED))
    assert summary == DISORDER  # it used to be a miss: no card for this patient
    [note] = _notes(run, "earlier-expansion")
    assert tx.RETIRED in note["message"]
    assert "version 2.0.0" in note["message"] and "version 1.0.0" in note["message"]
    assert note["readAs"] == f"{tx.OUD}|1.0.0"


def test_the_earlier_code_matches_under_the_systems_oid(client: TestClient) -> None:
    summary, run = _answer(client, _call(diagnosis=tx.RETIRED, system=tx.SNOMED_OID))
    assert summary == DISORDER
    assert _notes(run, "earlier-expansion")


def test_another_snomed_diagnosis_is_none_of_ours_and_decides(client: TestClient) -> None:
    summary, run = _answer(client, _call(diagnosis="10000009"))
    assert summary == NSAID  # the next criterion: the diagnosis was read as none of ours
    assert not run.get("dataQuality")


def test_a_product_code_mapped_to_a_listed_ingredient_is_classified_with_a_note(
    client: TestClient,
) -> None:
    summary, run = _answer(client, _call(drug=tx.PRODUCT))
    assert summary == NSAID
    [note] = _notes(run, "concept-map")
    assert note["received"] == f"{tx.RXNORM}|{tx.PRODUCT}"
    assert note["readAs"] == f"{tx.RXNORM}|{tx.IBUPROFEN}"
    assert f"{tx.MAP}|1.0.0" in note["message"] and "wider" in note["message"]


def test_a_product_only_related_to_the_ingredient_is_not_classified(client: TestClient) -> None:
    """``inexact`` does not make the product a form of the ingredient: the order is unread
    (its RxNorm code is not one the service lists), never taken for an NSAID or for none."""
    resp = client.post(SERVICE, json=_call(drug=tx.RELATED_PRODUCT))
    [card] = resp.json()["cards"]
    assert card["summary"] == UNDECIDED
    assert f"RxNorm code {tx.RELATED_PRODUCT} is not one this service lists" in card["detail"]


def test_the_ingredient_itself_decides(client: TestClient) -> None:
    summary, run = _answer(client, _call())
    assert summary == NSAID
    assert not _notes(run, "concept-map")


# --- a terminology server ------------------------------------------------------------------


def test_a_server_that_knows_more_members_classifies_them(make_app_client: OpenClient) -> None:
    """The server's expansion of the same pinned version has a member the deployment's file
    does not enumerate: the code the lists do not settle is asked there, and counts."""
    with (
        served_terminology(tx.SERVER) as url,
        make_app_client(ontology_paths=[tx.DEPLOYMENT], terminology_url=url) as client,
    ):
        summary, run = _answer(client, _call(diagnosis=tx.SERVER_ONLY))
        assert summary == DISORDER
        assert run["terminology"]["kind"] == "server"
        assert run["terminology"]["url"] == url
        # the earlier expansion and the maps are still the deployment's own files
        summary, _run = _answer(client, _call(diagnosis=tx.RETIRED))
        assert summary == DISORDER
        summary, _run = _answer(client, _call(diagnosis="10000009"))
        assert summary == NSAID


@contextmanager
def _stalling_server() -> Iterator[tuple[str, threading.Event]]:
    """A loopback server that accepts every connection and never answers until released."""
    release = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not release.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/fhir", release
    finally:
        release.set()
        listener.close()
        for conn in accepted:
            conn.close()
        thread.join(timeout=5)


def test_a_stalled_terminology_server_makes_the_run_undecided_inside_the_deadline(
    make_app_client: OpenClient,
) -> None:
    deadline, stall = 5.0, 60.0
    with (
        _stalling_server() as (url, _release),
        make_app_client(
            ontology_paths=[tx.DEPLOYMENT],
            terminology_url=url,
            terminology_timeout_seconds=stall,
            hook_deadline_seconds=deadline,
        ) as client,
    ):
        # a code the lists settle is never asked: the complete case decides, stall or not
        summary, _run = _answer(client, _call(diagnosis=tx.CURRENT))
        assert summary == DISORDER
        started = time.monotonic()
        resp = client.post(SERVICE, json=_call(diagnosis="10000009"))
        elapsed = time.monotonic() - started
        assert resp.status_code == 200, resp.text
        assert elapsed < deadline < stall
        [card] = resp.json()["cards"]
        assert card["summary"] == UNDECIDED
        assert "the terminology service did not answer in time" in card["detail"]
        run = resp.json()["extension"]["dev.horismos.run"]
        assert "decision" not in run
        states = {i["input"]: i["state"] for i in run["undecided"]["inputs"]}
        assert states == {"hasDiagnosis": "unread"}
        stored = client.get(f"/runs/{run['runId']}").json()
        assert stored["terminology"] == {
            "kind": "server",
            "url": url,
            "valueSets": EMBEDDED_VALUE_SETS,
            "conceptMaps": [f"{tx.MAP}|1.0.0"],
        }
        # the same call again: a refusal is not cached, and it is refused again in time
        started = time.monotonic()
        again = client.post(
            SERVICE, json={**_call(diagnosis="10000009"), "hookInstance": str(uuid.uuid4())}
        )
        assert time.monotonic() - started < deadline
        assert again.json()["cards"][0]["summary"] == UNDECIDED


def test_a_condition_counts_an_earlier_expansions_code_with_a_note(
    make_app_client: OpenClient,
) -> None:
    """``horis:inValueSet`` as a condition on a code read as text: the earlier expansion counts
    there too, with the same note; a code no expansion lists does not."""
    with make_app_client(ontology_paths=[tx.BY_CONDITION]) as client:
        url = "/cds-services/terminology-condition-check"

        def answer(code: str) -> tuple[str, dict[str, Any]]:
            resp = client.post(url, json=_call(diagnosis=code))
            assert resp.status_code == 200, resp.text
            [card] = resp.json()["cards"]
            run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
            return str(card["summary"]), client.get(f"/runs/{run_id}").json()

        summary, run = answer(tx.RETIRED)
        assert summary == DISORDER
        [note] = _notes(run, "earlier-expansion")
        assert tx.RETIRED in note["message"] and "version 1.0.0" in note["message"]
        summary, run = answer(tx.CURRENT)
        assert summary == DISORDER
        assert not _notes(run, "earlier-expansion")
        summary, run = answer("10000009")
        assert summary == NSAID
        assert not _notes(run, "earlier-expansion")


def test_the_run_page_says_which_terminology_and_versions_classified_the_codes(
    client: TestClient,
) -> None:
    resp = client.post(SERVICE, json=_call(diagnosis=tx.RETIRED))
    run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
    page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"}).text
    assert "Codes were read with the embedded terminology (hl7.terminology.r4#7.0.1)" in page
    assert f"{tx.OUD}|1.0.0" in page and f"{tx.MAP}|1.0.0" in page
    assert "its earlier version 1.0.0 lists it" in page  # the data-quality note
