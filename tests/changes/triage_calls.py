"""Triage hook calls with one heart rate and otherwise normal vital signs, for change tests."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi.testclient import TestClient

from tests.cds import clinical as fx

#: the approver the change tests serve with, and an author who is not one
REVIEWER, AUTHOR = "dr-reviewer", "dr-author"

#: The rule a threshold change edits: a heart rate above 150/min is Immediate …
THRESHOLD_FROM = "horis:property :heartRate ; horis:greaterThan 150"
#: … and, in the change, above 140/min.
THRESHOLD_TO = "horis:property :heartRate ; horis:greaterThan 140"


def triage_request(heart_rate: float) -> dict[str, Any]:
    pid = "p-" + fx.new_id()
    eid = "e-" + fx.new_id()
    vitals = [
        fx.observation(pid, "8867-4", heart_rate, "/min"),
        fx.observation(pid, "9279-1", 16, "/min"),
        fx.observation(pid, "59408-5", 98, "%"),
        fx.observation(pid, "8480-6", 125, "mm[Hg]"),
        fx.observation(pid, "8310-5", 37.0, "Cel"),
    ]
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset(vitals),
            "conditions": fx.searchset([]),
        },
    )


def triage_call(client: TestClient, heart_rate: float) -> dict[str, Any]:
    """The hook's run extension (``runId``, ``decision`` …) of one call."""
    answer = client.post("/cds-services/horismos-triage", json=triage_request(heart_rate))
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()["extension"]["dev.horismos.run"]
    return run


def acuity_of(run: dict[str, Any]) -> str | None:
    decision = run.get("decision")
    return str(decision["value"]) if decision else None


class _Http(Protocol):
    """A TestClient or an ``httpx.Client`` with a base URL."""

    def get(self, url: str, **kwargs: Any) -> Any: ...

    def post(self, url: str, **kwargs: Any) -> Any: ...


def threshold_change(text: str) -> str:
    """triage.ttl with the heart-rate threshold lowered, as version 1.6.0."""
    assert THRESHOLD_FROM in text and 'owl:versionInfo "1.5.0"' in text
    return text.replace(THRESHOLD_FROM, THRESHOLD_TO).replace(
        'owl:versionInfo "1.5.0"', 'owl:versionInfo "1.6.0"'
    )


def approve_threshold_change(
    client: _Http, text: str, *, author: str, reviewer: str, path: str = "triage.ttl"
) -> dict[str, Any]:
    """Propose the threshold change to deployment triage (whose file reads ``text``), replay it
    and approve it: from now on it decides in shadow mode. Returns the change."""
    deployments = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
    proposed = client.post(
        "/changes",
        json={
            "deployment": "triage",
            "baseDigest": deployments["triage"]["digest"],
            "files": [{"path": path, "content": threshold_change(text)}],
            "author": author,
            "rationale": "Tachycardia above 140/min is an emergency in our ED.",
        },
    )
    assert proposed.status_code == 201, proposed.text
    change: dict[str, Any] = proposed.json()
    replayed = client.post(f"/changes/{change['id']}/replay", json={"last": 20, "actor": author})
    assert replayed.status_code == 200, replayed.text
    approved = client.post(f"/changes/{change['id']}/approve", json={"reviewer": reviewer})
    assert approved.status_code == 200 and approved.json()["status"] == "approved", approved.text
    return change
