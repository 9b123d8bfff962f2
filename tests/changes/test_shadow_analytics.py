"""A change in shadow mode in the analytics report, over HTTP (both backends): an approved
triage change decides beside the active version on live hook calls, and ``GET /analytics``
shows, under the triage service, the runs compared, how many it agreed and disagreed on, and the
cards that would have differed with both decisions; a window that ends before those runs shows
no comparison for them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, update

from app.store import Run, session_scope
from app.store.models import utcnow
from tests.changes.triage_calls import (
    AUTHOR,
    REVIEWER,
    approve_threshold_change,
    triage_call,
    triage_request,
)

ROOT = Path(__file__).resolve().parents[2]
OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _triage(report: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [s for s in report["services"] if s["service"] == "horismos-triage"]
    return entry


def test_the_report_shows_a_shadow_changes_agreement_with_the_active_version(
    client: TestClient, triage_file: Path, engine: Engine
) -> None:
    before_change = triage_call(client, 146)  # answered before the change existed: not compared
    change = approve_threshold_change(
        client, triage_file.read_text(), author=AUTHOR, reviewer=REVIEWER
    )
    live = [triage_call(client, rate) for rate in (145, 148, 80, 160)]
    assert [r["decision"]["value"] for r in live] == ["Urgent", "Urgent", "NonUrgent", "Immediate"]
    assert client.app.state.container.running.shadow.join(timeout=60)  # type: ignore[attr-defined]

    report = client.get("/analytics", headers={"Accept": "application/json"}).json()
    (shadow,) = _triage(report)["shadow"]
    assert shadow == {
        "change": change["id"],
        "version": "1.6.0",
        "status": "approved",
        "runs": 4,
        "agreed": 2,
        "disagreed": 2,
        "errors": 0,
        "differed": [
            {
                "card": "Triage acuity: Urgent",
                "label": "Triage acuity: Urgent",
                "active": "Urgent",
                "change": "Immediate",
                "runs": 2,
            }
        ],
    }
    assert before_change["runId"] not in str(shadow)

    # the same window as the rest of the report: runs older than it are not compared
    with session_scope(engine) as session:
        old = utcnow() - timedelta(days=10)
        session.execute(update(Run).where(Run.id == live[0]["runId"]).values(created_at=old))
    week = client.get("/analytics?days=7", headers={"Accept": "application/json"}).json()
    (recent,) = _triage(week)["shadow"]
    assert (recent["runs"], recent["disagreed"], recent["differed"][0]["runs"]) == (3, 1, 1)

    page = client.get("/analytics", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert "Change 1.6.0 in shadow mode: agreement with the active version" in page.text


def test_a_service_without_a_change_in_shadow_mode_lists_none(client: TestClient) -> None:
    triage_call(client, 80)
    report = client.get("/analytics", headers={"Accept": "application/json"}).json()
    assert _triage(report)["shadow"] == []


def _apply_body(request: dict[str, Any]) -> dict[str, Any]:
    """The same chart as an ``$apply`` call on the triage service would send it."""
    prefetch = request["prefetch"]
    records = [prefetch["patient"], prefetch["encounter"]]
    for key in ("vitals", "conditions"):
        records += [e["resource"] for e in prefetch[key].get("entry", [])]
    context = request["context"]
    return {
        "resourceType": "Parameters",
        "parameter": [
            {"name": "subject", "valueString": f"Patient/{context['patientId']}"},
            {"name": "encounter", "valueString": f"Encounter/{context['encounterId']}"},
            {
                "name": "data",
                "resource": {
                    "resourceType": "Bundle",
                    "type": "collection",
                    "entry": [{"resource": r} for r in records],
                },
            },
        ],
    }


def test_an_apply_run_is_recorded_but_not_compared_in_shadow_mode(
    client: TestClient, triage_file: Path
) -> None:
    """Shadow agreement is read from live calls: an $apply call's chart need not be one."""
    approve_threshold_change(client, triage_file.read_text(), author=AUTHOR, reviewer=REVIEWER)
    applied = client.post(
        "/fhir/PlanDefinition/horismos-triage/$apply", json=_apply_body(triage_request(145))
    )
    assert applied.status_code == 200, applied.text
    group = applied.json()["entry"][0]["resource"]
    assert "runId" in group["extension"][0]["valueString"]  # recorded
    live = triage_call(client, 145)  # the complete twin: a live call is compared
    assert live["decision"]["value"] == "Urgent"
    assert client.app.state.container.running.shadow.join(timeout=60)  # type: ignore[attr-defined]
    report = client.get("/analytics", headers={"Accept": "application/json"}).json()
    (shadow,) = _triage(report)["shadow"]
    assert (shadow["runs"], shadow["disagreed"]) == (1, 1)
