"""Order-sign answered ahead (``app.cds.ahead``), end to end over the opioid deployments and a real
FHIR server: the order-select call for a patient and draft orders computes what each opioid
order-sign service would answer; the order-sign call with the same input answers from it, as a
run of its own that names the one it reused; any change in a draft, a source version or the
time since recomputes. Every call goes through HTTP as an EHR makes it."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.main import create_app
from app.settings import Settings
from tests.support.fhir_server import FhirServer
from tests.support.opioid_examples import CASES_DIR, ehr_prefetch, load_examples, prepare

pytestmark = pytest.mark.fhirserver

EXT = "dev.horismos.run"
SIGN = "opioidcds-06"  # recommendation 6: a draft for acute pain over 7 days gets a warning
SELECT = "opioidcds-11-order-select"
[EIGHT_DAYS] = [c for c in load_examples(CASES_DIR) if c.name == "rec-06-eight-days"]


def _templates(client: TestClient, service_id: str) -> dict[str, str]:
    services = client.get("/individual/cds-services").json()["services"]
    return next(s for s in services if s["id"] == service_id).get("prefetch") or {}


@pytest.fixture
def each_backend(database_url: str) -> Iterator[TestClient]:
    """The service on SQLite and on PostgreSQL (the reuse is one transaction of its own)."""
    with TestClient(create_app(Settings(database_url=database_url))) as app_client:
        yield app_client


@pytest.fixture
def chart(fhir_server: FhirServer) -> dict[str, Any]:
    """The eight-days case's patient stored on the FHIR server, and its order-sign context."""
    prepared = prepare(EIGHT_DAYS, datetime.now(UTC).date(), tag=fhir_server.new_id()[:6] + "-")
    for resource in prepared.stored:
        fhir_server.store_as_of(resource)
    return dict(prepared.request["context"])


def _order_select(client: TestClient, fhir: FhirServer, context: dict[str, Any]) -> None:
    drafts = [e["resource"] for e in context["draftOrders"]["entry"]]
    select_context = {
        **context,
        "selections": [f"MedicationRequest/{d['id']}" for d in drafts],
    }
    response = client.post(
        f"/cds-services/{SELECT}",
        json={
            "hook": "order-select",
            "hookInstance": str(uuid.uuid4()),
            "fhirServer": fhir.base_url,
            "context": select_context,
            "prefetch": ehr_prefetch(_templates(client, SELECT), select_context, fhir),
        },
    )
    assert response.status_code == 200, response.text


def _order_sign(
    client: TestClient,
    fhir: FhirServer,
    context: dict[str, Any],
    hook_instance: str | None = None,
    service: str = SIGN,
) -> Any:
    response = client.post(
        f"/cds-services/{service}",
        json={
            "hook": "order-sign",
            "hookInstance": hook_instance or str(uuid.uuid4()),
            "fhirServer": fhir.base_url,
            "context": context,
            "prefetch": ehr_prefetch(_templates(client, service), context, fhir),
        },
    )
    assert response.status_code == 200, response.text
    return response


def _summaries(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["indicator"], c["summary"]) for c in body["cards"]]


