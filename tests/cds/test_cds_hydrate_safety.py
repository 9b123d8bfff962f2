"""Hydration refuses what would misinform a decision: retracted or unfinished Observations,
resources about another patient, units that only look convertible, partial birth dates read as
older than they can be, and refuted or mistaken diagnoses and allergies."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.fhir.hydrate import hydrate
from app.fhir.hydration import Hydration
from app.ontology import default_ontology_paths, load_ontology
from app.ontology.model import Ontology
from app.world.facts import AddInstance, Assert
from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text
from tests.support.fhir_server import FhirServer

TRI = "https://horismos.dev/example/triage#"
MED = "https://horismos.dev/example/med-safety#"
LOINC = "http://loinc.org"
SNOMED = "http://snomed.info/sct"
UCUM = "http://unitsofmeasure.org"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HR, TEMP, EGFR = "8867-4", "8310-5", "33914-3"
GFR_UNIT = "mL/min/{1.73_m2}"


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology(default_ontology_paths())


def obs(
    oid: str,
    code: str,
    value: float | None,
    unit: str,
    when: str = "2025-06-01T10:00:00Z",
    *,
    status: str = "final",
    subject: str | None = "Patient/p1",
    **extra: Any,
) -> dict[str, Any]:
    res: dict[str, Any] = {
        "resourceType": "Observation",
        "id": oid,
        "status": status,
        "code": {"coding": [{"system": LOINC, "code": code}]},
        "effectiveDateTime": when,
        **extra,
    }
    if subject is not None:
        res["subject"] = {"reference": subject}
    if value is not None:
        res["valueQuantity"] = {"value": value, "unit": unit, "system": UCUM, "code": unit}
    return res


def condition(
    cid: str, snomed: str, *, verification: str | None = None, subject: str = "Patient/p1"
) -> dict[str, Any]:
    res: dict[str, Any] = {
        "resourceType": "Condition",
        "id": cid,
        "clinicalStatus": {"coding": [{"code": "active"}]},
        "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
        "code": {"coding": [{"system": SNOMED, "code": snomed}]},
        "subject": {"reference": subject},
    }
    if verification is not None:
        res["verificationStatus"] = {
            "coding": [
                {
                    "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                    "code": verification,
                }
            ]
        }
    return res


def allergy(
    aid: str, *, verification: str | None = None, patient: str = "Patient/p1"
) -> dict[str, Any]:
    res: dict[str, Any] = {
        "resourceType": "AllergyIntolerance",
        "id": aid,
        "clinicalStatus": {"coding": [{"code": "active"}]},
        "code": {"coding": [{"system": SNOMED, "code": "91936005"}]},
        "patient": {"reference": patient},
    }
    if verification is not None:
        res["verificationStatus"] = {"coding": [{"code": verification}]}
    return res


def bundle(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [{"resource": r} for r in resources],
    }


def triage(onto: Ontology, now: datetime = NOW, **data: Any) -> Hydration:
    return hydrate(
        onto,
        focus_id="p1",
        focus_class=TRI + "Patient",
        data=data,
        context={"patientId": "p1", "encounterId": "e1"},
        now=now,
        texts=onto.service("horismos-triage").text,
    )


def med_safety(onto: Ontology, *, draft: Sequence[dict[str, Any]] = (), **data: Any) -> Hydration:
    return hydrate(
        onto,
        focus_id="p1",
        focus_class=MED + "Patient",
        data=data,
        context={"patientId": "p1", "draftOrders": bundle(*draft)},
        now=NOW,
    )


def asserted(h: Hydration, prop: str) -> list[Assert]:
    return [c for c in h.changes if isinstance(c, Assert) and c.property == prop]


def values(h: Hydration, prop: str) -> list[Any]:
    return [a.value for a in asserted(h, prop)]


def instances(h: Hydration) -> list[tuple[str, str]]:
    return [(c.id, c.class_iri) for c in h.changes if isinstance(c, AddInstance) and c.id != "p1"]


# --- 1. Observation status and absent data --------------------------------------------------


def test_an_entered_in_error_reading_does_not_beat_a_final_one(onto: Ontology) -> None:
    h = triage(
        onto,
        vitals=bundle(
            obs("hr-final", HR, 80, "/min", "2025-06-01T10:00:00Z"),
            obs("hr-error", HR, 170, "/min", "2025-06-01T11:00:00Z", status="entered-in-error"),
        ),
    )
    [hr] = asserted(h, TRI + "heartRate")
    assert hr.value == Decimal("80")
    assert hr.source is not None and hr.source.id == "hr-final"


@pytest.mark.parametrize("status", ["entered-in-error", "cancelled", "registered", "unknown"])
def test_observations_that_are_not_results_are_not_facts(onto: Ontology, status: str) -> None:
    h = triage(onto, vitals=bundle(obs("hr1", HR, 170, "/min", status=status)))
    assert asserted(h, TRI + "heartRate") == []


@pytest.mark.parametrize("status", ["final", "amended", "corrected", "preliminary"])
def test_result_statuses_become_facts(onto: Ontology, status: str) -> None:
    h = triage(onto, vitals=bundle(obs("hr1", HR, 72, "/min", status=status)))
    assert values(h, TRI + "heartRate") == [Decimal("72")]


def test_an_observation_without_a_status_is_not_a_fact(onto: Ontology) -> None:
    reading = obs("hr1", HR, 170, "/min")
    del reading["status"]
    assert asserted(triage(onto, vitals=bundle(reading)), TRI + "heartRate") == []


def test_a_panel_entered_in_error_gives_no_component_value(onto: Ontology) -> None:
    panel = fx.bp_panel("p1", 70, 40)
    panel["status"] = "entered-in-error"
    assert asserted(triage(onto, vitals=bundle(panel)), TRI + "systolicBP") == []


def test_an_observation_with_a_data_absent_reason_is_not_a_fact(onto: Ontology) -> None:
    absent = {"coding": [{"code": "asked-unknown"}]}
    no_value = obs("hr1", HR, None, "/min", dataAbsentReason=absent)
    # a value next to a dataAbsentReason breaks FHIR invariant obs-6: not a reading either
    contradictory = obs("hr2", HR, 170, "/min", dataAbsentReason=absent)
    h = triage(onto, vitals=bundle(no_value, contradictory))
    assert asserted(h, TRI + "heartRate") == []
    assert h.violations == []


# --- 2. resources about another patient ------------------------------------------------------


def test_another_patients_observation_is_refused_and_recorded(onto: Ontology) -> None:
    h = triage(
        onto,
        vitals=bundle(
            obs("hr-mine", HR, 80, "/min", "2025-06-01T10:00:00Z"),
            obs("hr-theirs", HR, 35, "/min", "2025-06-01T11:00:00Z", subject="Patient/p2"),
        ),
    )
    [hr] = asserted(h, TRI + "heartRate")
    assert hr.source is not None and hr.source.id == "hr-mine"
    [v] = h.violations
    assert v.code == "subject" and v.subject == "p1"
    assert "Observation/hr-theirs" in v.message and "Patient/p2" in v.message


def test_a_full_url_reference_to_the_focus_is_accepted(onto: Ontology) -> None:
    full = "https://ehr.example.org/fhir/Patient/p1"
    versioned = "Patient/p1/_history/4"
    h = triage(
        onto,
        vitals=bundle(
            obs("hr1", HR, 80, "/min", subject=full),
            obs("t1", TEMP, 37.0, "Cel", subject=versioned),
        ),
    )
    assert values(h, TRI + "heartRate") == [Decimal("80")]
    assert values(h, TRI + "temperature") == [Decimal("37.0")]
    assert h.violations == []


@pytest.mark.parametrize(
    "subject",
    [
        None,
        "Patient/p10",
        "https://ehr.example.org/fhir/Patient/p10",
        "https://ehr.example.org/fhir/Patient/xp1",
        "Group/p1",
    ],
)
def test_an_observation_not_known_to_be_about_the_focus_is_refused(
    onto: Ontology, subject: str | None
) -> None:
    h = triage(onto, vitals=bundle(obs("hr1", HR, 170, "/min", subject=subject)))
    assert asserted(h, TRI + "heartRate") == []
    assert [v.code for v in h.violations] == ["subject"]


def test_a_foreign_resource_is_recorded_once_however_many_mappings_read_it(
    onto: Ontology,
) -> None:
    h = triage(onto, vitals=bundle(fx.bp_panel("p2", 70, 40)))
    assert asserted(h, TRI + "systolicBP") == []
    assert [v.code for v in h.violations] == ["subject"]


def test_another_patients_condition_is_not_a_symptom(onto: Ontology) -> None:
    h = triage(onto, conditions=bundle(condition("c1", "422768004", subject="Patient/p2")))
    assert asserted(h, TRI + "hasSymptom") == [] and instances(h) == []
    [v] = h.violations
    assert v.code == "subject" and "Condition/c1" in v.message


def test_another_patients_resource_is_not_read_for_age(onto: Ontology) -> None:
    other = {"resourceType": "Patient", "id": "p2", "birthDate": "1930-01-01"}
    h = triage(onto, patient=other)
    assert asserted(h, TRI + "age") == []
    assert [v.code for v in h.violations] == ["subject"]


def test_another_patients_encounter_gives_no_chief_complaint(onto: Ontology) -> None:
    enc = fx.encounter("e1", "p2", reason="unresponsive on arrival")
    h = triage(onto, encounter=enc)
    assert h.text is None
    assert [v.code for v in h.violations] == ["subject"]


def test_another_patients_allergy_and_draft_order_are_refused(onto: Ontology) -> None:
    order = fx.draft_order("p2", "723")
    h = med_safety(onto, draft=[order], allergies=bundle(allergy("a1", patient="Patient/p2")))
    assert instances(h) == []
    assert asserted(h, MED + "hasAllergy") == [] and asserted(h, MED + "hasDraftOrder") == []
    messages = sorted(v.message for v in h.violations if v.code == "subject")
    assert len(messages) == 2
    assert "AllergyIntolerance/a1" in messages[0]
    assert f"MedicationRequest/{order['id']}" in messages[1]


# --- 3. annotated units ----------------------------------------------------------------------


def test_a_clearance_not_indexed_to_body_surface_is_not_an_indexed_rate(onto: Ontology) -> None:
    """Where the codes do not define the annotation (a mapping without horis:codesImply),
    mL/min is not mL/min/{1.73_m2}: refused, never converted 1:1."""
    egfr = onto.properties[MED + "egfr"]
    plain = replace(egfr, from_fhir=tuple(replace(m, codes_imply=()) for m in egfr.from_fhir))
    h = med_safety(
        replace(onto, properties={**onto.properties, MED + "egfr": plain}),
        labs=bundle(obs("g1", EGFR, 25, "mL/min")),
    )
    assert asserted(h, MED + "egfr") == []
    [v] = h.violations
    assert v.code == "unit" and v.property == MED + "egfr"
    assert "{1.73_m2}" in v.message


def test_an_egfr_code_defines_the_rate_per_1_73_m2_so_ml_min_is_read_with_a_note(
    onto: Ontology,
) -> None:
    """LOINC 33914-3 is the rate per 1.73 m² by definition (Synthea reports it in mL/min): the
    value is read in mL/min/{1.73_m2} and the run says so; another annotation is refused."""
    h = med_safety(onto, labs=bundle(obs("g1", EGFR, 25, "mL/min")))
    assert values(h, MED + "egfr") == [Decimal(25)]
    assert h.violations == []
    [note] = h.notes
    assert (note.rule, note.received, note.read_as) == (
        "unit-annotation-implied-by-code",
        "mL/min",
        "mL/min/{1.73_m2}",
    )
    other = med_safety(onto, labs=bundle(obs("g1", EGFR, 25, "mL/min/{BSA}")))
    assert asserted(other, MED + "egfr") == [] and [v.code for v in other.violations] == ["unit"]
    clearance = med_safety(onto, labs=bundle(obs("g1", EGFR, 25, "mL/min/1.73.m2")))
    assert asserted(clearance, MED + "egfr") == []


@pytest.mark.parametrize("unit", ["mL/min/1.73", "mL/min/2", "mL/(2.min)"])
def test_a_unit_code_with_a_number_in_it_is_refused_not_scaled_by_a_guess(
    onto: Ontology, unit: str
) -> None:
    """ "mL/min/1.73" is a person's "per 1.73 m²" and, to a UCUM parser, a factor: read either
    way the eGFR would move by a constant, and the metformin thresholds read it; refused."""
    h = med_safety(onto, labs=bundle(obs("g1", EGFR, 60, unit)))
    assert asserted(h, MED + "egfr") == []
    assert [v.code for v in h.violations] == ["unit"]


def test_an_indexed_rate_converts_between_time_units(onto: Ontology) -> None:
    h = med_safety(onto, labs=bundle(obs("g1", EGFR, 0.5, "mL/s/{1.73_m2}")))
    assert values(h, MED + "egfr") == [Decimal("30.0")]


def test_an_annotation_the_target_unit_lacks_is_still_read(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(obs("hr1", HR, 88, "{beats}/min")))
    assert values(h, TRI + "heartRate") == [Decimal("88.0")]


# --- 4. units outside UCUM ------------------------------------------------------------------


def quantity_obs(code: str, quantity: dict[str, Any]) -> dict[str, Any]:
    res = obs("q1", code, None, "")
    res["valueQuantity"] = quantity
    return res


def test_display_text_of_a_local_unit_system_is_not_parsed_as_ucum(onto: Ontology) -> None:
    local = {"value": 310, "unit": "K", "system": "http://ehr.example.org/units", "code": "k"}
    h = triage(onto, vitals=bundle(quantity_obs(TEMP, local)))
    assert asserted(h, TRI + "temperature") == []
    [v] = h.violations
    assert v.code == "unit" and "Observation/q1" in v.message


def test_a_local_unit_system_whose_display_is_the_wanted_unit_is_read(onto: Ontology) -> None:
    local = {"value": 37.5, "unit": "Cel", "system": "http://ehr.example.org/units", "code": "C"}
    h = triage(onto, vitals=bundle(quantity_obs(TEMP, local)))
    assert values(h, TRI + "temperature") == [Decimal("37.5")]
    assert h.violations == []


def test_display_text_without_a_code_is_not_converted(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(quantity_obs(TEMP, {"value": 102.2, "unit": "[degF]"})))
    assert asserted(h, TRI + "temperature") == []
    assert [v.code for v in h.violations] == ["unit"]


def test_a_ucum_code_without_a_system_is_read(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(quantity_obs(TEMP, {"value": 102.2, "code": "[degF]"})))
    assert values(h, TRI + "temperature") == [Decimal("39.0")]


# --- 5. partial birth dates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("born", "now", "age"),
    [
        ("1960-06", NOW, 64),  # read as 1 June 1960 or earlier this would be 65
        ("1960-06", datetime(2025, 6, 29, tzinfo=UTC), 64),
        ("1960-06", datetime(2025, 6, 30, tzinfo=UTC), 65),
        ("1960", datetime(2025, 12, 30, tzinfo=UTC), 64),
        ("1960", datetime(2025, 12, 31, tzinfo=UTC), 65),
        ("1960-02", datetime(2025, 2, 28, tzinfo=UTC), 64),  # born 29 February at the latest
        ("1960-02", datetime(2025, 3, 1, tzinfo=UTC), 65),
        ("1960-06-02", NOW, 64),
    ],
)
def test_a_partial_birth_date_gives_the_youngest_possible_age(
    onto: Ontology, born: str, now: datetime, age: int
) -> None:
    h = triage(onto, now=now, patient={"resourceType": "Patient", "id": "p1", "birthDate": born})
    assert values(h, TRI + "age") == [age]


@pytest.mark.parametrize("born", ["1960-6", "1960-13", "June 1960", "19600601"])
def test_a_malformed_birth_date_is_a_violation(onto: Ontology, born: str) -> None:
    h = triage(onto, patient={"resourceType": "Patient", "id": "p1", "birthDate": born})
    assert asserted(h, TRI + "age") == []
    assert [v.code for v in h.violations] == ["range"]


# --- 6. refuted and mistaken conditions and allergies -----------------------------------------


@pytest.mark.parametrize("status", ["refuted", "entered-in-error"])
def test_refuted_or_mistaken_conditions_are_not_symptoms(onto: Ontology, status: str) -> None:
    h = triage(onto, conditions=bundle(condition("c1", "422768004", verification=status)))
    assert instances(h) == [] and asserted(h, TRI + "hasSymptom") == []


@pytest.mark.parametrize("status", ["confirmed", "provisional", "differential", None])
def test_other_verification_statuses_are_symptoms(onto: Ontology, status: str | None) -> None:
    h = triage(onto, conditions=bundle(condition("c1", "422768004", verification=status)))
    assert instances(h) == [("c1", TRI + "Unresponsive")]


@pytest.mark.parametrize(
    ("status", "kept"),
    [("refuted", False), ("entered-in-error", False), ("confirmed", True), ("unconfirmed", True)],
)
def test_refuted_or_mistaken_allergies_are_not_facts(
    onto: Ontology, status: str, kept: bool
) -> None:
    h = med_safety(onto, allergies=bundle(allergy("a1", verification=status)))
    assert instances(h) == ([("a1", MED + "PenicillinAllergy")] if kept else [])


# --- end to end over HTTP ---------------------------------------------------------------------


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


@pytest.mark.fhirserver
def test_triage_over_http_ignores_retracted_and_foreign_readings(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid, eid, other = fx.new_id(), fx.new_id(), fx.new_id()
    patient = fhir_server.create(fx.patient(pid))
    enc = fhir_server.create(fx.encounter(eid, pid))
    final = fx.observation(pid, HR, 80, "/min", when=fx.recent(90))
    retracted = fx.observation(pid, HR, 170, "/min", when=fx.recent(60))
    retracted["status"] = "entered-in-error"
    foreign = fx.observation(other, HR, 35, "/min", when=fx.recent(30))
    refuted = fx.condition(pid, "422768004")
    refuted["verificationStatus"] = {"coding": [{"code": "refuted"}]}
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server.base_url,
        prefetch={
            "patient": patient,
            "encounter": enc,
            "vitals": fx.searchset([final, retracted, foreign, *fx.vital_signs(pid, skip={HR})]),
            "conditions": fx.searchset([refuted]),
        },
    )
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 200, resp.text
    result = resp.json()
    run = result["extension"]["dev.horismos.run"]
    # the retracted reading and the refuted condition are not data; the foreign reading is a
    # heart rate that was there and turned away, so the heart rate is not known whole: the
    # acuity is not decided on it and nothing is written to the Encounter
    assert "decision" not in run and run["terminal"] == "EscalateIncomplete"
    [card] = result["cards"]
    assert card["indicator"] == "warning"
    assert f"it is about Patient/{other}, not this patient" in card["detail"]
    assert "Refused input (subject)" in card["detail"]
    assert f"Observation/{foreign['id']}" in card["detail"]
    # the retracted reading as a value (a bare "170" may be part of a random resource id)
    assert "Unresponsive" not in card["detail"] and "170 /min" not in card["detail"]
    stored = client.get(f"/runs/{run['runId']}").json()
    refused = [v for v in stored["inputViolations"] if v["code"] == "subject"]
    assert [f"Observation/{foreign['id']}" in v["message"] for v in refused] == [True]
    assert "priority" not in fhir_server.read("Encounter", eid)


def _ibuprofen_at_egfr_22(client: TestClient, unit: str) -> Any:
    pid = fx.new_id()
    order = fx.draft_order(pid, "5640")
    body = fx.hook_request(
        "order-sign",
        {
            "patientId": pid,
            "draftOrders": {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": order}],
            },
        },
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1960-06"),
            "allergies": None,
            "labs": fx.searchset([fx.observation(pid, EGFR, 22, unit, category="laboratory")]),
        },
    )
    resp = client.post("/cds-services/horismos-med-safety", json=body)
    assert resp.status_code == 200, resp.text
    return resp


def test_med_safety_over_http_refuses_a_rate_indexed_otherwise(client: TestClient) -> None:
    result = _ibuprofen_at_egfr_22(client, "mL/min/{BSA}").json()
    # not the annotation the code defines: refused, so the order is not called safe or
    # cautioned on a guess; the card says which reading was not used and why
    run = result["extension"]["dev.horismos.run"]
    assert "decision" not in run and run["terminal"] == "NotDecided"
    [card] = result["cards"]
    assert card["indicator"] == "warning"
    assert "eGFR reading not used: unit 'mL/min/{BSA}' cannot be converted" in card["detail"]
    assert "NSAID with eGFR below 30 (Contraindicated)" in decision_record_text(client, card)
    assert "Refused input (unit)" in card["detail"]


def test_med_safety_over_http_reads_an_egfr_reported_in_ml_min_as_its_code_defines(
    client: TestClient,
) -> None:
    """Synthea and some laboratories report LOINC 33914-3 in mL/min: the code is the rate per
    1.73 m², so ibuprofen at 22 is contraindicated, and the run keeps a note of the unit."""
    resp = _ibuprofen_at_egfr_22(client, "mL/min")
    run = resp.json()["extension"]["dev.horismos.run"]
    assert run["decision"]["value"] == "Contraindicated"
    record = client.get(f"/runs/{run['runId']}").json()
    [note] = record["dataQuality"]
    assert (note["rule"], note["received"], note["readAs"]) == (
        "unit-annotation-implied-by-code",
        "mL/min",
        "mL/min/{1.73_m2}",
    )
