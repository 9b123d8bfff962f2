"""What a card's detail tells the reader about how the run ended."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def _triage(reason: str | None, heart_rate: float | None) -> dict[str, Any]:
    pid, eid = fx.new_id(), fx.new_id()
    vitals = [fx.observation(pid, "8867-4", heart_rate, "/min")] if heart_rate else []
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid, reason),
            "vitals": fx.searchset(vitals),
            "conditions": fx.searchset([]),
        },
    )


def test_escalation_says_which_step_failed_and_still_shows_the_rules_proof(
    client: TestClient,
) -> None:
    """Free text with no Bridge: the run escalates, and the card says why, then what the
    structured data alone derive."""
    body = client.post("/cds-services/horismos-triage", json=_triage("chest pain", 160)).json()
    [card] = body["cards"]
    # what the structured data decided leads, as red as it is; the text is said to be unread
    assert card["indicator"] == "critical"
    assert card["summary"] == "Triage not completed, the rules give Immediate: a nurse must assess"
    first, second, *_rest = card["detail"].split("\n\n")
    # the card leads with what the structured data decided and the fact that decided it
    assert first.startswith(
        "On the structured data the rules give **Immediate**: Heart rate above 150 /min: "
        "heart rate 160 /min"
    ), first
    assert first.endswith("A triage nurse must assess the patient."), first
    assert second == (
        "Reading the presenting complaint could not be completed (no language model is "
        "configured), so the free text was not used: what follows is from the structured data "
        "alone, and the workflow ended at: Escalation to the triage nurse."
    )
    # the proof is on the decision record behind the card's link
    record = decision_record_text(client, card)
    assert "Acuity: Immediate" in record and "Heart rate above 150 /min" in record, record[:2000]


def test_escalation_without_data_lists_what_is_missing(client: TestClient) -> None:
    body = client.post("/cds-services/horismos-triage", json=_triage("chest pain", None)).json()
    [card] = body["cards"]
    assert (card["indicator"], card["summary"]) == ("warning", "Triage needs a nurse's assessment")
    assert "No acuity was decided. Missing data:" in card["detail"]
    assert "heart rate" in card["detail"]


def test_a_write_that_was_not_possible_is_not_reported_as_a_failure(client: TestClient) -> None:
    """No FHIR server in the request: the queue could not be written, which is not an error the
    clinician must read about; the decision stands on the card."""
    body = client.post("/cds-services/horismos-triage", json=_triage(None, 160)).json()
    [card] = body["cards"]
    assert card["indicator"] == "critical"
    assert card["detail"].startswith("**Immediate**: Heart rate above 150 /min")
    assert "Acuity: Immediate" in decision_record_text(client, card)
    assert "FHIR server" not in card["detail"]
    assert "Not completed" not in card["detail"]
    assert "EHR" not in card["detail"]


def test_a_write_with_no_fhir_server_is_an_effect_of_its_own_not_sent(
    client: TestClient,
) -> None:
    body = _triage(None, 160)
    answer = client.post("/cds-services/horismos-triage", json=body).json()
    run_id = answer["extension"]["dev.horismos.run"]["runId"]

    record = client.get(f"/runs/{run_id}").json()

    [effect] = record["effects"]
    assert effect["state"] == "not sent"
    assert effect["detail"] == "the request names no FHIR server to write to"
    assert effect["target"] == f"Encounter/{body['context']['encounterId']}"
    assert (effect["operation"], effect["element"], effect["value"]) == (
        "patch",
        "priority",
        "Immediate",
    )
    page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"}).text
    assert "not sent — the request names no FHIR server to write to" in page
