"""Records as real EHRs, Synthea and the FHIR specification's own examples write them, over HTTP.

Each shape below was answered wrongly by the service (an older value used, a 400, a record
dropped): each test shows the unsafe answer it replaces and a complete twin that still decides.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
TRIAGE = "/cds-services/horismos-triage"
GFR = "mL/min/{1.73_m2}"
LOINC = "http://loinc.org"
UCUM = "http://unitsofmeasure.org"
IBUPROFEN_600 = "197806"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def _days_ago(days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")


def _run(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(path, json=body)
    assert resp.status_code == 200, resp.text
    run: dict[str, Any] = resp.json()["extension"]["dev.horismos.run"]
    return run


def _answer(run: dict[str, Any]) -> str:
    if "undecided" in run:
        inputs = run["undecided"]["inputs"]
        return "undecided: " + ", ".join(sorted(f"{i['input']}={i['state']}" for i in inputs))
    return str(run["decision"]["value"])


def _med_safety(
    pid: str, labs: list[dict[str, Any]], *, drafts: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    potassium = fx.observation(pid, "2823-3", 4.2, "mmol/L", category="laboratory")
    return fx.order_sign(
        pid,
        drafts if drafts is not None else [fx.draft_order(pid, IBUPROFEN_600)],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": fx.searchset([]),
            "labs": fx.searchset([potassium, *labs]),
        },
    )


def _egfr_in_components(pid: str, components: list[tuple[str, float]]) -> dict[str, Any]:
    """An eGFR result as the FHIR specification's example writes it: the test's code at the
    top, no value there, one value per equation in ``component``."""
    obs = fx.observation(pid, "33914-3", 0, GFR, category="laboratory", when=_days_ago(1))
    del obs["valueQuantity"]
    obs["component"] = [
        {
            "code": {"coding": [{"system": LOINC, "code": code}]},
            "valueQuantity": {"value": value, "unit": GFR, "system": UCUM, "code": GFR},
        }
        for code, value in components
    ]
    return obs


# --- 1. values in component ----------------------------------------------------------------


def test_an_egfr_whose_values_are_in_its_components_is_read_from_them(client: TestClient) -> None:
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 75, GFR, category="laboratory", when=_days_ago(30))
    newer = _egfr_in_components(pid, [("48642-3", 22), ("48643-1", 26)])
    run = _run(client, MED, _med_safety(pid, [older, newer]))
    # the older 75 would make ibuprofen safe: the newer reading, in its components, decides
    assert _answer(run) == "Contraindicated"


def test_an_egfr_whose_components_carry_no_code_of_ours_is_unread_not_skipped(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 75, GFR, category="laboratory", when=_days_ago(30))
    newer = _egfr_in_components(pid, [("99999-9", 22)])
    resp = client.post(MED, json=_med_safety(pid, [older, newer]))
    run = resp.json()["extension"]["dev.horismos.run"]
    assert _answer(run) == "undecided: egfr=unread"
    [card] = resp.json()["cards"]
    assert "values are in components" in card["detail"]
    stored = client.get(f"/runs/{run['runId']}").json()
    [egfr] = [i for i in stored["inputs"] if i["property"].endswith("egfr")]
    assert [r["source"] for r in egfr["reasons"]] == [f"Observation/{newer['id']}"]


def test_the_complete_twin_with_a_top_level_value_still_decides(client: TestClient) -> None:
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 22, GFR, category="laboratory", when=_days_ago(30))
    newer = fx.observation(pid, "33914-3", 75, GFR, category="laboratory", when=_days_ago(1))
    assert _answer(_run(client, MED, _med_safety(pid, [older, newer]))) == "Safe"


# --- 5. two versions of one resource ---------------------------------------------------------


def _versions(pid: str, final: float, amended: float) -> tuple[dict[str, Any], dict[str, Any]]:
    first = fx.observation(pid, "33914-3", final, GFR, category="laboratory", when=_days_ago(2))
    first["meta"] = {"versionId": "1", "lastUpdated": _days_ago(2)}
    second = copy.deepcopy(first)
    second["status"] = "amended"
    second["valueQuantity"]["value"] = amended
    second["meta"] = {"versionId": "2", "lastUpdated": _days_ago(1)}
    return first, second


@pytest.mark.parametrize("order", ["final-first", "amended-first"])
def test_an_amended_result_beside_its_final_version_is_read_as_amended(
    client: TestClient, order: str
) -> None:
    pid = fx.new_id()
    first, second = _versions(pid, final=75, amended=22)
    labs = [first, second] if order == "final-first" else [second, first]
    run = _run(client, MED, _med_safety(pid, labs))
    assert _answer(run) == "Contraindicated"
    stored = client.get(f"/runs/{run['runId']}").json()
    [note] = [n for n in stored["dataQuality"] if n["rule"] == "newer-version"]
    assert note["readAs"].startswith(f"Observation/{first['id']} (version 2")
    assert note["received"].endswith("status final)")


def test_two_different_records_under_one_id_with_no_order_between_them_are_refused(
    client: TestClient,
) -> None:
    """Nothing says which is the record: the EHR's mistake is named, not guessed around."""
    pid = fx.new_id()
    first, second = _versions(pid, final=75, amended=22)
    del first["meta"], second["meta"]
    second["status"] = "final"
    resp = client.post(MED, json=_med_safety(pid, [first, second]))
    assert resp.status_code == 400
    assert first["id"] in resp.text


