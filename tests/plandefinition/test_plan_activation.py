"""A PlanDefinition written over FHIR becomes a CDS service only through change control, over
HTTP on both backends: written, it serves nothing; proposed, its compiled deployment passes the
policy as a new deployment; replayed (nothing to replay, said so), approved by someone else
than its author, activated — then it is in discovery and answers with its cards, its runs
recorded under its version; a later write is proposed as the next version of that deployment
(a write that does not change the plan's version is refused); a rollback takes the service
away again; a plan that cannot be a service, or one of the definition files, is refused."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.changes.control import APPROVE_SCOPE
from app.plandefinition.writes import WRITE_SCOPE
from tests.support.client_jwt import ISSUERS, bearer

AUTHOR, REVIEWER = "alice", "bob"
OpenClient = Callable[..., AbstractContextManager[TestClient]]
PLAN: dict[str, Any] = {
    "resourceType": "PlanDefinition",
    "id": "fall-risk",
    "url": "http://example.org/PlanDefinition/fall-risk",
    "version": "1",
    "status": "active",
    "title": "Fall risk",
    "action": [
        {
            "title": "Review fall risk: over 80",
            "priority": "urgent",
            "trigger": [{"type": "named-event", "name": "patient-view"}],
            "condition": [
                {
                    "kind": "applicability",
                    "expression": {
                        "language": "text/fhirpath",
                        "expression": "%subject.birthDate < @1946-01-01",
                    },
                }
            ],
        }
    ],
}


def _call(client: TestClient, birth: str) -> Any:
    return client.post(
        "/cds-services/fall-risk",
        json={
            "hook": "patient-view",
            "hookInstance": str(uuid.uuid4()),
            "context": {"patientId": "p1", "userId": "Practitioner/u1"},
            "prefetch": {"patient": {"resourceType": "Patient", "id": "p1", "birthDate": birth}},
        },
    )


def _services(client: TestClient) -> set[str]:
    return {s["id"] for s in client.get("/cds-services").json()["services"]}


def _through(client: TestClient, proposed: Any, replayed_runs: int = 0) -> dict[str, Any]:
    """Replay (``replayed_runs`` of the deployment's runs), approve and activate the change
    ``proposed`` answered."""
    assert proposed.status_code == 201, proposed.text
    change = proposed.json()
    replayed = client.post(f"/changes/{change['id']}/replay", json={"actor": AUTHOR})
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["replay"]["replayed"] == replayed_runs
    by_author = client.post(f"/changes/{change['id']}/approve", json={"reviewer": AUTHOR})
    assert by_author.status_code == 403
    approved = client.post(f"/changes/{change['id']}/approve", json={"reviewer": REVIEWER})
    assert approved.status_code == 200, approved.text
    active = client.post(f"/changes/{change['id']}/activate", json={"actor": REVIEWER})
    assert active.status_code == 200, active.text
    result: dict[str, Any] = active.json()
    return result


def test_a_written_plan_serves_only_once_change_control_activates_it(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    with make_app_client(change_approvers=[REVIEWER], definition_paths=[tmp_path]) as client:
        written = client.put("/fhir/PlanDefinition/fall-risk", json=PLAN)
        assert written.status_code == 201, written.text
        assert "fall-risk" not in _services(client)
        assert _call(client, "1940-01-01").status_code == 404

        proposed = client.post(
            "/changes/plandefinition", json={"planDefinition": "fall-risk", "author": AUTHOR}
        )
        assert proposed.json()["baseDigest"] == "new"
        assert proposed.json()["deploymentId"] == "plandefinition-fall-risk"
        first = _through(client, proposed)
        assert first["status"] == "active"
        page = client.get(f"/changes/{first['id']}", headers={"Accept": "text/html"})
        assert page.status_code == 200
        assert (
            "a new deployment: there is no active version to decide its runs again on" in page.text
        )

        assert "fall-risk" in _services(client)
        older = _call(client, "1940-01-01")
        assert older.status_code == 200, older.text
        assert [c["summary"] for c in older.json()["cards"]] == ["Review fall risk: over 80"]
        assert _call(client, "1990-01-01").json()["cards"] == []
        deployments = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
        assert deployments["plandefinition-fall-risk"]["version"] == "1"

        # the next write: a change of that deployment, which must say it is a new version
        same = copy.deepcopy(PLAN)
        same["action"][0]["title"] = "Review fall risk (over 80)"
        assert client.put("/fhir/PlanDefinition/fall-risk", json=same).status_code == 200
        refused = client.post(
            "/changes/plandefinition", json={"planDefinition": "fall-risk", "author": AUTHOR}
        )
        assert refused.status_code == 422
        assert "new owl:versionInfo" in refused.json()["detail"]
        second = {**same, "version": "2"}
        assert client.put("/fhir/PlanDefinition/fall-risk", json=second).status_code == 200
        proposed = client.post(
            "/changes/plandefinition", json={"planDefinition": "fall-risk", "author": AUTHOR}
        )
        assert proposed.json()["baseDigest"] == first["candidateDigest"]
        _through(client, proposed, replayed_runs=2)  # the two calls of its first version
        summaries = [c["summary"] for c in _call(client, "1940-01-01").json()["cards"]]
        assert summaries == ["Review fall risk (over 80)"]

        # a rollback restores the first version; another takes the service away
        rollback = "/deployments/plandefinition-fall-risk/rollback"
        assert client.post(rollback, json={"actor": REVIEWER}).status_code == 200
        summaries = [c["summary"] for c in _call(client, "1940-01-01").json()["cards"]]
        assert summaries == ["Review fall risk: over 80"]
        assert client.post(rollback, json={"actor": REVIEWER}).status_code == 200
        assert "fall-risk" not in _services(client)
        assert _call(client, "1940-01-01").status_code == 404


def test_what_cannot_be_a_service_is_refused_naming_it(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    untriggered = {**copy.deepcopy(PLAN), "id": "no-trigger", "url": "http://example.org/nt"}
    del untriggered["action"][0]["trigger"]
    in_files = {**copy.deepcopy(PLAN), "id": "from-files", "url": "http://example.org/ff"}
    (tmp_path / "from-files.json").write_text(json.dumps(in_files))
    with make_app_client(change_approvers=[REVIEWER], definition_paths=[tmp_path]) as client:
        assert client.put("/fhir/PlanDefinition/no-trigger", json=untriggered).status_code == 201
        for plan_id, status, why in [
            ("no-trigger", 422, "named-event"),
            ("from-files", 409, "definition files"),
            ("never-written", 404, "never-written"),
        ]:
            answer = client.post(
                "/changes/plandefinition", json={"planDefinition": plan_id, "author": AUTHOR}
            )
            assert answer.status_code == status, answer.text
            assert why in answer.json()["detail"]


def test_an_activated_plan_answers_in_another_instance_on_the_same_database(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    settings = {"change_approvers": [REVIEWER], "definition_paths": [tmp_path]}
    with make_app_client(**settings) as first, make_app_client(**settings) as second:
        assert first.put("/fhir/PlanDefinition/fall-risk", json=PLAN).status_code == 201
        _through(
            first,
            first.post(
                "/changes/plandefinition", json={"planDefinition": "fall-risk", "author": AUTHOR}
            ),
        )
        answered = _call(second, "1940-01-01")
        assert answered.status_code == 200, answered.text
        assert [c["summary"] for c in answered.json()["cards"]] == ["Review fall risk: over 80"]


def test_with_client_jwts_the_plans_writer_proposes_it_and_someone_else_approves(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    base = "https://cds.example.test"

    def jwt(path: str, sub: str, scope: str | None = None) -> dict[str, str]:
        return bearer(base + path, sub, scope)

    with make_app_client(
        trusted_issuers=ISSUERS, public_base_url=base, definition_paths=[tmp_path]
    ) as client:
        put = "/fhir/PlanDefinition/fall-risk"
        written = client.put(put, json=PLAN, headers=jwt(put, "alice", WRITE_SCOPE))
        assert written.status_code == 201, written.text
        propose = "/changes/plandefinition"
        body = {"planDefinition": "fall-risk"}
        # bob, an approver, cannot propose alice's plan and then approve it himself
        by_bob = client.post(propose, json=body, headers=jwt(propose, "bob", APPROVE_SCOPE))
        assert by_bob.status_code == 403 and "written by alice" in by_bob.json()["detail"]
        change = client.post(propose, json=body, headers=jwt(propose, "alice"))
        assert change.status_code == 201, change.text
        cid = change.json()["id"]
        replay = f"/changes/{cid}/replay"
        assert client.post(replay, json={}, headers=jwt(replay, "alice")).status_code == 200
        approve = f"/changes/{cid}/approve"
        own = client.post(approve, headers=jwt(approve, "alice", APPROVE_SCOPE))
        assert own.status_code == 403 and "author cannot approve" in own.json()["detail"]
        assert client.post(approve, headers=jwt(approve, "bob", APPROVE_SCOPE)).is_success
