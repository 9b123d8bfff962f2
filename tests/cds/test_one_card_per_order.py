"""What a prescriber sees when the EHR has registered every service the discovery document lists,
as the CDS Hooks Sandbox does when all of them are added: each call is the Sandbox's request
shape (its order-sign and order-select fixtures, with this test's patient and drafts) sent to
every service of the hook, the prefetch each discovery entry asks for executed against the
project's FHIR server, and the rest read from it.

- Signing an extended-release opioid shows **at most three cards** in all, for an opioid-naive
  patient and for one on chronic opioids with a benzodiazepine; every summary fits 100
  characters; the drug is named once per card.
- Ibuprofen at eGFR 22 warns while it is chosen (order-select), not only at signing.
- A draft with no drug chosen yet warns nothing.
- The acetaminophen order a contraindication suggests in an NSAID's place is complete (drug,
  dose, route, frequency) and is checked again when signed.
- Registered one by one (the individual discovery), the same order shows one card per service.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds.card_markdown import SUMMARY_BUDGET, check_card
from tests.support.fhir_server import FhirServer
from tests.support.opioid_cases import (
    OXYCODONE_IR_5,
    TEMAZEPAM_20,
    ago,
    order,
    patient,
)
from tests.support.opioid_examples import ehr_prefetch

pytestmark = pytest.mark.fhirserver

OpenClient = Callable[..., AbstractContextManager[TestClient]]
FIXTURES = Path(__file__).parents[1] / "data/cds/fixtures"
RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
OXYCODONE_ER_20 = ("1049563", "12 HR oxycodone hydrochloride 20 MG Extended Release Oral Tablet")
IBUPROFEN_600 = ("197806", "ibuprofen 600 MG Oral Tablet")


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def sandbox_body(hook: str, pid: str, drafts: list[dict[str, Any]]) -> dict[str, Any]:
    """The Sandbox's request for ``hook`` with this patient's drafts in place of its own."""
    body: dict[str, Any] = json.loads(
        (FIXTURES / f"{hook}-request-cds-hooks-sandbox.json").read_text()
    )
    body["hookInstance"] = str(uuid.uuid4())
    body["context"]["patientId"] = pid
    body["context"]["draftOrders"] = {
        "resourceType": "Bundle",
        "entry": [{"resource": d} for d in drafts],
    }
    if hook == "order-select":
        body["context"]["selections"] = [f"MedicationRequest/{d['id']}" for d in drafts]
    body.pop("prefetch", None)
    return body


def every_service(
    client: TestClient,
    fhir: FhirServer,
    hook: str,
    pid: str,
    drafts: list[dict[str, Any]],
    discovery: str = "/cds-services",
) -> list[dict[str, Any]]:
    """The cards a client that registered every service of ``discovery`` shows for one call."""
    cards: list[dict[str, Any]] = []
    body = sandbox_body(hook, pid, drafts)
    for service in client.get(discovery).json()["services"]:
        if service["hook"] != hook:
            continue
        sent = copy.deepcopy(body)
        sent["fhirServer"] = fhir.base_url
        sent["prefetch"] = ehr_prefetch(service.get("prefetch") or {}, sent["context"], fhir)
        base = discovery.removesuffix("/cds-services")
        answer = client.post(f"{base}/cds-services/{service['id']}", json=sent)
        assert answer.status_code == 200, (service["id"], answer.text)
        cards.extend(answer.json()["cards"])
    return cards


def draft(oid: str, pid: str, drug: tuple[str, str], **kw: Any) -> dict[str, Any]:
    return {**order(oid, pid, drug, status="draft", **kw), "id": oid}


def store(fhir: FhirServer, *resources: dict[str, Any]) -> None:
    for resource in resources:
        fhir.create(resource)


def egfr(pid: str, value: float) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": f"egfr-{pid}",
        "status": "final",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                        "code": "laboratory",
                    }
                ]
            }
        ],
        "code": {"coding": [{"system": "http://loinc.org", "code": "62238-1"}]},
        "subject": {"reference": f"Patient/{pid}"},
        "effectiveDateTime": ago(3),
        "valueQuantity": {
            "value": value,
            "unit": "mL/min/1.73m2",
            "system": "http://unitsofmeasure.org",
            "code": "mL/min/{1.73_m2}",
        },
    }


def check_one_screen(cards: list[dict[str, Any]], drug_name: str) -> None:
    for card in cards:
        assert len(card["summary"]) <= SUMMARY_BUDGET, card["summary"]
        check_card(card["detail"])
        assert card["detail"].count(drug_name) <= 1, card["detail"]
        assert not card["detail"].startswith(card["summary"]), card
        if card["indicator"] != "info":
            assert card.get("overrideReasons"), card


@pytest.fixture
def naive(fhir_server: FhirServer) -> str:
    pid = "naive-" + fhir_server.new_id()
    store(fhir_server, patient(pid))
    return pid


@pytest.fixture
def chronic(fhir_server: FhirServer) -> str:
    """On oxycodone for four months and on temazepam."""
    pid = "chronic-" + fhir_server.new_id()
    store(
        fhir_server,
        patient(pid),
        *(
            order(f"{pid}-oxy-{i}", pid, OXYCODONE_IR_5, authored=ago(days), dose=2, frequency=3)
            for i, days in enumerate((120, 90, 60, 30))
        ),
        order(f"{pid}-tem", pid, TEMAZEPAM_20, authored=ago(20)),
    )
    return pid


@pytest.mark.parametrize("who", ["naive", "chronic"])
def test_signing_an_extended_release_opioid_shows_at_most_three_cards(
    client: TestClient, fhir_server: FhirServer, who: str, request: pytest.FixtureRequest
) -> None:
    pid: str = request.getfixturevalue(who)
    drafts = [draft(f"{pid}-er", pid, OXYCODONE_ER_20, frequency=2)]

    cards = every_service(client, fhir_server, "order-sign", pid, drafts)

    assert 1 <= len(cards) <= 3, [c["summary"] for c in cards]
    check_one_screen(cards, OXYCODONE_ER_20[1])
    [card] = cards  # one order: one card
    assert "oxycodone ER 20 mg tablet" in card["summary"]
    # registered one by one, the same order meets a card per recommendation that applies
    each = every_service(
        client, fhir_server, "order-sign", pid, drafts, discovery="/individual/cds-services"
    )
    assert len(each) > len(cards)
    # the combined card leads with the most important finding and lists the others
    parts = card["extension"]["dev.horismos.card"]["parts"]
    assert len(parts) == len(each)
    _lead, listed = card["detail"].split("**Also for this order:**")
    lines = [line for line in listed.split("\n- ")[1:] if "on the decision records" not in line]
    assert len(lines) == min(3, len(parts) - 1), listed
    if len(parts) > 4:
        assert f"and {len(parts) - 4} more on the decision records" in listed


def test_the_chronic_patients_card_leads_with_the_overdose_risk(
    client: TestClient, fhir_server: FhirServer, chronic: str
) -> None:
    drafts = [draft(f"{chronic}-er", chronic, OXYCODONE_ER_20, frequency=2)]

    [card] = every_service(client, fhir_server, "order-sign", chronic, drafts)

    assert card["summary"].startswith("Offer naloxone"), card["summary"]
    assert "Temazepam" in card["detail"] or "temazepam" in card["detail"]


def test_ibuprofen_at_egfr_22_warns_while_it_is_chosen(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid = "renal-" + fhir_server.new_id()
    store(fhir_server, patient(pid), egfr(pid, 22))
    drafts = [draft(f"{pid}-ibu", pid, IBUPROFEN_600, frequency=3)]

    [card] = every_service(client, fhir_server, "order-select", pid, drafts)

    assert card["indicator"] == "critical"
    assert "eGFR 22" in card["detail"]
    assert card["overrideReasons"]


def test_the_same_chart_with_a_normal_egfr_shows_nothing_while_choosing(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """The complete twin: a decided 'safe' is no card, at order-select as at signing."""
    pid = "renal-ok-" + fhir_server.new_id()
    store(fhir_server, patient(pid), egfr(pid, 85))
    drafts = [draft(f"{pid}-ibu", pid, IBUPROFEN_600, frequency=3)]

    assert every_service(client, fhir_server, "order-select", pid, drafts) == []


def test_a_draft_with_no_drug_chosen_yet_warns_nothing(
    client: TestClient, fhir_server: FhirServer, naive: str
) -> None:
    empty = {
        "resourceType": "MedicationRequest",
        "id": f"{naive}-empty",
        "status": "draft",
        "intent": "order",
        "subject": {"reference": f"Patient/{naive}"},
    }
    assert every_service(client, fhir_server, "order-select", naive, [empty]) == []


def test_the_acetaminophen_swapped_in_is_a_complete_order_checked_at_signing(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid = "swap-" + fhir_server.new_id()
    store(fhir_server, patient(pid), egfr(pid, 22))
    drafts = [draft(f"{pid}-ibu", pid, IBUPROFEN_600, frequency=3)]
    [card] = every_service(client, fhir_server, "order-sign", pid, drafts)
    [swap] = [s for s in card["suggestions"] if s["label"].startswith("Order instead")]
    assert "MedicationRequest/" not in " ".join(s["label"] for s in card["suggestions"])

    [action] = swap["actions"]
    swapped = action["resource"]
    assert swapped["medicationCodeableConcept"]["coding"][0]["code"] == "198440"
    [dosage] = swapped["dosageInstruction"]
    assert dosage["doseAndRate"][0]["doseQuantity"]["value"] == 2
    assert dosage["timing"]["repeat"] == {"frequency": 1, "period": 6, "periodUnit": "h"}
    assert dosage["route"]["coding"][0]["code"] == "26643006"

    # signed as swapped, it is read and checked again: a decided 'safe', so no card
    assert every_service(client, fhir_server, "order-sign", pid, [swapped]) == []


def test_overriding_the_combined_card_is_counted_for_its_lead_finding(
    client: TestClient, fhir_server: FhirServer, chronic: str
) -> None:
    drafts = [draft(f"{chronic}-er", chronic, OXYCODONE_ER_20, frequency=2)]
    [card] = every_service(client, fhir_server, "order-sign", chronic, drafts)
    reason = card["overrideReasons"][0]
    feedback = {
        "feedback": [
            {
                "card": card["uuid"],
                "outcome": "overridden",
                "overrideReason": {"reason": reason},
                "outcomeTimestamp": "2026-12-06T09:00:00Z",
            }
        ]
    }

    stored = client.post("/cds-services/opioidcds-order-sign/feedback", json=feedback)

    assert stored.status_code == 200, stored.text
    assert stored.json() == {"stored": 1, "duplicates": 0}
    lead = card["extension"]["dev.horismos.card"]["parts"][0]["service"]
    report = client.get("/analytics", params={"service": lead}).json()
    [counted] = [s for s in report["services"] if s["service"] == lead]
    assert counted["overridden"] == 1
    # a card the combined service never showed is refused, naming it
    feedback["feedback"][0]["card"] = "not-a-card"
    refused = client.post("/cds-services/opioidcds-order-sign/feedback", json=feedback)
    assert refused.status_code == 400 and "not-a-card" in refused.text


def test_the_immediate_release_order_swapped_in_without_a_dose_is_flagged_at_signing(
    client: TestClient, fhir_server: FhirServer, naive: str
) -> None:
    """Recommendation 3 swaps in the immediate-release form for the prescriber to dose (the
    extended-release schedule does not carry over): signed without a dose, the order is not
    passed as checked: the card lists the checks it kept from completing (the dose each needs
    is named on their decision records)."""
    drafts = [draft(f"{naive}-er", naive, OXYCODONE_ER_20, frequency=2)]
    [card] = every_service(client, fhir_server, "order-sign", naive, drafts)
    [swap] = [s for s in card["suggestions"] if s["label"].startswith("Change to")]
    swapped = swap["actions"][0]["resource"]
    assert "dosageInstruction" not in swapped

    cards = every_service(client, fhir_server, "order-sign", naive, [swapped])

    [flagged] = cards
    assert flagged["indicator"] in ("warning", "critical")
    assert "an MME could not be computed" in flagged["detail"], flagged["detail"]
