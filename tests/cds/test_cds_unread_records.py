"""Records that are there but cannot be read, over HTTP: each once answered with confidence.

Every call sends everything else the decision needs, complete and clear, and one record shaped
the way real EHRs send it. Each answer is either the right decision (the record was read: an
OID for RxNorm, a drug in a contained Medication, a substance in a reaction, a recurrence, a
coded chief complaint, a bound that decides) or an undecided warning that names the record and
why it could not be read — never the confident "Safe" or "Non-urgent" it used to be, never a
5xx. Beside each refusal, a complete case of the same shape still decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.cds.card_markdown import check_card, check_summary, decision_record_text

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
TRIAGE = "/cds-services/horismos-triage"
RXNORM_OID = "urn:oid:2.16.840.1.113883.6.88"
NDC = "http://hl7.org/fhir/sid/ndc"
ICD10CM = "http://hl7.org/fhir/sid/icd-10-cm"
GFR = "mL/min/{1.73_m2}"
IBUPROFEN, AMOXICILLIN, METFORMIN = "5640", "723", "6809"
CHEST_PAIN = "29857009"
MED_UNDECIDED = "Medication safety not checked: lab results or allergies incomplete"
TRIAGE_UNDECIDED = "Triage not decided: vital signs or conditions incomplete"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


# --- helpers -----------------------------------------------------------------------------------


def _med(
    pid: str,
    drafts: list[dict[str, Any]],
    *,
    egfr: float | None = 22,
    labs: list[dict[str, Any]] | None = None,
    allergies: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An order-sign call: these drafts, a recent eGFR (22 unless told) and normal potassium,
    an answered allergy search (empty unless told)."""
    if labs is None:
        labs = [fx.observation(pid, "2823-3", 4.2, "mmol/L", category="laboratory")]
        if egfr is not None:
            labs.append(fx.observation(pid, "33914-3", egfr, GFR, category="laboratory"))
    return fx.order_sign(
        pid,
        drafts,
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": allergies if allergies is not None else fx.searchset([]),
            "labs": fx.searchset(labs),
        },
    )


def _triage(
    pid: str,
    *,
    vitals: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    encounter: dict[str, Any] | None = None,
    conditions_bundle: dict[str, Any] | None = None,
) -> dict[str, Any]:
    found = conditions_bundle or fx.searchset(conditions or [])
    return fx.triage_request(pid, vitals=vitals, conditions=found, encounter=encounter)


def _decided(resp: Any) -> str:
    assert resp.status_code == 200, resp.text
    run = resp.json()["extension"]["dev.horismos.run"]
    assert "undecided" not in run, run
    return str(run["decision"]["value"])


def _undecided(resp: Any, summary: str) -> tuple[dict[str, Any], str]:
    """The run and its card's detail, asserting nothing was decided and the card warns."""
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    run = answer["extension"]["dev.horismos.run"]
    assert "decision" not in run, run
    [card] = [c for c in answer["cards"] if c["summary"] == summary]
    assert card["indicator"] == "warning"
    check_card(card["detail"])  # within the card budget: three inputs at most, the rest on record
    check_summary(card["summary"])
    return run, str(card["detail"])


def _states(run: dict[str, Any]) -> dict[str, str]:
    return {i["input"]: i["state"] for i in run["undecided"]["inputs"]}


def _order(pid: str, medication: dict[str, Any], **extra: Any) -> dict[str, Any]:
    order = fx.draft_order(pid, IBUPROFEN)
    del order["medicationCodeableConcept"]
    return {**order, **medication, **extra}


