"""What the CDS Hooks Sandbox (the community's test client) sends, answered over HTTP.

The three requests in tests/data/cds/fixtures/*-cds-hooks-sandbox.json were captured from it:
each carries the prefetch the Sandbox fetched for one service, and the service reads the rest of
the patient's record from a real FHIR server on loopback. Every service whose hook the request
is for answers 200 with a valid response; none answers with an error the Sandbox would show as
"No recommendations — All clear!".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cds.response_check import check_response
from tests.cds.card_markdown import check_card, check_summary
from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.fhirserver

OpenClient = Callable[..., AbstractContextManager[TestClient]]
FIXTURES = Path(__file__).parents[1] / "data/cds/fixtures"
HOOKS = ("patient-view", "order-select", "order-sign")
#: the services that answer the Sandbox's order-sign request (oxycodone 10 mg, two a day, for a
#: patient with opioid and benzodiazepine orders on record) with a card, as the individual
#: discovery lists them; the others find nothing. Medication safety has no rule about opioids:
#: the order is outside its scope, and it says nothing
ORDER_SIGN_CARDS = {
    "opioidcds-04-05",
    "opioidcds-08",
    "opioidcds-09",
    "opioidcds-10-order-sign",
}
#: the default discovery combines them: one service, one card for the one order
ORDER_SIGN_COMBINED = {"opioidcds-order-sign"}
DISCOVERY = ("/cds-services", "/individual/cds-services")


def sandbox_request(hook: str, patient: str) -> dict[str, Any]:
    """The Sandbox's request for ``hook``, about ``patient`` (its demo patient renamed, so tests
    sharing the FHIR server never see each other's records)."""
    text = (FIXTURES / f"{hook}-request-cds-hooks-sandbox.json").read_text()
    body: dict[str, Any] = json.loads(text.replace("demo-1", patient))
    return body


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client() as c:
        yield c


@pytest.fixture
def patient(fhir_server: FhirServer) -> str:
    """The Sandbox's demo patient with everything its three requests prefetch, on the server."""
    pid = "sandbox-" + fhir_server.new_id()
    for hook in HOOKS:
        for value in sandbox_request(hook, pid)["prefetch"].values():
            entries = value.get("entry", []) if value["resourceType"] == "Bundle" else []
            for resource in [value] if not entries and "id" in value else []:
                fhir_server.create(resource)
            for entry in entries:
                fhir_server.create(entry["resource"])
    return pid


def services_for(client: TestClient, hook: str, discovery: str = "/cds-services") -> list[str]:
    """The services a Sandbox shows for ``hook``'s request: its own hook's, and for
    ``order-select`` also the ``order-sign`` services (an older hook they answer)."""
    hooks = {hook, "order-sign"} if hook == "order-select" else {hook}
    return [s["id"] for s in client.get(discovery).json()["services"] if s["hook"] in hooks]


def call(client: TestClient, fhir_server: FhirServer, hook: str, pid: str, sid: str) -> Any:
    body = sandbox_request(hook, pid)
    body["fhirServer"] = fhir_server.base_url
    return client.post(f"/cds-services/{sid}", json=body)


def stored_runs(client: TestClient, answer: Any) -> list[dict[str, Any]]:
    """The stored run of a service's answer, or of each service a combined one called."""
    ext = answer.json()["extension"]
    runs = ext.get("dev.horismos.runs") or [ext["dev.horismos.run"]]
    return [client.get(f"/runs/{run['runId']}").json() for run in runs]


def stored_run(client: TestClient, answer: Any) -> dict[str, Any]:
    [record] = stored_runs(client, answer)
    return record


@pytest.mark.parametrize("discovery", DISCOVERY)
@pytest.mark.parametrize("hook", HOOKS)
def test_every_service_answers_the_sandbox_with_a_valid_response(
    client: TestClient, fhir_server: FhirServer, patient: str, hook: str, discovery: str
) -> None:
    answered: dict[str, list[dict[str, Any]]] = {}
    for sid in services_for(client, hook, discovery):
        answer = call(client, fhir_server, hook, patient, sid)
        assert answer.status_code == 200, (sid, answer.text)
        assert check_response(answer.json()) == [], sid
        answered[sid] = answer.json()["cards"]
        for card in answered[sid]:  # every card within the budget a clinician reads at a glance
            check_card(card["detail"])
            check_summary(card["summary"])
            assert card["source"]["label"] and "ontology" not in card["source"]["label"]
            assert card["source"]["url"].startswith("https://"), card["source"]
    carded = {sid for sid, cards in answered.items() if cards}
    # patient-view: each service finds what it looks for; order-select: no drug is chosen yet,
    # so nothing is checked and no service shows a card
    signing = ORDER_SIGN_COMBINED if discovery == "/cds-services" else ORDER_SIGN_CARDS
    expected = {"order-sign": signing, "order-select": set()}.get(hook, set(answered))
    assert carded == expected


def test_a_draft_category_sent_as_one_object_is_read_as_a_list_with_a_note(
    client: TestClient, fhir_server: FhirServer, patient: str
) -> None:
    answer = call(client, fhir_server, "order-sign", patient, "opioidcds-04-05")

    assert answer.status_code == 200, answer.text
    summaries = [c["summary"] for c in answer.json()["cards"]]
    assert summaries and not any("not checked" in s for s in summaries)
    notes = [n for n in stored_run(client, answer)["dataQuality"] if n["rule"] == "single-as-list"]
    assert [n["field"] for n in notes] == ["context.draftOrders.entry[0].resource.category"]


def test_an_order_select_before_a_drug_is_chosen_warns_nothing_and_keeps_a_note(
    client: TestClient, fhir_server: FhirServer, patient: str
) -> None:
    """Rx View calls order-select before a drug is picked: there is nothing to check yet, so no
    service shows a card about the empty order (the prescriber would see a warning for every
    order they start); the run still notes that the order was left out."""
    for sid in services_for(client, "order-select"):
        answer = call(client, fhir_server, "order-select", patient, sid)

        assert answer.status_code == 200, (sid, answer.text)
        cards = answer.json()["cards"]
        assert not [c for c in cards if "request-123" in c["detail"]], (sid, cards)
        for run in stored_runs(client, answer):
            notes = run["dataQuality"]
            assert [n["received"] for n in notes if n["rule"] == "unread-draft-order"] == [
                "MedicationRequest/request-123"
            ], sid


def test_an_order_signed_with_no_drug_chosen_is_still_said_not_checked(
    client: TestClient, fhir_server: FhirServer, patient: str
) -> None:
    """The same empty order at signing: an answer without a card would read as all clear."""
    body = sandbox_request("order-select", patient)
    body["hook"] = "order-sign"
    body["context"].pop("selections")
    body["fhirServer"] = fhir_server.base_url
    answer = client.post("/cds-services/horismos-med-safety", json=body)
    assert answer.status_code == 200, answer.text
    [unread] = [c for c in answer.json()["cards"] if "not checked" in c["summary"]]
    assert unread["indicator"] == "warning"
    assert "no drug is chosen yet: the order names no medication" in unread["detail"]
    assert unread["overrideReasons"], unread
