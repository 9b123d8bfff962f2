"""The run page: what a clinician sees after following a card's link to ``/runs/{id}``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient

from app.api.run_page import RunPage, prefers_html, proof_text, render_run_page
from app.store.db import session_scope
from app.store.models import SourceVersion
from tests.runtime.conftest import CHEST_PAIN, TRIAGE
from tests.support.effects import log_effect

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


def _run(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/workflows/Triage/runs", json=body)
    assert answer.status_code == 200, answer.text
    outcome: dict[str, Any] = answer.json()
    return outcome


def test_a_browser_gets_the_decision_record_page(client: TestClient) -> None:
    outcome = _run(client, CHEST_PAIN)

    page = client.get(f"/runs/{outcome['runId']}", headers={"Accept": BROWSER})

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["vary"] == "Accept"
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    text = page.text
    clinician, auditor = text.split('<h2 id="for-auditor">', 1)
    # for the clinician: the decision as the headline, why in the ontology's words
    assert '<p class="decision">Acuity: Immediate</p>' in clinician
    assert "Heart rate: 130 /min" in clinician and "Has symptom: Chest pain" in clinician
    assert "Also met, ranked lower: Urgent" in clinician
    assert "isA" not in clinician and "heartRate" not in clinician
    # for the auditor: the versions, the engine's proof with provenance, every step of the trace
    assert "Triage version 1.3.0" in auditor and "Done" in auditor
    assert "heartRate = 130 /min" in auditor and "hasSymptom → s1 isA ChestPain" in auditor
    assert '<span class="tag src">[api]</span>' in auditor
    assert "overrules acuity = Urgent" in auditor
    for step in ("Intake", "Assess", "Route", "Explain", "Done"):
        assert f"<b>{step}</b>" in text
    assert "tool ehr.assign_queue" in text and ">proposed</span>" in text
    assert "<script" not in text.lower()


def test_api_clients_still_get_the_outcome_json(client: TestClient) -> None:
    outcome = _run(client, CHEST_PAIN)
    url = f"/runs/{outcome['runId']}"

    for accept in (None, "application/json", "*/*", "application/json, text/html;q=0.9"):
        headers = {"Accept": accept} if accept else {}
        answer = client.get(url, headers=headers)
        assert answer.headers["content-type"] == "application/json", accept
        assert answer.json() == outcome


def test_the_page_tree_carries_the_same_lines_as_the_rendered_proof(client: TestClient) -> None:
    outcome = _run(client, CHEST_PAIN)
    # With no Bridge the narration step records the proof rendered as text (Proof.render()).
    (explain,) = [e for e in outcome["trace"] if e["step"] == "Explain"]
    assert explain["narration"]["generated"] is False

    assert proof_text(outcome["proof"]) == explain["narration"]["text"]


def test_markup_in_ids_and_generated_narration_is_escaped(
    make_app_client: Callable[..., AbstractContextManager[TestClient]], tmp_path: Path
) -> None:
    script = tmp_path / "bridge.json"
    prose = '<script>alert("x")</script> Seen first.'
    script.write_text(json.dumps({"narrate": [{"output": prose, "confidence": 1.0}]}))
    body = {
        "instances": [
            {"id": "p1", "class": "Patient", "heartRate": 130, "hasSymptom": ["<script>s"]},
            {"id": "<script>s", "class": "ChestPain"},
        ]
    }
    with make_app_client(ontology_paths=[TRIAGE], bridge_model=f"mock:{script}") as client:
        outcome = _run(client, body)
        page = client.get(f"/runs/{outcome['runId']}", headers={"Accept": BROWSER})

    assert page.status_code == 200
    assert "<script" not in page.text.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; Seen first." in page.text
    assert "hasSymptom → &lt;script&gt;s isA ChestPain" in page.text
    # generated prose is marked as such
    assert "GENERATED TEXT" in page.text


def test_an_unknown_run_is_a_404_page_for_a_browser_and_json_for_clients(
    client: TestClient,
) -> None:
    page = client.get("/runs/<b>nope", headers={"Accept": BROWSER})

    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "Run not found" in page.text and "&lt;b&gt;nope" in page.text

    api = client.get("/runs/nope")
    assert api.status_code == 404 and api.json()["code"] == "not-found"


def test_an_undecided_run_says_so(client: TestClient) -> None:
    outcome = _run(client, {"instances": []})

    page = client.get(f"/runs/{outcome['runId']}", headers={"Accept": BROWSER})

    assert "No decision" in page.text and "EscalateToNurse" in page.text


def test_the_page_reads_the_stored_effects_and_source_versions(client: TestClient) -> None:
    # What a hook run stores beside its outcome: the writes it proposed and the versions it read.
    run_id = _run(client, CHEST_PAIN)["runId"]
    engine = client.app.state.container.running.engine  # type: ignore[attr-defined]
    log_effect(
        engine,
        run_id=run_id,
        effect_id="e1",
        tool="ehr.assign_queue",
        target="http://fhir.test/Encounter/enc-<1>",
        expected="4",
        state="accepted",
        response={"newVersion": "5"},
    )
    with session_scope(engine) as session:
        session.add(
            SourceVersion(
                run_id=run_id, resource_type="Observation", resource_id="hr-9", version_id="2"
            )
        )

    page = client.get(f"/runs/{run_id}", headers={"Accept": BROWSER})

    assert "http://fhir.test/Encounter/enc-&lt;1&gt;" in page.text
    assert '<span class="st ok">accepted</span>' in page.text and "<td>5</td>" in page.text
    assert "<td>Observation</td><td>hr-9</td><td>2</td>" in page.text


def test_effects_sources_and_fhir_provenance_are_shown() -> None:
    # A hook run's record: a base fact read from a FHIR resource, one EHR write, the versions read.
    leaf = {
        "subject": "pt",
        "property": "heartRate",
        "propertyIri": "urn:x#heartRate",
        "value": 130,
        "label": "heartRate = 130 /min",
        "provenance": "api",
        "tx": 1,
        "source": {"resourceType": "Observation", "id": "o<1>", "versionId": "3"},
    }
    document: dict[str, Any] = {
        "runId": "r1",
        "workflow": "Triage",
        "version": "1",
        "status": "completed",
        "terminal": "Done",
        "decision": {"property": "acuity", "value": "Urgent"},
        "proof": {
            "subject": "pt",
            "property": "acuity",
            "values": [
                {
                    "subject": "pt",
                    "property": "acuity",
                    "value": "Urgent",
                    "label": "acuity = Urgent",
                    "provenance": "rule",
                    "derivations": [
                        {"ruleName": "Fast", "expanded": True, "premises": [leaf], "absent": []}
                    ],
                }
            ],
        },
        "trace": [],
        "sources": [{"resourceType": "Observation", "id": "o<1>", "versionId": "3"}],
    }
    effect = {"tool": "ehr.assign", "target": "Encounter/e1", "state": "conflicted"}
    page = RunPage(
        document=document, created_at=datetime(2026, 3, 1, 12, tzinfo=UTC), effects=[effect]
    )

    html = render_run_page(replace(page, zone=ZoneInfo("Europe/Paris")))

    assert "heartRate = 130 /min  [api Observation/o&lt;1&gt; v3]" in proof_text_of(html)
    assert "<td>Observation/o&lt;1&gt; (version 3)</td>" in html  # the base facts table
    assert "Encounter/e1" in html and ">conflicted</span>" in html
    assert "Encounter/e1: not written: the record changed after it was read" in html
    assert "2026-03-01T12:00:00+00:00" in html  # the auditor's time, exact
    assert "1 Mar 2026 13:00 CET" in html  # the clinician's, in the configured zone
    # a proof stored before it carried labels reads with humanised names, no Confidence column
    assert "Heart rate: 130" in html and "Confidence" not in html
    assert proof_text(document["proof"]) == (
        "acuity = Urgent  [rule Fast]\n  heartRate = 130 /min  [api Observation/o<1> v3]"
    )


def proof_text_of(html: str) -> str:
    """The proof section's text without its markup (still escaped)."""
    section = html.split('<section class="card engine proof">', 1)[1].split("</section>", 1)[0]
    return re.sub(r"<[^>]+>", "", section)


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (BROWSER, True),
        ("text/html", True),
        ("application/json", False),
        ("*/*", False),
        ("", False),
        ("text/html;q=0.5, application/json", False),
        ("text/*, application/json;q=0.5", True),
        ("text/html;q=0, */*", False),
    ],
)
def test_html_is_served_only_when_it_is_preferred(accept: str, html: bool) -> None:
    assert prefers_html(accept) is html


