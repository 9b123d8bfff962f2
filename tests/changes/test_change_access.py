"""Who may do what to a change: over HTTP with client JWTs the approver role is a scope and the
author is the caller; on the command line every step prints one JSON object and exits non-zero
when refused; a model may draft a change from clinicians' override reasons, which then needs the
same policy, replay and human approval."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.changes.control import APPROVE_SCOPE
from tests.changes.triage_calls import THRESHOLD_FROM, THRESHOLD_TO, triage_request
from tests.support.client_jwt import ISSUERS, bearer

ROOT = Path(__file__).resolve().parents[2]
BASE = "https://cds.example.test"
OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _changed_triage(text: str) -> str:
    return text.replace(THRESHOLD_FROM, THRESHOLD_TO).replace(
        'owl:versionInfo "1.5.0"', 'owl:versionInfo "1.6.0"'
    )


def _bearer(path: str, sub: str, scope: str | None = None) -> dict[str, str]:
    return bearer(BASE + path, sub, scope)


def test_over_http_the_approver_role_is_a_jwt_scope_and_the_author_is_the_caller(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    triage = Path(shutil.copy(ROOT / "ontologies/triage.ttl", tmp_path / "triage.ttl"))
    issuers = ISSUERS
    with make_app_client(
        ontology_paths=[triage], trusted_issuers=issuers, public_base_url=BASE
    ) as client:
        assert client.get("/deployments").status_code == 401  # a client JWT is required
        base = client.get("/deployments", headers=_bearer("/deployments", "alice")).json()
        envelope = {
            "deployment": "triage",
            "baseDigest": base["deployments"][0]["digest"],
            "files": [{"path": "triage.ttl", "content": _changed_triage(triage.read_text())}],
            "author": "mallory",
            "rationale": "",
        }
        posing = client.post("/changes", json=envelope, headers=_bearer("/changes", "alice"))
        assert posing.status_code == 403  # the author is whoever calls
        envelope["author"] = "alice"
        change = client.post("/changes", json=envelope, headers=_bearer("/changes", "alice"))
        assert change.status_code == 201, change.text
        cid = change.json()["id"]
        replay = f"/changes/{cid}/replay"
        assert client.post(replay, json={}, headers=_bearer(replay, "alice")).status_code == 200

        approve = f"/changes/{cid}/approve"
        own = client.post(approve, headers=_bearer(approve, "alice", APPROVE_SCOPE))
        assert own.status_code == 403 and "author cannot approve" in own.json()["detail"]
        unscoped = client.post(approve, headers=_bearer(approve, "bob", "user/*.read"))
        assert unscoped.status_code == 403 and APPROVE_SCOPE in unscoped.json()["detail"]
        by_bob = client.post(approve, headers=_bearer(approve, "bob", APPROVE_SCOPE))
        assert by_bob.status_code == 200, by_bob.text
        events = by_bob.json()["events"]
        assert (events[-1]["state"], events[-1]["actor"]) == ("approved", "bob")


def _horismos(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cli = Path(sys.executable).parent / "horismos"
    return subprocess.run(
        [str(cli), *args],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}, **env},
        timeout=300,
        check=False,
    )


def test_every_change_command_prints_one_json_object_and_exits_one_when_refused(
    sqlite_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    folder = tmp_path / "deployments"
    folder.mkdir()
    triage = Path(shutil.copy(ROOT / "ontologies/triage.ttl", folder / "triage.ttl"))
    env = {
        "HORISMOS_DATABASE_URL": f"sqlite:///{database}",
        "HORISMOS_ONTOLOGY_PATHS": str(triage),
        "HORISMOS_CHANGE_APPROVERS": '["dr-reviewer"]',
    }
    edited = tmp_path / "edited" / "triage.ttl"
    edited.parent.mkdir()
    edited.write_text(_changed_triage(triage.read_text()))

    def step(*args: str) -> tuple[int, dict[str, Any]]:
        done = _horismos("change", *args, "--json", env=env)
        assert done.stdout.strip(), done.stderr
        return done.returncode, json.loads(done.stdout)

    code, proposed = step("propose", str(edited), "--author", "dr-author", "--note", "why")
    assert (code, proposed["status"], proposed["candidateVersion"]) == (0, "proposed", "1.6.0")
    cid = proposed["id"]
    code, replayed = step("replay", cid, "--last", "10")
    assert (code, replayed["id"], replayed["status"], replayed["changed"]) == (
        0,
        cid,
        "replayed",
        [],
    )
    code, refused = step("approve", cid, "--reviewer", "dr-author")
    assert (code, refused["id"], refused["status"]) == (1, cid, "replayed")
    assert "author cannot approve" in refused["reason"]
    code, approved = step("approve", cid, "--reviewer", "dr-reviewer")
    assert (code, approved["status"]) == (0, "approved")
    code, active = step("activate", cid, "--by", "dr-reviewer")
    assert (code, active["status"]) == (0, "active")
    listed = _horismos("deployments", "--json", env=env)
    (served,) = json.loads(listed.stdout)["deployments"]
    assert (served["version"], served["change"]) == ("1.6.0", cid)
    code, rolled = step("rollback", "triage")
    assert (code, rolled["id"], rolled["status"]) == (0, cid, "superseded")

    stranger = tmp_path / "med-safety.ttl"
    shutil.copy(ROOT / "ontologies/med-safety.ttl", stranger)
    code, outside = step("propose", str(stranger), "--author", "x", "--deployment", "triage")
    assert (code, outside["status"]) == (1, "refused")
    assert "outside deployment triage" in outside["reason"]
    code, unknown = step("show", "no-such-change")
    assert (code, unknown["id"], unknown["status"]) == (1, "no-such-change", "unknown")


@pytest.fixture
def draft_script(tmp_path: Path) -> Path:
    text = _changed_triage((ROOT / "ontologies/triage.ttl").read_text())
    script = tmp_path / "bridge.json"
    answer = {
        "files": [{"path": "triage.ttl", "content": text}],
        "rationale": "Overrides say 140-150/min was treated as immediate anyway.",
    }
    script.write_text(json.dumps({"extract": [{"output": answer, "confidence": 0.7}]}))
    return script


def test_a_model_drafts_a_change_from_override_reasons_and_a_human_still_decides(
    make_app_client: OpenClient, draft_script: Path, tmp_path: Path
) -> None:
    triage = Path(shutil.copy(ROOT / "ontologies/triage.ttl", tmp_path / "triage.ttl"))
    with make_app_client(
        ontology_paths=[triage], bridge_model=f"mock:{draft_script}", change_approvers=["dr-b"]
    ) as client:
        nothing = client.post("/changes/draft", json={"service": "horismos-triage"})
        assert nothing.status_code == 409 and "override reason" in nothing.text
        answer = client.post("/cds-services/horismos-triage", json=triage_request(146)).json()
        card = answer["cards"][0]["uuid"]
        feedback = {
            "feedback": [
                {
                    "card": card,
                    "outcome": "overridden",
                    "outcomeTimestamp": "2026-11-30T10:00:00Z",
                    "overrideReason": {
                        "reason": {"code": "too-low", "display": "Acuity too low for 146/min"},
                        "userComment": "treated as immediate",
                    },
                }
            ]
        }
        stored = client.post("/cds-services/horismos-triage/feedback", json=feedback)
        assert stored.status_code == 200, stored.text

        drafted = client.post("/changes/draft", json={"service": "horismos-triage"})
        assert drafted.status_code == 201, drafted.text
        change = drafted.json()
        assert (change["status"], change["origin"]) == ("proposed", "drafted")
        assert change["author"].startswith("model mock:")
        assert change["policy"]["passed"] and change["candidateVersion"] == "1.6.0"
        bridge = client.app.state.container.running.runner.default_bridge  # type: ignore[attr-defined]
        (request,) = [c for c in bridge.calls if c["op"] == "extract"]
        assert "Acuity too low for 146/min" in request["text"]
        assert "treated as immediate" in request["text"]
        # against the card's declaration, the rules of its proof and the version it ran on
        assert (
            f'- card "{answer["cards"][0]["summary"]}" (rules UrgentTachycardia; '
            "version 1.5.0), overridden: Acuity too low for 146/min; too-low; treated as immediate"
        ) in request["text"]

        cid = change["id"]
        assert client.post(f"/changes/{cid}/replay", json={"actor": "dr-b"}).status_code == 200
        approved = client.post(f"/changes/{cid}/approve", json={"reviewer": "dr-b"})
        assert approved.status_code == 200  # a human approves what the model wrote