def test_order_sign_answers_from_the_run_computed_at_order_select(
    each_backend: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    client = each_backend
    fresh = _order_sign(client, fhir_server, chart).json()  # no order-select: computed here
    assert "reusedRun" not in fresh["extension"][EXT]

    _order_select(client, fhir_server, chart)
    first = _order_sign(client, fhir_server, chart)
    answer = first.json()
    ext = answer["extension"][EXT]

    reused = ext["reusedRun"]
    assert reused != ext["runId"] != fresh["extension"][EXT]["runId"]
    # the same decision and cards as the call computed afresh, each card under a uuid of its own
    assert ext["decision"] == fresh["extension"][EXT]["decision"]
    assert _summaries(answer) == _summaries(fresh) and answer["cards"]
    assert [c["indicator"] for c in answer["cards"]] == ["warning"]
    ahead = client.get(f"/runs/{reused}").json()
    assert ahead["runId"] == reused
    # the card links to the record of the run that answered, which names the one it reused
    links = [link["url"] for c in answer["cards"] for link in c.get("links", [])]
    assert links and all(ext["runId"] in u and reused not in u for u in links)
    record = client.get(f"/runs/{ext['runId']}").json()
    assert record["runId"] == ext["runId"]
    assert record["reusedRun"] == reused
    assert record["trace"] == ahead["trace"] and record["sources"] == ahead["sources"]
    assert ahead["answeredAhead"] is True and "reusedRun" not in ahead
    # the decision record a clinician opens from the card says where the answer came from
    page = client.get(f"/runs/{ext['runId']}", headers={"accept": "text/html"}).text
    assert "Answered ahead: from the decision computed at order-select" in page
    assert f'href="{reused}"' in page
    ahead_page = client.get(f"/runs/{reused}", headers={"accept": "text/html"}).text
    assert "Computed ahead, at order-select" in ahead_page and "Answered ahead" not in ahead_page

    # recommendation 7 reads procedures too, which order-select did not prefetch: computed ahead
    # with them read from the FHIR server, and reused by its order-sign call all the same
    other = _order_sign(client, fhir_server, chart, service="opioidcds-07").json()
    assert "reusedRun" in other["extension"][EXT]

    # a retry of the order-sign hookInstance gets that answer again, byte for byte
    hook_instance = str(uuid.uuid4())
    once = _order_sign(client, fhir_server, chart, hook_instance)
    again = _order_sign(client, fhir_server, chart, hook_instance)
    assert again.content == once.content

    # feedback on a reused card is stored against the run that answered
    feedback = client.post(
        f"/cds-services/{SIGN}/feedback",
        json={
            "feedback": [
                {
                    "card": answer["cards"][0]["uuid"],
                    "outcome": "overridden",
                    "outcomeTimestamp": datetime.now(UTC).isoformat(),
                }
            ]
        },
    )
    assert feedback.status_code == 200, feedback.text
    assert feedback.json()["stored"] == 1


def test_a_changed_draft_order_is_computed_afresh(
    client: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    _order_select(client, fhir_server, chart)
    changed = copy.deepcopy(chart)
    draft = changed["draftOrders"]["entry"][0]["resource"]
    draft["dispenseRequest"]["expectedSupplyDuration"]["value"] = 5  # acute, under 7 days

    answer = _order_sign(client, fhir_server, changed).json()

    assert "reusedRun" not in answer["extension"][EXT]
    assert answer["cards"] == []  # what 5 days decides, not what 8 days did


def test_a_changed_source_version_is_computed_afresh(
    client: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    _order_select(client, fhir_server, chart)
    patient_id = str(chart["patientId"]).split("/")[-1]
    patient = fhir_server.read("Patient", patient_id)
    patient.pop("meta", None)
    assert fhir_server.update(patient).status_code == 200  # a new version, same content

    answer = _order_sign(client, fhir_server, chart).json()

    assert "reusedRun" not in answer["extension"][EXT]
    assert [c["indicator"] for c in answer["cards"]] == ["warning"]


def test_an_answer_computed_ahead_is_not_used_past_its_time(
    client: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    _order_select(client, fhir_server, chart)
    deps = client.app.state.container.running.hooks.deps  # type: ignore[attr-defined]
    window = deps.answer_ahead_seconds
    deps.answer_ahead_seconds = 1e-6  # the order-sign call comes after it
    try:
        answer = _order_sign(client, fhir_server, chart).json()
    finally:
        deps.answer_ahead_seconds = window
    assert "reusedRun" not in answer["extension"][EXT]
    assert [c["indicator"] for c in answer["cards"]] == ["warning"]


def _fired(client: TestClient) -> int:
    report = client.get("/analytics", params={"service": SIGN}).json()
    return sum(int(s["fired"]) for s in report["services"])


def test_runs_computed_ahead_are_not_counted_as_cards_shown(
    client: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    before = _fired(client)
    _order_select(client, fhir_server, chart)  # computes a warning card ahead, shown to nobody
    assert _fired(client) == before
    _order_sign(client, fhir_server, chart)  # shows it
    assert _fired(client) == before + 1


def test_a_run_computed_ahead_that_did_not_decide_is_computed_afresh(
    client: TestClient, fhir_server: FhirServer, chart: dict[str, Any]
) -> None:
    # the draft's supply duration has no unit code: its days of supply are unknown, so
    # recommendation 6 does not decide; order-sign computes afresh rather than reuse that
    unknown = copy.deepcopy(chart)
    draft = unknown["draftOrders"]["entry"][0]["resource"]
    del draft["dispenseRequest"]["expectedSupplyDuration"]["code"]
    _order_select(client, fhir_server, unknown)
    engine = client.app.state.container.running.engine  # type: ignore[attr-defined]
    with engine.connect() as connection:
        kept = connection.execute(
            text("SELECT count(*) FROM runs WHERE service_id = :s AND ahead_key = 'undecided'"),
            {"s": SIGN},
        ).scalar_one()
    assert kept >= 1  # computed ahead, stored, not reusable

    answer = _order_sign(client, fhir_server, unknown).json()

    assert "reusedRun" not in answer["extension"][EXT]
    assert [c["summary"] for c in answer["cards"]] == [
        "Opioid guideline 6 check not completed: data missing"
    ]