# --- the drug of a draft order -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "text"),
    [
        ("197806", "Ibuprofen 600 MG Oral Tablet"),
        ("834022", "Ketorolac Tromethamine 10 MG Oral Tablet"),
        ("860092", "1 ML Ketorolac Tromethamine 15 MG/ML Injection"),
    ],
    ids=["ibuprofen-scd", "ketorolac-tablet", "ketorolac-injection"],
)
def test_an_nsaid_ordered_by_product_is_contraindicated_at_egfr_22(
    client: TestClient, code: str, text: str
) -> None:
    """An NSAID ordered the way EHRs order it, by RxNorm clinical drug, was unread (the
    deployment listed ingredients only; ketorolac not at all): it is the NSAID it is."""
    pid = fx.new_id()
    scd = _order(
        pid,
        {
            "medicationCodeableConcept": {
                "coding": [{"system": fx.RXNORM, "code": code}],
                "text": text,
            }
        },
    )
    assert _decided(client.post(MED, json=_med(pid, [scd]))) == "Contraindicated"


def test_an_nsaid_product_the_lists_do_not_hold_is_not_called_safe(client: TestClient) -> None:
    """Celecoxib (RxNorm SCD 205323) is an NSAID the deployment does not list: the order is
    unread and the card names it, rather than "Safe" at eGFR 22."""
    pid = fx.new_id()
    scd = _order(
        pid,
        {
            "medicationCodeableConcept": {
                "coding": [{"system": fx.RXNORM, "code": "205323"}],
                "text": "celecoxib 200 MG Oral Capsule",
            }
        },
    )
    resp = client.post(MED, json=_med(pid, [scd]))
    run, detail = _undecided(resp, MED_UNDECIDED)
    assert _states(run) == {"hasDraftOrder": "unread"}
    assert "'celecoxib 200 MG Oral Capsule'" in detail
    assert "could not be read: RxNorm code 205323 is not one this service lists" in detail
    [card] = resp.json()["cards"]
    assert "NSAID with eGFR below 30 (Contraindicated)" in decision_record_text(client, card)


@pytest.mark.parametrize(
    ("medication", "said"),
    [
        (
            {"medicationCodeableConcept": {"coding": [{"system": NDC, "code": "0573-0164-40"}]}},
            "it is coded only in NDC, which this service does not read",
        ),
        (
            {"medicationCodeableConcept": {"text": "Advil 600 mg"}},
            "'Advil 600 mg'",
        ),
        (
            {"medicationReference": {"reference": "Medication/not-sent"}},
            "refers to Medication/not-sent, which the service did not receive",
        ),
    ],
    ids=["ndc", "text-only", "unsent-medication"],
)
def test_a_draft_order_the_service_cannot_identify_is_named_not_called_safe(
    client: TestClient, medication: dict[str, Any], said: str
) -> None:
    pid = fx.new_id()
    run, detail = _undecided(
        client.post(MED, json=_med(pid, [_order(pid, medication)])), MED_UNDECIDED
    )
    assert "hasDraftOrder" in _states(run)
    assert said in detail


def test_a_drug_in_a_contained_medication_or_coded_by_oid_is_read(client: TestClient) -> None:
    """The same ibuprofen through a contained Medication, or with RxNorm named by its OID, is
    the NSAID it is: contraindicated at eGFR 22, decided."""
    pid = fx.new_id()
    contained = _order(
        pid,
        {
            "contained": [
                {
                    "resourceType": "Medication",
                    "id": "med1",
                    "code": {"coding": [{"system": fx.RXNORM, "code": IBUPROFEN}]},
                }
            ],
            "medicationReference": {"reference": "#med1"},
        },
    )
    assert _decided(client.post(MED, json=_med(pid, [contained]))) == "Contraindicated"
    by_oid = _order(
        pid, {"medicationCodeableConcept": {"coding": [{"system": RXNORM_OID, "code": IBUPROFEN}]}}
    )
    assert _decided(client.post(MED, json=_med(pid, [by_oid]))) == "Contraindicated"
    versioned = _order(
        pid,
        {"medicationCodeableConcept": {"coding": [{"system": fx.RXNORM + "|2024", "code": "723"}]}},
    )
    assert _decided(client.post(MED, json=_med(pid, [versioned], egfr=80))) == "Safe"