# --- 6. primitive extensions -----------------------------------------------------------------


def test_a_patient_with_primitive_extensions_is_read(client: TestClient) -> None:
    """The FHIR specification's Patient example: ``_birthDate`` carries the birth time, and
    Inferno's data extends ``_gender`` and name parts."""
    pid = fx.new_id()
    patient = fx.patient(pid, "1974-12-25")
    patient["_birthDate"] = {
        "extension": [
            {
                "url": "http://hl7.org/fhir/StructureDefinition/patient-birthTime",
                "valueDateTime": "1974-12-25T14:35:45-05:00",
            }
        ]
    }
    patient["gender"] = "male"
    patient["_gender"] = {"id": "g1"}
    patient["name"] = [{"family": "Chalmers", "_family": {"id": "f1"}, "given": ["Peter"]}]
    body = _med_safety(pid, [fx.observation(pid, "33914-3", 75, GFR, category="laboratory")])
    body["prefetch"]["patient"] = patient
    run = _run(client, MED, body)
    assert _answer(run) == "Safe"
    assert not [i for i in run.get("inputs", []) if i.get("property") == "age"]


# --- 8. references as EHRs write them --------------------------------------------------------


def test_a_draft_naming_its_medication_by_reference_to_another_entry_is_read(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    medication = {
        "resourceType": "Medication",
        "id": fx.new_id(),
        "code": {"coding": [{"system": fx.RXNORM, "code": IBUPROFEN_600}]},
    }
    draft = fx.draft_order(pid, IBUPROFEN_600)
    del draft["medicationCodeableConcept"]
    draft["medicationReference"] = {"reference": f"Medication/{medication['id']}"}
    egfr = fx.observation(pid, "33914-3", 22, GFR, category="laboratory")
    body = _med_safety(pid, [egfr], drafts=[draft])
    body["context"]["draftOrders"]["entry"].append({"resource": medication})
    assert _answer(_run(client, MED, body)) == "Contraindicated"


def test_a_subject_written_as_the_bundles_urn_uuid_is_the_patient(client: TestClient) -> None:
    pid = fx.new_id()
    patient_urn = "urn:uuid:" + "0b5c3e1a-6f7d-4a3e-9c1b-2d8e4f6a7b90"
    egfr = fx.observation(pid, "33914-3", 22, GFR, category="laboratory")
    egfr["subject"] = {"reference": patient_urn}
    body = _med_safety(pid, [egfr])
    body["prefetch"]["labs"]["entry"].insert(
        0, {"fullUrl": patient_urn, "resource": fx.patient(pid, "1970-01-01")}
    )
    assert _answer(_run(client, MED, body)) == "Contraindicated"


# --- 9. context triage must not ignore ---------------------------------------------------------


def _triage_with_spo2(
    pid: str, oxygen: tuple[str, float] | None, saturation: float = 95
) -> dict[str, Any]:
    """Unremarkable vital signs and an SpO2 as US Core's pulse oximetry profile writes it, with
    the inhaled oxygen (LOINC code, value) as its component when given."""
    vitals = fx.vital_signs(pid, skip={"59408-5"})
    spo2 = fx.observation(pid, "59408-5", saturation, "%")
    spo2["code"]["coding"].append({"system": LOINC, "code": "2708-6"})
    if oxygen is not None:
        code, value = oxygen
        unit = "L/min" if code == "3151-8" else "%"
        spo2["component"] = [
            {
                "code": {"coding": [{"system": LOINC, "code": code}]},
                "valueQuantity": {"value": value, "unit": unit, "system": UCUM, "code": unit},
            }
        ]
    return fx.triage_request(pid, vitals=[*vitals, spo2])


@pytest.mark.parametrize(
    ("oxygen", "spo2", "acuity"),
    [
        # 95 % on 6 L/min: the saturation on air could be below 90: not decided, and said so
        (("3151-8", 6), 95, "undecided: spo2=refused"),
        (("3150-0", 40), 95, "undecided: spo2=refused"),  # breathing 40 % oxygen
        (("3151-8", 6), 85, "Immediate"),  # below 90 even on oxygen: below 90 on air too
        (("3151-8", 0), 95, "NonUrgent"),  # measured on air, and said so
        (None, 95, "NonUrgent"),  # the complete twin: nothing says oxygen, on air
    ],
)
def test_an_spo2_measured_on_supplemental_oxygen_is_not_reassuring(
    client: TestClient, oxygen: tuple[str, float] | None, spo2: float, acuity: str
) -> None:
    pid = fx.new_id()
    assert _answer(_run(client, TRIAGE, _triage_with_spo2(pid, oxygen, spo2))) == acuity


# --- 3. real codes outside the lists: a temperature taken at one site ---------------------------


@pytest.mark.parametrize("code", ["8331-1", "8333-7", "8328-7", "76010-8", "8310-5"])
def test_a_temperature_coded_by_its_site_is_a_body_temperature(
    client: TestClient, code: str
) -> None:
    """Synthea writes an oral temperature (LOINC 8331-1) alone, without FHIR's 8310-5: a fever of
    39.4 °C is read, not ignored (8310-5 is the complete twin)."""
    pid = fx.new_id()
    vitals = fx.vital_signs(pid, skip={"8310-5"})
    fever = fx.observation(pid, code, 39.4, "Cel")
    assert _answer(_run(client, TRIAGE, fx.triage_request(pid, vitals=[*vitals, fever]))) == (
        "Urgent"
    )