def test_a_fact_two_derivations_rest_on_is_one_row_in_each_data_table() -> None:
    """The clinician's 'Data used' and the auditor's base facts list what was read, each once:
    not a derived statement, not a reading twice because two criteria rest on it."""
    leaf = {
        "subject": "pt",
        "property": "heartRate",
        "propertyIri": "urn:x#heartRate",
        "value": 130,
        "label": "heartRate = 130 /min",
        "provenance": "api",
        "source": {"resourceType": "Observation", "id": "o1", "versionId": "3"},
    }
    fast = {
        "subject": "pt",
        "property": "fast",
        "propertyIri": "urn:x#fast",
        "value": True,
        "label": "fast = true",
        "provenance": "rule",
        "derivations": [{"ruleName": "Fast", "premises": [leaf], "absent": []}],
    }
    document: dict[str, Any] = {
        "runId": "r1",
        "workflow": "Triage",
        "version": "1",
        "status": "completed",
        "terminal": "Done",
        "decision": {"property": "acuity", "value": "Urgent"},
        "proof": {
            "subject": "pt",
            "property": "acuity",
            "values": [
                {
                    "subject": "pt",
                    "property": "acuity",
                    "value": "Urgent",
                    "label": "acuity = Urgent",
                    "provenance": "rule",
                    "derivations": [
                        {"ruleName": "A", "premises": [fast, leaf], "absent": []},
                        {"ruleName": "B", "expanded": True, "premises": [leaf], "absent": []},
                    ],
                }
            ],
        },
        "trace": [],
    }
    html = render_run_page(RunPage(document=document, created_at=datetime(2026, 3, 1, tzinfo=UTC)))

    def rows_after(heading: str) -> list[str]:
        table = html.split(heading, 1)[1].split("</table>", 1)[0]
        return re.findall(r"<tr><td>(.*?)</tr>", table)

    (used,) = rows_after("<h3>Data used</h3>")
    assert "Heart rate" in used and "130" in used
    (base,) = rows_after("(the proof's leaves)")
    assert "<td>heartRate</td><td><b>130</b></td><td>api</td>" in base