def test_one_unreadable_draft_does_not_hide_a_contraindication_of_another(
    client: TestClient,
) -> None:
    """Decided on what is known when nothing unknown could change it: an NSAID at eGFR 22 is
    contraindicated whatever the other, text-only, order is."""
    pid = fx.new_id()
    text_only = _order(pid, {"medicationCodeableConcept": {"text": "home medication"}})
    answer = client.post(MED, json=_med(pid, [fx.draft_order(pid, IBUPROFEN), text_only]))
    assert _decided(answer) == "Contraindicated"


# --- allergies -------------------------------------------------------------------------------


def _allergies(*records: dict[str, Any]) -> dict[str, Any]:
    return fx.searchset(list(records))


def test_a_penicillin_allergy_coded_in_rxnorm_is_not_read_as_no_allergy(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    allergy = fx.allergy(pid, "91936005")
    allergy["code"] = {"coding": [{"system": fx.RXNORM, "code": "70618", "display": "Penicillin"}]}
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=_allergies(allergy))
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"hasAllergy": "unread"}
    assert "'Penicillin'" in detail and "RxNorm code 70618 is not one this service lists" in detail


def test_an_allergy_without_a_clinical_status_is_not_left_out(client: TestClient) -> None:
    pid = fx.new_id()
    allergy = fx.allergy(pid, "91936005")
    del allergy["clinicalStatus"]
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=_allergies(allergy))
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"hasAllergy": "unread"}
    assert "it has no clinical status, which decides whether it is read" in detail


def test_a_penicillin_named_only_as_a_reactions_substance_is_read(client: TestClient) -> None:
    pid = fx.new_id()
    allergy = fx.allergy(pid, "91936005")
    allergy["code"] = {"text": "Drug allergy"}
    allergy["reaction"] = [
        {
            "substance": {"coding": [{"system": fx.SNOMED, "code": "764146007"}]},
            "manifestation": [{"text": "hives"}],
        }
    ]
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=_allergies(allergy))
    assert _decided(client.post(MED, json=body)) == "Contraindicated"


def test_an_error_inside_the_allergy_search_is_not_read_as_no_allergy(client: TestClient) -> None:
    """The EHR's allergy service was down: the searchset carries an OperationOutcome error and no
    allergies. Amoxicillin was "Safe"; now the card quotes the error."""
    pid = fx.new_id()
    outcome = {
        "resourceType": "OperationOutcome",
        "issue": [
            {"severity": "error", "code": "exception", "diagnostics": "allergy service unavailable"}
        ],
    }
    allergies = {
        **fx.searchset([]),
        "entry": [{"resource": outcome, "search": {"mode": "outcome"}}],
    }
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=allergies)
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"hasAllergy": "truncated"}
    assert "came back with an error from the EHR (allergy service unavailable)" in detail
    # a warning is a note on the run, and the answer stands
    outcome["issue"][0]["severity"] = "warning"
    answer = client.post(MED, json={**body, "hookInstance": str(uuid.uuid4())})
    assert _decided(answer) == "Safe"
    stored = client.get(f"/runs/{answer.json()['extension']['dev.horismos.run']['runId']}").json()
    assert any(n["rule"] == "server-warning" for n in stored["dataQuality"])


# --- lab values --------------------------------------------------------------------------------


def _egfr(pid: str, when: str | None = None, **value: Any) -> dict[str, Any]:
    lab = fx.observation(pid, "33914-3", 0, GFR, category="laboratory", when=when)
    del lab["valueQuantity"]
    return {**lab, **value}


