"""A rule change from proposal to rollback over HTTP, against real stored hook runs (both
backends): the policy refuses what it must with its reason; the sandboxed replay shows exactly
the runs whose acuity changes, with both proofs; approval is refused to the author and granted to
a reviewer; the approved change decides beside the active version without being returned;
activation makes new hook calls use (and record) the new version, in every service instance on
the database; a rollback restores the old one."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from app.store import Run, session_scope
from tests.changes.triage_calls import (
    AUTHOR,
    REVIEWER,
    THRESHOLD_FROM,
    THRESHOLD_TO,
    acuity_of,
    triage_call,
)

ROOT = Path(__file__).resolve().parents[2]
OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _threshold_change(text: str) -> str:
    assert THRESHOLD_FROM in text and 'owl:versionInfo "1.5.0"' in text
    return text.replace(THRESHOLD_FROM, THRESHOLD_TO).replace(
        'owl:versionInfo "1.5.0"', 'owl:versionInfo "1.6.0"'
    )


def _triage(client: TestClient) -> dict[str, Any]:
    deployments = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
    triage: dict[str, Any] = deployments["triage"]
    return triage


def _propose(client: TestClient, path: str, content: str, base: str) -> Any:
    return client.post(
        "/changes",
        json={
            "deployment": "triage",
            "baseDigest": base,
            "files": [{"path": path, "content": content}],
            "author": AUTHOR,
            "rationale": "Tachycardia above 140/min is an emergency in our ED.",
        },
    )


def _rules(proof: dict[str, Any]) -> set[str]:
    return {d["ruleName"] for v in proof["values"] for d in v["derivations"]}


def _recorded(engine: Engine, run_id: str) -> tuple[str | None, str | None]:
    with session_scope(engine) as session:
        row = session.execute(
            select(Run.deployment_version, Run.ontology_digest).where(Run.id == run_id)
        ).one()
    return row[0], row[1]


def test_a_threshold_change_from_proposal_to_rollback(
    client: TestClient, triage_file: Path, engine: Engine
) -> None:
    rates = [145, 148, 130, 160, 80]
    runs = {rate: triage_call(client, rate) for rate in rates}
    assert {rate: acuity_of(r) for rate, r in runs.items()} == {
        145: "Urgent",
        148: "Urgent",
        130: "Urgent",
        160: "Immediate",
        80: "NonUrgent",
    }
    release = _triage(client)
    assert (release["version"], release["change"]) == ("1.5.0", None)
    text = triage_file.read_text()

    # --- the policy refuses, with its reason, and keeps the refusal -----------------------
    outside = _propose(client, "../med-safety.ttl", text, release["digest"])
    assert outside.status_code == 422
    assert "outside deployment triage" in outside.json()["detail"]
    assert outside.json()["change"]["status"] == "refused"
    stale = _propose(client, "triage.ttl", _threshold_change(text), "0" * 64)
    assert stale.status_code == 422 and "stale base digest" in stale.json()["detail"]
    unsound = _propose(
        client,
        "triage.ttl",
        _threshold_change(text).replace("horis:onUnreachable :EscalateToNurse ;", ""),
        release["digest"],
    )
    assert unsound.status_code == 422
    assert "does not verify" in unsound.json()["detail"]
    assert "onUnreachable" in unsound.json()["detail"]
    same_version = _propose(
        client, "triage.ttl", text.replace(THRESHOLD_FROM, THRESHOLD_TO), release["digest"]
    )
    assert same_version.status_code == 422
    assert "new owl:versionInfo" in same_version.json()["detail"]

    # --- proposed, replayed on the stored runs in the sandbox -----------------------------
    proposed = _propose(client, "triage.ttl", _threshold_change(text), release["digest"])
    assert proposed.status_code == 201, proposed.text
    change = proposed.json()
    assert (change["status"], change["candidateVersion"]) == ("proposed", "1.6.0")
    too_early = client.post(f"/changes/{change['id']}/approve", json={"reviewer": REVIEWER})
    assert too_early.status_code == 409 and "replay" in too_early.json()["detail"]

    replayed = client.post(f"/changes/{change['id']}/replay", json={"last": 20, "actor": AUTHOR})
    assert replayed.status_code == 200, replayed.text
    report = replayed.json()
    assert report["status"] == "replayed"
    changed = {item["runId"]: item for item in report["changed"]}
    assert set(changed) == {runs[145]["runId"], runs[148]["runId"]}
    for item in changed.values():
        assert item["before"]["decision"] == {"property": "acuity", "value": "Urgent"}
        assert item["after"]["decision"] == {"property": "acuity", "value": "Immediate"}
        before_rules = {
            d["ruleName"] for v in item["before"]["proof"]["values"] for d in v["derivations"]
        }
        after_rules = {
            d["ruleName"] for v in item["after"]["proof"]["values"] for d in v["derivations"]
        }
        assert "UrgentTachycardia" in before_rules and "ImmediateHighHeartRate" in after_rules
    assert report["replay"]["same"] == 3 and report["replay"]["replayed"] == 5

    page = client.get(f"/changes/{change['id']}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "ImmediateHighHeartRate" in page.text
    assert "2</b> decision(s) change" in page.text

    # --- approval: never the author, only an approver -------------------------------------
    by_author = client.post(f"/changes/{change['id']}/approve", json={"reviewer": AUTHOR})
    assert by_author.status_code == 403
    assert "author cannot approve" in by_author.json()["detail"]
    by_stranger = client.post(f"/changes/{change['id']}/approve", json={"reviewer": "someone"})
    assert by_stranger.status_code == 403
    assert "approver role" in by_stranger.json()["detail"]
    approved = client.post(f"/changes/{change['id']}/approve", json={"reviewer": REVIEWER})
    assert approved.status_code == 200 and approved.json()["status"] == "approved"

    # --- shadow mode: decided beside the active version, never returned -------------------
    live = triage_call(client, 146)
    assert acuity_of(live) == "Urgent"  # the active version answers
    assert client.app.state.container.running.shadow.join(timeout=60)  # type: ignore[attr-defined]
    shadow = client.get(f"/changes/{change['id']}").json()["shadow"]
    assert (shadow["runs"], shadow["agree"], shadow["disagree"]) == (1, 0, 1)
    assert shadow["disagreements"][0]["after"]["decision"]["value"] == "Immediate"

    # --- activation: new hook calls use and record the new version ------------------------
    active = client.post(f"/changes/{change['id']}/activate", json={"actor": REVIEWER})
    assert active.status_code == 200 and active.json()["status"] == "active"
    after = triage_call(client, 145)
    assert acuity_of(after) == "Immediate"
    assert _recorded(engine, after["runId"]) == ("1.6.0", change["candidateDigest"])
    served = _triage(client)
    assert (served["version"], served["digest"], served["change"]) == (
        "1.6.0",
        change["candidateDigest"],
        change["id"],
    )

    # --- rollback restores the release -----------------------------------------------------
    rolled = client.post("/deployments/triage/rollback", json={"actor": REVIEWER})
    assert rolled.status_code == 200 and rolled.json()["status"] == "superseded"
    again = triage_call(client, 145)
    assert acuity_of(again) == "Urgent"
    assert _recorded(engine, again["runId"]) == ("1.5.0", release["digest"])
    nothing = client.post("/deployments/triage/rollback", json={"actor": REVIEWER})
    assert nothing.status_code == 409 and "release files" in nothing.json()["detail"]

    history = [e["state"] for e in client.get(f"/changes/{change['id']}").json()["events"]]
    assert history[0] == "proposed" and history[1:3] == ["proposed", "replayed"]
    assert history[-3:] == ["approved", "active", "superseded"]
    statuses = sorted(c["status"] for c in client.get("/changes").json()["changes"])
    assert statuses == ["refused", "refused", "refused", "refused", "superseded"]


def test_an_activation_reaches_another_service_instance_on_the_same_database(
    make_app_client: OpenClient, triage_file: Path, engine: Engine
) -> None:
    settings = {"ontology_paths": [triage_file], "change_approvers": [REVIEWER]}
    with make_app_client(**settings) as first, make_app_client(**settings) as second:
        triage_call(second, 145)  # the second instance has served the release
        base = _triage(first)["digest"]
        text = _threshold_change(triage_file.read_text())
        change = _propose(first, "triage.ttl", text, base).json()
        assert first.post(f"/changes/{change['id']}/replay", json={"actor": AUTHOR}).is_success
        assert first.post(
            f"/changes/{change['id']}/approve", json={"reviewer": REVIEWER}
        ).is_success
        assert first.post(f"/changes/{change['id']}/activate", json={"actor": REVIEWER}).is_success

        answered = triage_call(second, 145)  # found the version moved when storing: ran again
        assert acuity_of(answered) == "Immediate"
        assert _recorded(engine, answered["runId"])[0] == "1.6.0"
