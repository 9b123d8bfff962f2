"""One hook call per card the bundled deployments declare: the request that makes each card.

Keyed by ``(service id, card summary)``; ``tests/cds/test_cds_card_markdown.py`` checks that
every ``horis:card`` of every bundled service has a scenario here, so a new card needs one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.cds import clinical as fx
from tests.support import opioid_cases as oc

TRIAGE = "horismos-triage"
MED_SAFETY = "horismos-med-safety"
MED_SAFETY_SELECT = "horismos-med-safety-order-select"
#: when every reading was taken: half an hour ago, on the minute (fresh for every horis:maxAge)
TAKEN = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0).isoformat()


def triage(
    *,
    vitals: Sequence[tuple[str, float, str]] = (),
    symptoms: Sequence[str] = (),
    reason: str | None = None,
    complete: bool = True,
) -> dict[str, Any]:
    """A triage call with ``vitals`` (code, value, unit); with ``complete`` the vital signs not
    given come as unremarkable readings, so that triage can decide."""
    pid, eid = "p-" + fx.new_id(), "e-" + fx.new_id()
    given = {code for code, _, _ in vitals}
    if complete:
        vitals = [
            *vitals,
            *((code, v, unit) for code, (v, unit) in fx.NORMAL_VITALS.items() if code not in given),
        ]
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, birth_date="1950-04-02"),
            "encounter": fx.encounter(eid, pid, reason),
            "vitals": fx.searchset(
                [fx.observation(pid, code, v, unit, when=TAKEN) for code, v, unit in vitals]
            ),
            "conditions": fx.searchset([fx.condition(pid, s) for s in symptoms]),
        },
    )


def med_safety(*, orders: list[str], labs: Sequence[tuple[str, float, str]] = ()) -> dict[str, Any]:
    pid = "p-" + fx.new_id()
    drafts = [fx.draft_order(pid, code) for code in orders]
    return fx.order_sign(
        pid,
        drafts,
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, birth_date="1950-04-02"),
            "allergies": fx.searchset([]),
            "labs": fx.searchset(
                [
                    fx.observation(pid, code, v, unit, category="laboratory", when=TAKEN)
                    for code, v, unit in labs
                ]
            ),
        },
    )


def _as_order_select(body: dict[str, Any]) -> dict[str, Any]:
    drafts = body["context"]["draftOrders"]["entry"]
    body["hook"] = "order-select"
    body["context"]["selections"] = [f"MedicationRequest/{e['resource']['id']}" for e in drafts]
    return body


OPIOID_PV, OPIOID_OS = "opioidcds-11-patient-view", "opioidcds-11-order-select"


def opioid(
    service: str,
    hook: str,
    *,
    drafts: Sequence[dict[str, Any]] = (),
    stored: Sequence[dict[str, Any]] = (),
    born: bool = True,
) -> dict[str, Any]:
    """A recommendation 11 call with its prefetch filled as the EHR fills it (``born``: whether
    the patient's record has a birth date)."""
    pid = "p-" + fx.new_id()
    patient = oc.patient(pid)
    if not born:
        del patient["birthDate"]
    context: dict[str, Any] = {"patientId": pid}
    drafts = [{**d, "subject": {"reference": f"Patient/{pid}"}} for d in drafts]
    if hook == "order-select":
        context["draftOrders"] = {
            "resourceType": "Bundle",
            "type": "collection",
            "entry": [{"resource": d} for d in drafts],
        }
        context["selections"] = [f"MedicationRequest/{d['id']}" for d in drafts]
    records = [{**r, "subject": {"reference": f"Patient/{pid}"}} for r in stored]
    prefetch = {
        "patient": patient,
        "medications": fx.searchset(records),
        "conditions": fx.searchset([]),
        "encounters": fx.searchset([]),
    }
    if hook == "order-select":  # it reads what the patient reports taking, too
        prefetch["statements"] = fx.searchset([])
    return fx.hook_request(hook, context, fhir_server=None, prefetch=prefetch)


def _opioid_on_record() -> dict[str, Any]:
    return oc.order("o-" + fx.new_id(), "p", oc.OXYCODONE_IR_5, authored=oc.ago(15))


def _benzodiazepine_on_record() -> dict[str, Any]:
    return oc.order("b-" + fx.new_id(), "p", oc.TEMAZEPAM_20, authored=oc.ago(40))


def _opioid_draft() -> dict[str, Any]:
    return oc.order("d-" + fx.new_id(), "p", oc.OXYCODONE_ER_10)


HEART_RATE, SYSTOLIC, SPO2, TEMPERATURE = "8867-4", "8480-6", "59408-5", "8310-5"
EGFR, POTASSIUM = "33914-3", "2823-3"
CHEST_PAIN, HEADACHE = "29857009", "25064002"
IBUPROFEN, LISINOPRIL = "5640", "29046"

#: (service, card summary) → the request that makes that card, and words the card must show
SCENARIOS: dict[tuple[str, str], tuple[Callable[[], dict[str, Any]], tuple[str, ...]]] = {
    (TRIAGE, "Triage acuity: Immediate"): (
        lambda: triage(
            vitals=[(SYSTOLIC, 85, "mm[Hg]"), (HEART_RATE, 130, "/min")], symptoms=[CHEST_PAIN]
        ),
        ("Immediate", "systolic blood pressure 85 mmHg", "See the patient now"),
    ),
    (TRIAGE, "Triage acuity: Urgent"): (
        lambda: triage(vitals=[(TEMPERATURE, 39.4, "Cel"), (SPO2, 93, "%")]),
        ("Urgent", "oxygen saturation 93 %"),
    ),
    (TRIAGE, "Triage acuity: Standard"): (
        lambda: triage(symptoms=[HEADACHE]),
        ("Standard", "Headache"),
    ),
    (TRIAGE, "Triage acuity: Non-urgent"): (
        lambda: triage(vitals=[(HEART_RATE, 72, "/min")]),
        ("Non-urgent", "heart rate 72 /min"),
    ),
    # a complaint in free text and no language model: what the structured data give leads
    (TRIAGE, "Triage not completed, the rules give Immediate: a nurse must assess"): (
        lambda: triage(
            vitals=[(HEART_RATE, 130, "/min")], symptoms=[CHEST_PAIN], reason="crushing chest pain"
        ),
        ("the free text was not used", "heart rate 130 /min", "Chest pain", "nurse must assess"),
    ),
    (TRIAGE, "Triage not completed, the rules give Urgent: a nurse must assess"): (
        lambda: triage(vitals=[(TEMPERATURE, 39.4, "Cel")], reason="feels hot"),
        ("the free text was not used", "body temperature 39.4 °C"),
    ),
    (TRIAGE, "Triage not completed, the rules give Standard: a nurse must assess"): (
        lambda: triage(symptoms=[HEADACHE], reason="headache for two days"),
        ("the free text was not used", "Headache"),
    ),
    (TRIAGE, "Triage not completed, the rules give Non-urgent: a nurse must assess"): (
        lambda: triage(vitals=[(HEART_RATE, 72, "/min")], reason="sudden chest pain"),
        ("no language model is configured", "ended at: Escalation to the triage nurse"),
    ),
    (TRIAGE, "Triage needs a nurse's assessment"): (
        lambda: triage(reason="sudden chest pain", complete=False),
        ("no language model is configured", "ended at: Escalation to the triage nurse"),
    ),
    (TRIAGE, "Triage not decided: vital signs or conditions incomplete"): (
        lambda: triage(vitals=[(HEART_RATE, 110, "/min")], complete=False),
        (
            "Acuity not decided",
            "No oxygen saturation reading in the data the service received",
            "on the rest of the data the rules give Urgent, which is not a decision",
        ),
    ),
    (MED_SAFETY, "Medication safety not checked: lab results or allergies incomplete"): (
        lambda: med_safety(orders=[IBUPROFEN]),
        ("Order safety not decided", "No eGFR reading in the data the service received"),
    ),
    (MED_SAFETY, "Contraindicated medication order"): (
        lambda: med_safety(orders=[IBUPROFEN], labs=[(EGFR, 25, "mL/min/{1.73_m2}")]),
        ("Contraindicated", "eGFR 25 mL/min/1.73 m²", "Ibuprofen"),
    ),
    (MED_SAFETY, "Medication order needs caution"): (
        lambda: med_safety(orders=[LISINOPRIL], labs=[(POTASSIUM, 5.9, "mmol/L")]),
        ("Caution", "serum potassium 5.9 mmol/L", "Lisinopril"),
    ),
    (
        OPIOID_PV,
        "Weigh the risks: opioid and benzodiazepine or other CNS depressant on record together",
    ): (
        lambda: opioid(
            OPIOID_PV, "patient-view", stored=[_opioid_on_record(), _benzodiazepine_on_record()]
        ),
        ("oxycodone hydrochloride 5 MG Oral Tablet", "temazepam 20 MG Oral Capsule"),
    ),
    (OPIOID_PV, "Opioid and benzodiazepine check not completed: data missing"): (
        lambda: opioid(
            OPIOID_PV,
            "patient-view",
            stored=[_opioid_on_record(), _benzodiazepine_on_record()],
            born=False,
        ),
        ("not decided", "No age reading in the data"),
    ),
    (
        OPIOID_OS,
        "Caution: {{instance.shortDrugName}} with a benzodiazepine or CNS depressant",
    ): (
        lambda: opioid(
            OPIOID_OS,
            "order-select",
            drafts=[_opioid_draft()],
            stored=[_benzodiazepine_on_record()],
        ),
        ("12 HR oxycodone hydrochloride 10 MG", "temazepam 20 MG Oral Capsule"),
    ),
    (OPIOID_OS, "Opioid and benzodiazepine check not completed: data missing"): (
        lambda: opioid(
            OPIOID_OS,
            "order-select",
            drafts=[_opioid_draft()],
            stored=[_benzodiazepine_on_record()],
            born=False,
        ),
        ("not decided", "No age reading in the data"),
    ),
}

#: (service, card summary) → words the decision record behind the card shows: the proof left the
#: card for it (``tests/cds/card_markdown.py`` ``decision_record_text``)
RECORD_WORDS: dict[tuple[str, str], tuple[str, ...]] = {
    (TRIAGE, "Triage acuity: Immediate"): (
        "Systolic blood pressure: 85 mmHg",
        "Heart rate: 130 /min",
        "Chest pain",
    ),
    (TRIAGE, "Triage acuity: Urgent"): ("Body temperature: 39.4 °C", "Oxygen saturation: 93 %"),
    (TRIAGE, "Triage acuity: Standard"): ("Has symptom: Headache",),
    (TRIAGE, "Triage acuity: Non-urgent"): ("Heart rate: 72 /min",),
    (TRIAGE, "Triage not completed, the rules give Immediate: a nurse must assess"): (
        "Heart rate: 130 /min",
        "Chest pain",
    ),
    (TRIAGE, "Triage not completed, the rules give Urgent: a nurse must assess"): (
        "Body temperature: 39.4 °C",
    ),
    (TRIAGE, "Triage not completed, the rules give Standard: a nurse must assess"): (
        "Has symptom: Headache",
    ),
    (TRIAGE, "Triage not decided: vital signs or conditions incomplete"): (
        "Not decided",
        "No oxygen saturation reading in the data the service received",
        "SpO2 below 90 %",
        "On the data that could be used the rules give acuity: Urgent",
    ),
    (MED_SAFETY, "Medication safety not checked: lab results or allergies incomplete"): (
        "No eGFR reading in the data the service received",
        "NSAID with eGFR below 30",
    ),
    (MED_SAFETY, "Contraindicated medication order"): ("eGFR: 25 mL/min/1.73 m²", "Ibuprofen"),
    (MED_SAFETY, "Medication order needs caution"): ("Serum potassium: 5.9 mmol/L", "Lisinopril"),
    (
        OPIOID_PV,
        "Weigh the risks: opioid and benzodiazepine or other CNS depressant on record together",
    ): ("RxNorm 1049621", "RxNorm 104693", "Age: 40 years"),
    (
        OPIOID_OS,
        "Caution: {{instance.shortDrugName}} with a benzodiazepine or CNS depressant",
    ): ("RxNorm 1049502", "RxNorm 104693"),
    (OPIOID_PV, "Opioid and benzodiazepine check not completed: data missing"): (
        "Not decided — data it depends on is missing or was not used (age)",
        "No age reading in the data",
    ),
}

# medication safety while the order is chosen: the same cards, at order-select
for (_service, _summary), (_make, _words) in list(SCENARIOS.items()):
    if _service == MED_SAFETY:
        SCENARIOS[(MED_SAFETY_SELECT, _summary)] = (
            lambda make=_make: _as_order_select(make()),
            _words,
        )
        RECORD_WORDS[(MED_SAFETY_SELECT, _summary)] = RECORD_WORDS[(MED_SAFETY, _summary)]