def _ago(days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")


def test_an_egfr_reported_as_a_bound_decides_when_the_whole_bound_does(client: TestClient) -> None:
    """'<30' was read as 30 (the comparator dropped): an NSAID was then not contraindicated. Every
    eGFR below 30 contraindicates it, so it is decided; for metformin '<45' could be either side
    of 30, so it is not."""
    pid = fx.new_id()
    below_30 = _egfr(
        pid,
        valueQuantity={"value": 30, "comparator": "<", "unit": GFR, "system": fx.UCUM, "code": GFR},
    )
    nsaid = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[below_30])
    assert _decided(client.post(MED, json=nsaid)) == "Contraindicated"
    below_45 = _egfr(
        pid,
        valueQuantity={"value": 45, "comparator": "<", "unit": GFR, "system": fx.UCUM, "code": GFR},
    )
    metformin = _med(pid, [fx.draft_order(pid, METFORMIN)], labs=[below_45])
    run, detail = _undecided(client.post(MED, json=metformin), MED_UNDECIDED)
    assert _states(run) == {"egfr": "refused"}
    assert "a bound, and the rules' thresholds lie within it" in detail


def test_a_newer_egfr_given_as_text_is_not_skipped_for_an_older_one(client: TestClient) -> None:
    """A newer eGFR written as valueString '25' (no unit) was skipped, and last month's 60 called
    ibuprofen safe. It is refused as it is, and the older one is not used in its place; the same
    text with the unit written out is read."""
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 60, GFR, category="laboratory", when=_ago(30))
    newer = _egfr(pid, when=_ago(1), valueString="25")
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[older, newer])
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"egfr": "refused"}
    assert "eGFR reading not used: the value has no unit (the reading was 25)" in detail
    with_unit = _egfr(pid, when=_ago(1), valueString=f"25 {GFR}")
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[older, with_unit])
    assert _decided(client.post(MED, json=body)) == "Contraindicated"


# --- triage: symptoms -----------------------------------------------------------------------------


def _condition(pid: str, **changes: Any) -> dict[str, Any]:
    c = fx.condition(pid, CHEST_PAIN)
    c.update(changes)
    return {k: v for k, v in c.items() if v is not None}


def test_chest_pain_coded_in_icd10cm_decides_like_its_snomed_twin(client: TestClient) -> None:
    """R07.9 "Chest pain, unspecified" as an encounter diagnosis, and R07.89 as the Encounter's
    coded reason, are the Urgent chest pain the SNOMED CT code is."""
    pid = fx.new_id()
    snomed = _condition(pid)
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[snomed]))) == "Urgent"
    pid = fx.new_id()
    icd = _condition(
        pid,
        code={"coding": [{"system": ICD10CM, "code": "R07.9"}], "text": "Chest pain, unspecified"},
    )
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[icd]))) == "Urgent"
    pid = fx.new_id()
    encounter = fx.encounter_of(pid)
    encounter["reasonCode"] = [{"coding": [{"system": ICD10CM, "code": "R07.89"}]}]
    assert _decided(client.post(TRIAGE, json=_triage(pid, encounter=encounter))) == "Urgent"


def test_an_icd10cm_code_triage_does_not_list_is_not_read_as_no_symptom(
    client: TestClient,
) -> None:
    """Triage's lists are complete in SNOMED CT only: an ICD-10-CM code none lists (type 2
    diabetes, E11.9) might be a symptom under another name, so the record is unread."""
    pid = fx.new_id()
    icd = _condition(
        pid,
        code={
            "coding": [{"system": ICD10CM, "code": "E11.9"}],
            "text": "Type 2 diabetes mellitus without complications",
        },
    )
    run, detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, conditions=[icd])), TRIAGE_UNDECIDED
    )
    assert _states(run) == {"hasSymptom": "unread"}
    assert "'Type 2 diabetes mellitus without complications'" in detail


def test_a_chest_pain_without_a_category_is_read_as_the_patients(client: TestClient) -> None:
    """A category says where a diagnosis was recorded, not whose it is: a chest pain recorded
    without one (as Synthea writes it) is the Urgent chest pain it says; one whose only
    category is another one is not a presenting symptom, and the vital signs decide."""
    pid = fx.new_id()
    no_category = _condition(pid, category=None)
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[no_category]))) == "Urgent"
    pid = fx.new_id()
    concern = _condition(
        pid,
        category=[
            {
                "coding": [
                    {
                        "system": "http://hl7.org/fhir/us/core/CodeSystem/condition-category",
                        "code": "health-concern",
                    }
                ]
            }
        ],
    )
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[concern]))) != "Urgent"


