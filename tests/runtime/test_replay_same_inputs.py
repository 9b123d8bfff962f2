"""A hook run hydrated again from its stored FHIR input, under the version that ran it, reports the
input status the call reported and decides what the call decided: the live call and replay read a
call into a World the same way (``app.cds.assemble``), so they cannot drift apart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cds.hook_input import HookInput, rehydrated_recording
from app.deployments.registry import of_run, served
from app.runtime.host import stored_input, stored_recording
from app.runtime.replay import replay_run
from app.store import repo, session_scope
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
TRIAGE = "/cds-services/horismos-triage"
GFR = "mL/min/{1.73_m2}"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client() as c:
        yield c


def _med(pid: str, code: str, *, egfr: float | None) -> dict[str, Any]:
    labs = [fx.observation(pid, "2823-3", 4.2, "mmol/L", category="laboratory")]
    if egfr is not None:
        labs.append(fx.observation(pid, "33914-3", egfr, GFR, category="laboratory"))
    order = fx.draft_order(pid, code)
    return fx.order_sign(
        pid,
        [order],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset([]),
            "labs": fx.searchset(labs),
        },
    )


def _triage(pid: str, *, encounter: Any = "default", vitals: Any = None) -> dict[str, Any]:
    body = fx.triage_request(pid, vitals=vitals)
    if encounter != "default":
        body["prefetch"]["encounter"] = encounter
        if isinstance(encounter, dict):
            body["context"]["encounterId"] = encounter["id"]
    return body


def _unread_text() -> dict[str, Any]:
    """The encounter carrying the complaint's text is null: what the text would say is unknown."""
    return _triage(fx.new_id(), encounter=None)


def _free_text_only() -> dict[str, Any]:
    """The complaint only as free text, and no language model to read it."""
    pid = fx.new_id()
    return _triage(pid, encounter=fx.encounter(fx.new_id(), pid, reason="crushing chest pain"))


def _refused_reading() -> dict[str, Any]:
    """A heart rate stamped three hours after the call, beside a real one."""
    pid = fx.new_id()
    now = datetime.now(UTC)
    vitals = [
        fx.observation(pid, "8867-4", 158, "/min", when=(now - timedelta(minutes=15)).isoformat()),
        fx.observation(pid, "8867-4", 82, "/min", when=(now + timedelta(hours=3)).isoformat()),
        *fx.vital_signs(pid, skip={"8867-4"}),
    ]
    return _triage(pid, vitals=vitals)


def _unread_record() -> dict[str, Any]:
    """Celecoxib, an NSAID the deployment does not list: the draft order is unread."""
    return _med(fx.new_id(), "205323", egfr=22)


def _undecided_med_safety() -> dict[str, Any]:
    """Ibuprofen with no eGFR on record: the labs are incomplete."""
    return _med(fx.new_id(), "5640", egfr=None)


def _decided_med_safety() -> dict[str, Any]:
    return _med(fx.new_id(), "5640", egfr=22)


def _decided_triage() -> dict[str, Any]:
    return _triage(fx.new_id())


CASES: dict[str, tuple[str, Callable[[], dict[str, Any]], bool]] = {
    # name: (service, body, whether the call decides)
    "unread-text": (TRIAGE, _unread_text, False),
    "free-text-no-model": (TRIAGE, _free_text_only, True),
    "refused-reading": (TRIAGE, _refused_reading, False),
    "unread-record": (MED, _unread_record, False),
    "undecided-med-safety": (MED, _undecided_med_safety, False),
    "decided-med-safety": (MED, _decided_med_safety, True),
    "decided-triage": (TRIAGE, _decided_triage, True),
}


def _states(inputs: list[dict[str, Any]] | None) -> dict[str, str]:
    return {i["property"].rsplit("#", 1)[-1]: i["state"] for i in inputs or ()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_rehydrated_replay_reports_the_input_status_of_the_call(
    client: TestClient, case: str
) -> None:
    path, make, decides = CASES[case]
    body = make()
    body["hookInstance"] = str(uuid.uuid4())
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    live = answer.json()["extension"]["dev.horismos.run"]
    assert ("decision" in live) is decides, live
    run_id = live["runId"]
    stored = client.get(f"/runs/{run_id}").json()

    # what replay reports over HTTP: the same decision, the same terminal step
    replayed = client.post(f"/runs/{run_id}/replay", json={"rehydrate": True})
    assert replayed.status_code == 200, replayed.text
    report = replayed.json()
    assert report["same"], report["divergences"]
    assert report["replayed"]["decision"] == live.get("decision")
    assert report["replayed"]["terminal"] == live["terminal"]

    # and the input status hydrating again records is the one the call recorded
    engine = client.app.state.container.running.engine  # type: ignore[attr-defined]
    deployments = client.app.state.container.running.catalog.current()  # type: ignore[attr-defined]
    with session_scope(engine) as session:
        recorded = stored_recording(session, run_id)
        raw = stored_input(session, run_id)
        row = repo.get_run(session, run_id)
        assert raw is not None and row is not None
        ontology = served(of_run(deployments, row.deployment, row.workflow_iri))
    again = rehydrated_recording(ontology, recorded, HookInput.from_bytes(raw))
    assert _states(again.inputs) == _states(stored["inputs"])
    assert again.inputs == recorded.inputs
    replay = replay_run(ontology, again)
    assert replay.outcome is not None and replay.outcome.to_json().get("decision") == live.get(
        "decision"
    )
