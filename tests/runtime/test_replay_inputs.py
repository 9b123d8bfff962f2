"""A hook run keeps the FHIR input hydration read, so replay can hydrate it again under a changed
mapping — which replaying the stored World cannot show (both backends)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.cds.hook_input import HookInput, rehydrated_recording
from app.ontology import load_ontology
from app.runtime.host import stored_input, stored_recording
from app.runtime.replay import replay_run
from app.store import session_scope
from tests.cds import clinical as fx

ROOT = Path(__file__).resolve().parents[2]
TRIAGE = ROOT / "ontologies/triage.ttl"
OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _hook_run(client: TestClient) -> str:
    body = fx.example("triage-encounter-start.json")
    body["hookInstance"] = str(uuid.uuid4())
    answer = client.post("/cds-services/horismos-triage", json=body)
    assert answer.status_code == 200, answer.text
    ext = answer.json()["extension"]["dev.horismos.run"]
    assert ext["decision"] == {"property": "acuity", "value": "Immediate"}
    run_id: str = ext["runId"]
    return run_id


def test_replay_hydrates_the_stored_input_again_under_a_changed_mapping(
    make_app_client: OpenClient, engine: Engine, tmp_path: Path
) -> None:
    with make_app_client() as client:
        run_id = _hook_run(client)
        same = client.post(f"/runs/{run_id}/replay", json={"rehydrate": True})
    assert same.status_code == 200 and same.json()["same"], same.json()

    with session_scope(engine) as session:
        recorded = stored_recording(session, run_id)
        raw = stored_input(session, run_id)
    assert raw is not None
    # the input status the run's context carried is replay material too, so a replay decides
    # on the same inputs
    assert recorded.inputs is not None
    assert {r["property"].rsplit("#", 1)[-1]: r["state"] for r in recorded.inputs}["heartRate"] == (
        "complete"
    )
    stored = HookInput.from_bytes(raw)
    assert stored.service == "horismos-triage" and stored.hook == "encounter-start"
    assert stored.prefetch["vitals"]["entry"][0]["resource"]["id"] == "hr-1"
    assert len(raw) < len(json.dumps(stored.to_json())) / 2  # compressed

    # a mapping change: heart rate read from another LOINC code (none in the input)
    text = TRIAGE.read_text()
    assert '"http://loinc.org|8867-4"' in text
    changed = tmp_path / "triage.ttl"
    changed.write_text(text.replace('"http://loinc.org|8867-4"', '"http://loinc.org|8889-8"'))
    ontology = load_ontology([changed])

    on_stored_world = replay_run(ontology, recorded)
    assert on_stored_world.same  # the stored World still holds the heart rate: blind to it
    rehydrated = replay_run(ontology, rehydrated_recording(ontology, recorded, stored))
    assert rehydrated.outcome is not None
    assert rehydrated.decision_changed
    assert rehydrated.outcome.to_json().get("decision") != {
        "property": "acuity",
        "value": "Immediate",
    }
    facts = {d["what"]: d for d in rehydrated.divergences}["facts"]
    assert ["example-patient", "heartRate", "130"] in facts["missing"]