def test_a_recurrence_of_chest_pain_and_a_coded_chief_complaint_are_read(
    client: TestClient,
) -> None:
    """'recurrence' is active in HL7's condition-clinical system, and a chief complaint the
    EHR coded on the Encounter is a symptom: both are the Urgent chest pain they say."""
    pid = fx.new_id()
    status = "http://terminology.hl7.org/CodeSystem/condition-clinical"
    recurrence = _condition(
        pid, clinicalStatus={"coding": [{"system": status, "code": "recurrence"}]}
    )
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[recurrence]))) == "Urgent"
    pid = fx.new_id()
    encounter = fx.encounter_of(pid)
    encounter["reasonCode"] = [{"coding": [{"system": fx.SNOMED, "code": CHEST_PAIN}]}]
    assert _decided(client.post(TRIAGE, json=_triage(pid, encounter=encounter))) == "Urgent"


def test_a_condition_triage_does_not_list_still_decides(client: TestClient) -> None:
    """The complete case: a diabetes problem (SNOMED CT, a system triage's lists are complete
    in) is not a triage symptom, and the vital signs decide."""
    pid = fx.new_id()
    diabetes = fx.condition(pid, "44054006")
    assert _decided(client.post(TRIAGE, json=_triage(pid, conditions=[diabetes]))) == "NonUrgent"


# --- triage: readings in time ------------------------------------------------------------------


def _heart_rate(pid: str, value: float, when: datetime) -> dict[str, Any]:
    return fx.observation(pid, "8867-4", value, "/min", when=when.isoformat(timespec="seconds"))


def test_a_reading_stamped_in_the_future_is_refused_not_latest(client: TestClient) -> None:
    """158/min 15 minutes ago beside an 82 stamped three hours ahead: the future one was
    "latest" and triage said Non-urgent. It is refused and named."""
    pid = fx.new_id()
    now = datetime.now(UTC)
    vitals = [
        _heart_rate(pid, 158, now - timedelta(minutes=15)),
        _heart_rate(pid, 82, now + timedelta(hours=3)),
        *fx.vital_signs(pid, skip={"8867-4"}),
    ]
    run, detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, vitals=vitals)), TRIAGE_UNDECIDED
    )
    assert _states(run) == {"heartRate": "refused"}
    assert "after the time of this call" in detail


def test_heart_rates_at_one_instant_that_disagree_are_conflicting(client: TestClient) -> None:
    """84 and 162 at the same instant: list order used to pick one. 84 and 86 give the same
    answer under every rule, so they still decide."""
    pid = fx.new_id()
    at = datetime.now(UTC) - timedelta(minutes=10)
    rest = fx.vital_signs(pid, skip={"8867-4"})
    disagree = [_heart_rate(pid, 84, at), _heart_rate(pid, 162, at), *rest]
    run, detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, vitals=disagree)), TRIAGE_UNDECIDED
    )
    assert _states(run) == {"heartRate": "conflicting"}
    assert "Heart rate readings disagree: 84 /min" in detail and "162 /min" in detail
    alike = [_heart_rate(pid, 84, at), _heart_rate(pid, 86, at), *rest]
    assert _decided(client.post(TRIAGE, json=_triage(pid, vitals=alike))) == "NonUrgent"


# --- invalid resources ------------------------------------------------------------------------


