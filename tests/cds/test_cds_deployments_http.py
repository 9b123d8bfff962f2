"""Every rule of both example deployments over HTTP, twice: with the data prefetched by the
client, and with no prefetch so the service reads it from a real FHIR server on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cds.response_check import check_response
from app.ontology import load_ontology
from app.ontology.deployments import find_deployments
from app.ontology.loader import default_ontology_paths
from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text
from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.fhirserver

#: each bundled rule's rdfs:label: the criterion a card names
CRITERIA = {
    rule.name: rule.label or rule.name
    for source in find_deployments(default_ontology_paths())
    for rule in load_ontology(source.paths).rules
}

INDICATOR = {
    "Immediate": "critical",
    "Urgent": "warning",
    "Standard": "info",
    "NonUrgent": "info",
    "Contraindicated": "critical",
    "Caution": "warning",
}


@dataclass(frozen=True)
class Vital:
    """One reading a case is about; the case sends the other vital signs as normal readings."""

    code: str
    make: Callable[[str], dict[str, Any]]

    def __call__(self, pid: str) -> dict[str, Any]:
        return self.make(pid)


@dataclass
class Case:
    expect: str | None  # the decided value, None for no decision
    birth_date: str = "1985-03-01"
    vitals: list[Vital] = field(default_factory=list)
    #: send the vital signs the case is not about as normal readings (triage then decides)
    complete: bool = True
    conditions: list[str] = field(default_factory=list)
    labs: list[Callable[[str], dict[str, Any]]] = field(default_factory=list)
    allergies: list[str] = field(default_factory=list)
    orders: list[str] = field(default_factory=list)


def vital(code: str, value: float, unit: str) -> Vital:
    return Vital(code, lambda pid: fx.observation(pid, code, value, unit))


def lab(code: str, value: float, unit: str) -> Callable[[str], dict[str, Any]]:
    return lambda pid: fx.observation(pid, code, value, unit, category="laboratory")


HR, RR, SPO2, SBP, TEMP = "8867-4", "9279-1", "59408-5", "8480-6", "8310-5"
CHEST_PAIN, DYSPNEA, SYNCOPE, UNRESPONSIVE = "29857009", "267036007", "271594007", "422768004"
HEADACHE, FEVER = "25064002", "386661006"

TRIAGE: dict[str, Case] = {
    "ImmediateLowSpO2": Case("Immediate", vitals=[vital(SPO2, 85, "%")]),
    "ImmediateLowSpO2-alt-code": Case("Immediate", vitals=[vital("2708-6", 88, "%")]),
    "ImmediateLowSystolic": Case("Immediate", vitals=[vital(SBP, 82, "mm[Hg]")]),
    "ImmediateLowSystolic-panel": Case(
        "Immediate", vitals=[Vital(SBP, lambda p: fx.bp_panel(p, 84, 50))]
    ),
    "ImmediateHighHeartRate": Case("Immediate", vitals=[vital(HR, 160, "/min")]),
    "ImmediateLowHeartRate": Case("Immediate", vitals=[vital(HR, 35, "/min")]),
    "ImmediateHighRespRate": Case("Immediate", vitals=[vital(RR, 34, "/min")]),
    "ImmediateLowRespRate": Case("Immediate", vitals=[vital(RR, 6, "/min")]),
    "ImmediateUnresponsive": Case("Immediate", conditions=[UNRESPONSIVE]),
    "ImmediateChestPainTachycardia": Case(
        "Immediate", vitals=[vital(HR, 125, "/min")], conditions=[CHEST_PAIN]
    ),
    "UrgentChestPain": Case("Urgent", conditions=[CHEST_PAIN]),
    "UrgentDyspnea": Case("Urgent", conditions=[DYSPNEA]),
    "UrgentSyncope": Case("Urgent", conditions=[SYNCOPE]),
    "UrgentTachycardia": Case("Urgent", vitals=[vital(HR, 110, "/min")]),
    "UrgentTachypnea": Case("Urgent", vitals=[vital(RR, 26, "/min")]),
    "UrgentLowSpO2": Case("Urgent", vitals=[vital(SPO2, 92, "%")]),
    "UrgentHighFever": Case("Urgent", vitals=[vital(TEMP, 39.4, "Cel")]),
    "UrgentHighFever-fahrenheit": Case("Urgent", vitals=[vital(TEMP, 102.9, "[degF]")]),
    "UrgentElderlyFever": Case(
        "Urgent", birth_date="1950-01-01", vitals=[vital(TEMP, 38.4, "Cel")]
    ),
    "StandardPain": Case("Standard", conditions=[HEADACHE]),
    "StandardFever": Case("Standard", conditions=[FEVER]),
    "StandardTemperature": Case("Standard", vitals=[vital(TEMP, 38.2, "Cel")]),
    "NonUrgentHeartRate": Case("NonUrgent", vitals=[vital(HR, 80, "/min")]),
    "EscalateIncomplete-no-data": Case(None, complete=False),
    "EscalateIncomplete-no-spo2": Case(None, vitals=[vital(HR, 110, "/min")], complete=False),
}

NSAID, AMOXICILLIN, METFORMIN, LISINOPRIL = "5640", "723", "6809", "29046"
EGFR, POTASSIUM = "33914-3", "2823-3"
GFR_UNIT = "mL/min/{1.73_m2}"

MED_SAFETY: dict[str, Case] = {
    "ContraindicatedNsaidLowEgfr": Case(
        "Contraindicated", orders=[NSAID], labs=[lab(EGFR, 25, GFR_UNIT)]
    ),
    "ContraindicatedPenicillinAllergy": Case(
        "Contraindicated", orders=[AMOXICILLIN], allergies=["91936005"]
    ),
    "ContraindicatedPenicillinAllergy-substance": Case(
        "Contraindicated", orders=["733"], allergies=["764146007"]
    ),
    "ContraindicatedMetforminLowEgfr": Case(
        "Contraindicated", orders=[METFORMIN], labs=[lab("62238-1", 20, GFR_UNIT)]
    ),
    "CautionMetforminReducedEgfr": Case(
        "Caution", orders=[METFORMIN], labs=[lab("98979-8", 40, GFR_UNIT)]
    ),
    "NotDecided-nsaid-no-egfr": Case(None, orders=["7258"]),
    "NotDecided-metformin-no-egfr": Case(None, orders=[METFORMIN]),
    "CautionAceInhibitorHyperkalemia": Case(
        "Caution", orders=[LISINOPRIL], labs=[lab(POTASSIUM, 6.1, "mmol/L")]
    ),
    "CautionNsaidElderly": Case(
        "Caution", birth_date="1940-01-01", orders=["3355"], labs=[lab(EGFR, 70, GFR_UNIT)]
    ),
    "SafeDraftOrder": Case("Safe", orders=[LISINOPRIL], labs=[lab("6298-4", 4.2, "mmol/L")]),
    "NothingToCheck-no-orders": Case(None),
}


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def run_of(result: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = result["extension"]["dev.horismos.run"]
    return run


def _store(server: FhirServer, resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [server.create(r) for r in resources]


def _assert_conformant(resp: Any, expect: str | None) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    assert check_response(body) == []
    run = body["extension"]["dev.horismos.run"]
    if expect is None:
        assert "decision" not in run
    else:
        assert run["decision"]["value"] == expect
    for card in body["cards"]:
        assert card["links"][0]["url"] == f"https://cds.example.test/runs/{run['runId']}"
    return body


@pytest.mark.parametrize("mode", ["prefetch", "fhir-server"])
@pytest.mark.parametrize("name", sorted(TRIAGE))
def test_triage_rule_over_http(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    case = TRIAGE[name]
    pid, eid = fx.new_id(), fx.new_id()
    patient, enc = _store(fhir_server, [fx.patient(pid, case.birth_date), fx.encounter(eid, pid)])
    readings = [make(pid) for make in case.vitals]
    if case.complete:
        readings += fx.vital_signs(pid, skip={v.code for v in case.vitals})
    vitals = _store(fhir_server, readings)
    conditions = _store(fhir_server, [fx.condition(pid, c) for c in case.conditions])
    prefetch = None
    if mode == "prefetch":
        prefetch = {
            "patient": patient,
            "encounter": enc,
            "vitals": fx.searchset(vitals),
            "conditions": fx.searchset(conditions),
        }
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server.base_url,
        prefetch=prefetch,
    )
    mark = fhir_server.mark()
    result = _assert_conformant(
        client.post("/cds-services/horismos-triage", json=body), case.expect
    )
    reads = [r for r in fhir_server.requests(since=mark) if r["method"] == "GET"]
    if mode == "prefetch":
        assert reads == []
    else:
        assert {r["url"].split("?")[0].rsplit("/fhir/", 1)[-1].split("/")[0] for r in reads} >= {
            "Patient",
            "Encounter",
            "Observation",
            "Condition",
        }
    [card] = result["cards"]
    run = result["extension"]["dev.horismos.run"]
    if case.expect is None:
        # a vital sign is missing and could change the acuity: no decision, nothing written
        assert run["terminal"] == "EscalateIncomplete"
        assert card["indicator"] == "warning"
        assert card["summary"] == "Triage not decided: vital signs or conditions incomplete"
        assert "No oxygen saturation reading in the data the service received" in card["detail"]
        assert "SpO2 below 90 %" in decision_record_text(
            client, card
        )  # what the missing reading could change
        assert "priority" not in fhir_server.read("Encounter", eid)
    else:
        assert run["terminal"] == "Done"
        assert card["indicator"] == INDICATOR[case.expect]
        assert CRITERIA[name.split("-")[0]] in card["detail"]  # the proof names the criterion
        priority = fhir_server.read("Encounter", eid).get("priority", {})
        assert priority["coding"][0]["code"] in {"EM", "UR", "R", "EL"}


@pytest.mark.parametrize("mode", ["prefetch", "fhir-server"])
@pytest.mark.parametrize("name", sorted(MED_SAFETY))
def test_med_safety_rule_over_http(
    name: str, mode: str, client: TestClient, fhir_server: FhirServer
) -> None:
    case = MED_SAFETY[name]
    pid = fx.new_id()
    [patient] = _store(fhir_server, [fx.patient(pid, case.birth_date)])
    labs = _store(fhir_server, [make(pid) for make in case.labs])
    allergies = _store(fhir_server, [fx.allergy(pid, a) for a in case.allergies])
    orders = [fx.draft_order(pid, rx) for rx in case.orders]
    prefetch = None
    if mode == "prefetch":
        prefetch = {
            "patient": patient,
            "allergies": fx.searchset(allergies),
            "labs": fx.searchset(labs),
        }
    body = fx.order_sign(pid, orders, fhir_server=fhir_server.base_url, prefetch=prefetch)
    mark = fhir_server.mark()
    result = _assert_conformant(
        client.post("/cds-services/horismos-med-safety", json=body), case.expect
    )
    reads = [r for r in fhir_server.requests(since=mark) if r["method"] == "GET"]
    assert (reads == []) == (mode == "prefetch")
    if name.startswith("NotDecided"):
        # no eGFR on record: it could make the order contraindicated, so nothing is called safe
        [card] = result["cards"]
        assert run_of(result)["terminal"] == "NotDecided"
        assert card["indicator"] == "warning"
        assert "No eGFR reading in the data the service received" in card["detail"]
        assert "eGFR below 30 (Contraindicated)" in decision_record_text(client, card)
        return
    if case.expect in (None, "Safe"):
        assert result["cards"] == []  # nothing to say
        return
    [card] = result["cards"]
    assert card["indicator"] == INDICATOR[case.expect]
    assert CRITERIA[name.split("-")[0]] in card["detail"]
    if case.expect == "Contraindicated":
        delete, *swap = card["suggestions"]
        [action] = delete["actions"]
        assert action == {
            "type": "delete",
            "description": "Delete the draft order before signing.",
            "resourceId": f"MedicationRequest/{orders[0]['id']}",
        }
        # an NSAID with a low eGFR: acetaminophen swapped into the same draft order (the
        # deployment names no alternative to a penicillin or to metformin)
        if name.startswith("ContraindicatedNsaid"):
            [update] = swap[0]["actions"]
            assert update["type"] == "update" and update["resource"]["id"] == orders[0]["id"]
            assert (
                update["resource"]["medicationCodeableConcept"]["text"]
                == "acetaminophen 500 mg oral tablet"
            )
        else:
            assert swap == []
    elif name.startswith("CautionMetforminReducedEgfr"):
        # advice, no order changed
        [advice] = card["suggestions"]
        assert advice["label"].startswith("Metformin at eGFR 30 to 45: not to be started")
        assert "actions" not in advice
    else:
        assert "suggestions" not in card


def test_contraindication_cites_only_the_offending_order(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid = fx.new_id()
    [patient] = _store(fhir_server, [fx.patient(pid)])
    nsaid, safe = fx.draft_order(pid, NSAID), fx.draft_order(pid, LISINOPRIL)
    body = fx.order_sign(
        pid,
        [safe, nsaid],
        fhir_server=None,
        prefetch={
            "patient": patient,
            "allergies": None,
            "labs": fx.searchset([fx.observation(pid, EGFR, 22, GFR_UNIT, category="laboratory")]),
        },
    )
    result = _assert_conformant(
        client.post("/cds-services/horismos-med-safety", json=body), "Contraindicated"
    )
    actions = [a for s in result["cards"][0]["suggestions"] for a in s["actions"]]
    assert [_acted_on(a) for a in actions] == [f"MedicationRequest/{nsaid['id']}"] * 2


def test_contraindication_offers_every_offending_order(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """Two NSAIDs with a low eGFR: the rule fires on one witness, but both orders are
    contraindicated and each gets its own delete suggestion; the safe order gets none."""
    pid = fx.new_id()
    [patient] = _store(fhir_server, [fx.patient(pid)])
    ibuprofen, naproxen = fx.draft_order(pid, NSAID), fx.draft_order(pid, "7258")
    safe = fx.draft_order(pid, LISINOPRIL)
    body = fx.order_sign(
        pid,
        [ibuprofen, safe, naproxen],
        fhir_server=None,
        prefetch={
            "patient": patient,
            "allergies": None,
            "labs": fx.searchset([fx.observation(pid, EGFR, 20, GFR_UNIT, category="laboratory")]),
        },
    )
    result = _assert_conformant(
        client.post("/cds-services/horismos-med-safety", json=body), "Contraindicated"
    )
    actions = [a for s in result["cards"][0]["suggestions"] for a in s["actions"]]
    # a delete and an update (acetaminophen in its place) for each
    assert sorted(_acted_on(a) for a in actions) == sorted(
        f"MedicationRequest/{o['id']}" for o in (ibuprofen, ibuprofen, naproxen, naproxen)
    )


def _acted_on(action: dict[str, Any]) -> str:
    """The draft order an action deletes (``resourceId``) or updates (its resource)."""
    if action["type"] == "delete":
        return str(action["resourceId"])
    return f"MedicationRequest/{action['resource']['id']}"


@pytest.mark.parametrize("mode", ["prefetch", "fhir-server"])
def test_triage_non_urgent_symptom_from_the_chief_complaint(
    mode: str,
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
    fhir_server: FhirServer,
    tmp_path: Path,
) -> None:
    """NonUrgentSymptom: a symptom no coded rule ranks, read from Encounter.reasonCode.text by
    the Intake PerceptionStep through the scripted mock Bridge (narration falls back to the
    proof: the script has no narration)."""
    script = tmp_path / "bridge.json"
    script.write_text(
        json.dumps({"extract": [{"output": {"Symptom": ["Symptom"]}, "confidence": 0.95}]})
    )
    pid, eid = fx.new_id(), fx.new_id()
    stored = _store(
        fhir_server, [fx.patient(pid), fx.encounter(eid, pid, reason="feels generally unwell")]
    )
    vitals = _store(fhir_server, fx.vital_signs(pid))  # unremarkable: nothing outranks it
    prefetch = None
    if mode == "prefetch":
        prefetch = {
            "patient": stored[0],
            "encounter": stored[1],
            "vitals": fx.searchset(vitals),
            "conditions": fx.searchset([]),
        }
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server.base_url,
        prefetch=prefetch,
    )
    with make_app_client(
        public_base_url="https://cds.example.test", bridge_model=f"mock:{script}"
    ) as c:
        result = _assert_conformant(c.post("/cds-services/horismos-triage", json=body), "NonUrgent")
        [card] = result["cards"]
        record = decision_record_text(c, card)  # the proof, on the decision record
    assert card["indicator"] == "info"
    assert "Symptom recorded, no other criterion" in record
    assert "read from free text by a language model, confidence 0.95" in record
