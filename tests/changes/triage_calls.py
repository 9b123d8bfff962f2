"""Triage hook calls with one heart rate and otherwise normal vital signs, for change tests."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.cds import clinical as fx

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