def test_an_invalid_resource_the_decision_does_not_read_costs_nothing(client: TestClient) -> None:
    """An Encounter without its required class inside the conditions search made the whole call
    a 400: the EHR showed no card. It is left out and noted; triage decides."""
    pid = fx.new_id()
    broken = fx.encounter_of(pid)
    del broken["class"]
    bundle = fx.searchset([fx.condition(pid, CHEST_PAIN), broken])
    answer = client.post(TRIAGE, json=_triage(pid, conditions_bundle=bundle))
    assert _decided(answer) == "Urgent"
    stored = client.get(f"/runs/{answer.json()['extension']['dev.horismos.run']['runId']}").json()
    [note] = [n for n in stored["dataQuality"] if n["rule"] == "invalid-resource"]
    assert f"Encounter/{broken['id']}" in note["message"] and "class" in note["message"]


def test_an_invalid_resource_that_could_change_the_decision_is_named(client: TestClient) -> None:
    """A heart-rate Observation dated "yesterday" (no FHIR dateTime): not read, and triage waits."""
    pid = fx.new_id()
    broken = fx.observation(pid, "8867-4", 160, "/min", when="yesterday")
    vitals = [broken, *fx.vital_signs(pid, skip={"8867-4"})]
    run, detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, vitals=vitals)), TRIAGE_UNDECIDED
    )
    assert _states(run)["heartRate"] == "unread"
    assert "an observation could not be read: it is not valid FHIR: effective date time" in detail
    stored = client.get(f"/runs/{run['runId']}").json()
    [heart] = [i for i in stored["inputs"] if i["property"].endswith("#heartRate")]
    assert f"Observation/{broken['id']}" in [r["source"] for r in heart["reasons"]]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"status": "done"}, "status: 'done' is not a code R4 allows here"),
        ({"value": "160"}, "value quantity value: must be a number, not a string"),
    ],
    ids=["status-outside-its-value-set", "number-as-text"],
)
def test_a_reading_r4_refuses_but_a_lenient_parser_reads_is_named(
    client: TestClient, change: dict[str, str], said: str
) -> None:
    """A heart rate of 160 with ``status: "done"`` (no R4 status: it may not be a result at all),
    or its value sent as the text "160", was read as a heart rate of 160. It is not read: triage
    waits and says why. The same reading, final and numeric, decides."""
    pid = fx.new_id()
    broken = fx.observation(pid, "8867-4", 160, "/min")
    if "status" in change:
        broken["status"] = change["status"]
    else:
        broken["valueQuantity"]["value"] = change["value"]
    vitals = [broken, *fx.vital_signs(pid, skip={"8867-4"})]
    run, detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, vitals=vitals)), TRIAGE_UNDECIDED
    )
    assert _states(run)["heartRate"] == "unread"
    assert said in detail
    stored = client.get(f"/runs/{run['runId']}").json()
    [note] = [n for n in stored["dataQuality"] if n["rule"] == "invalid-resource"]
    assert f"Observation/{broken['id']}" in note["message"]
    whole = [fx.observation(pid, "8867-4", 160, "/min"), *fx.vital_signs(pid, skip={"8867-4"})]
    assert _decided(client.post(TRIAGE, json=_triage(pid, vitals=whole)))


def test_two_draft_orders_under_one_id_are_both_checked(client: TestClient) -> None:
    """Amoxicillin and ibuprofen sent under one id were one order (the first): at eGFR 22 the
    NSAID went unchecked. Both are read, and the clash is recorded."""
    pid = fx.new_id()
    amoxicillin = fx.draft_order(pid, AMOXICILLIN)
    ibuprofen = {**fx.draft_order(pid, IBUPROFEN), "id": amoxicillin["id"]}
    answer = client.post(MED, json=_med(pid, [amoxicillin, ibuprofen]))
    assert _decided(answer) == "Contraindicated"
    stored = client.get(f"/runs/{answer.json()['extension']['dev.horismos.run']['runId']}").json()
    assert any(
        v["code"] == "duplicate-instance" and "both are read" in v["message"]
        for v in stored["inputViolations"]
    )


def test_an_allergy_whose_status_is_text_only_is_not_left_out(client: TestClient) -> None:
    """clinicalStatus written out as "Active", with no coding: the filter cannot read it, so the
    allergy is unread — amoxicillin is not called safe."""
    pid = fx.new_id()
    allergy = fx.allergy(pid, "91936005")
    allergy["clinicalStatus"] = {"text": "Active"}
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=_allergies(allergy))
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"hasAllergy": "unread"}
    assert "it has no coded clinical status" in detail


