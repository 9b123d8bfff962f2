"""The benchmark's opioid request answers what its README says, on the day the test runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.cds.card_markdown import decision_record_text
from tests.support.date_roller import roll
from tests.support.opioid_examples import deployed_services

BENCH = Path(__file__).resolve().parents[2] / "bench" / "data"
SERVICE = "opioidcds-08"


@pytest.fixture
def client(sqlite_template: Path, tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as app_client:
        yield app_client


@pytest.mark.xfail(
    SERVICE not in deployed_services(),
    strict=True,
    raises=AssertionError,
    reason=f"{SERVICE} is not deployed yet",
)
def test_two_active_opioids_and_a_draft_patch_answer_one_warning(client: TestClient) -> None:
    request = json.loads((BENCH / "opioidcds-08-two-active-opioids.json").read_text())
    request = roll(request, datetime.now(UTC).date())
    request["hookInstance"] = "6f1d8c2e-4b7a-4c1e-9a53-2f0e6b8d4c11"

    response = client.post(f"/cds-services/{SERVICE}", json=request)

    assert response.status_code == 200, response.text
    assert [card["indicator"] for card in response.json()["cards"]] == ["warning"]


PATIENT_VIEW = "opioidcds-10-patient-view"


@pytest.mark.xfail(
    PATIENT_VIEW not in deployed_services(),
    strict=True,
    raises=AssertionError,
    reason=f"{PATIENT_VIEW} is not deployed yet",
)
def test_several_screenings_answer_one_unexpected_results_card(client: TestClient) -> None:
    request = json.loads((BENCH / "opioidcds-10-patient-view-several-screenings.json").read_text())
    request = roll(request, datetime.now(UTC).date())

    response = client.post(f"/cds-services/{PATIENT_VIEW}", json=request)

    assert response.status_code == 200, response.text
    cards = response.json()["cards"]
    assert [card["indicator"] for card in cards] == ["warning"]
    assert "unexpected" in cards[0]["summary"]
    # the proof names the finding that decided it, with its screen's code and day: on the
    # decision record behind the card's link
    detail = decision_record_text(client, cards[0])
    assert "Unexpected result (Observation): cocaine found" in detail
    assert "Observation code (Observation): LOINC 3394-4" in detail