# --- what a second look found -------------------------------------------------------------


def test_a_newer_egfr_under_another_of_its_loinc_codes_decides(client: TestClient) -> None:
    """CKD-EPI eGFR 22 (LOINC 88294-4) yesterday beside an MDRD 60 last month: the newer one is
    an eGFR too, so ibuprofen is contraindicated; a haemoglobin in the same search is another
    test (LOINC, which the lab lists are complete in) and changes nothing."""
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 60, GFR, category="laboratory", when=_ago(20))
    newer = fx.observation(pid, "88294-4", 22, GFR, category="laboratory", when=_ago(1))
    hb = fx.observation(pid, "718-7", 13.5, "g/dL", category="laboratory", when=_ago(1))
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[older, newer, hb])
    assert _decided(client.post(MED, json=body)) == "Contraindicated"


def test_a_lab_coded_only_locally_is_unread_unless_too_old_to_matter(client: TestClient) -> None:
    """A lab coded only in the laboratory's own system could be the eGFR: yesterday's leaves
    ibuprofen unchecked; one from 2019, older than any eGFR the rules may read, changes
    nothing."""
    pid = fx.new_id()
    egfr = fx.observation(pid, "33914-3", 60, GFR, category="laboratory", when=_ago(5))
    local = fx.observation(pid, "X", 25, GFR, category="laboratory", when=_ago(1))
    local["code"] = {"coding": [{"system": "urn:oid:1.2.3.4.5", "code": "GFR1"}], "text": "GFR"}
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[egfr, local])
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run)["egfr"] == "unread" and "'GFR' (observation)" in detail
    old = {**local, "id": fx.new_id(), "effectiveDateTime": "2019-03-01T08:00:00Z"}
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[egfr, old])
    assert _decided(client.post(MED, json=body)) == "Safe"


def test_a_newer_result_with_no_value_is_not_skipped(client: TestClient) -> None:
    pid = fx.new_id()
    older = fx.observation(pid, "33914-3", 60, GFR, category="laboratory", when=_ago(20))
    empty = _egfr(pid, when=_ago(1), note=[{"text": "see report"}])
    body = _med(pid, [fx.draft_order(pid, IBUPROFEN)], labs=[older, empty])
    run, detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"egfr": "refused"} and "it has no value" in detail


def test_a_statusless_allergy_is_judged_on_its_reactions_substance_too(
    client: TestClient,
) -> None:
    """'Drug allergy' (a SNOMED CT code of no list) without a clinical status, whose reaction
    names penicillin: not dropped as none of ours — unread, amoxicillin waits."""
    pid = fx.new_id()
    allergy = fx.allergy(pid, "416098002")
    del allergy["clinicalStatus"]
    allergy["reaction"] = [
        {
            "substance": {"coding": [{"system": fx.SNOMED, "code": "764146007"}]},
            "manifestation": [{"text": "hives"}],
        }
    ]
    body = _med(pid, [fx.draft_order(pid, AMOXICILLIN)], egfr=80, allergies=_allergies(allergy))
    run, _detail = _undecided(client.post(MED, json=body), MED_UNDECIDED)
    assert _states(run) == {"hasAllergy": "unread"}


def test_a_status_coded_without_a_code_is_unread(client: TestClient) -> None:
    pid = fx.new_id()
    status = "http://terminology.hl7.org/CodeSystem/condition-clinical"
    display_only = _condition(
        pid, clinicalStatus={"coding": [{"system": status, "display": "Active"}]}
    )
    run, _detail = _undecided(
        client.post(TRIAGE, json=_triage(pid, conditions=[display_only])), TRIAGE_UNDECIDED
    )
    assert _states(run) == {"hasSymptom": "unread"}
