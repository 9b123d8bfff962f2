"""The conformance harness prepares each guide example as an EHR would hold and send it."""

from __future__ import annotations

from datetime import date

from tests.support.opioid_examples import as_stored, fill_template, load_examples, prepare

TODAY = date(2026, 3, 1)
EXAMPLES = {e.name: e for e in load_examples()}


def test_resources_sharing_an_id_get_ids_of_their_own_and_the_draft_keeps_its_own() -> None:
    prepared = prepare(EXAMPLES["rec-08-on-naloxone"], TODAY, "t1-")
    [draft] = [e["resource"] for e in prepared.request["context"]["draftOrders"]["entry"]]
    [stored] = [r for r in prepared.stored if r["resourceType"] == "MedicationRequest"]
    assert draft["id"] == "t1-example-rec-08-on-naloxone-context"
    assert stored["id"] == "t1-example-rec-08-on-naloxone-context-2"
    assert stored["medicationCodeableConcept"]["coding"][0]["code"] == "1191212"  # naloxone


def test_four_observations_under_one_id_are_four_stored_records() -> None:
    prepared = prepare(EXAMPLES["rec-10-illicit-drugs"], TODAY, "t2-")
    observations = [r for r in prepared.stored if r["resourceType"] == "Observation"]
    assert len({o["id"] for o in observations}) == 4
    assert sorted(o["valueString"] for o in observations) == ["NEG", "NEG", "POS", "POS"]


def test_ids_are_tagged_everywhere_and_the_quirks_are_kept() -> None:
    prepared = prepare(EXAMPLES["rec-11-opioid-trigger-with-benzo"], TODAY, "t3-")
    context = prepared.request["context"]
    assert context["patientId"] == "Patient/t3-example-rec-11-opioid-trigger-with-benzo"
    assert prepared.patient_id == "t3-example-rec-11-opioid-trigger-with-benzo"
    assert context["selections"] == [
        "MedicationRequest/t3-example-rec-11-opioid-trigger-with-benzo-context"
    ]
    [draft] = [e["resource"] for e in context["draftOrders"]["entry"]]
    # the published quirk: a bare reference naming the draft itself, not the patient
    assert draft["subject"] == {"reference": "t3-example-rec-11-opioid-trigger-with-benzo-context"}
    stored = [r for r in prepared.stored if r["resourceType"] == "MedicationRequest"]
    assert stored[0]["subject"] == {
        "reference": "Patient/t3-example-rec-11-opioid-trigger-with-benzo"
    }
    assert context["userId"] == "Practitioner/example"  # names nothing the example holds


def test_a_stored_record_is_last_updated_when_it_last_says_something_happened() -> None:
    plan = {
        "resourceType": "CarePlan",
        "id": "cp",
        "created": "2025-10-17",
        "period": {"end": "2026-09-01"},  # a future day is no edit
    }
    assert as_stored(plan, TODAY)["meta"]["lastUpdated"] == "2025-10-17T00:00:00Z"
    kept = as_stored({**plan, "meta": {"lastUpdated": "2025-01-02T03:04:05Z"}}, TODAY)
    assert kept["meta"]["lastUpdated"] == "2025-01-02T03:04:05Z"
    encounter = as_stored({"resourceType": "Encounter", "id": "e", "status": "finished"}, TODAY)
    assert encounter["class"]["code"] == "AMB"


def test_templates_are_filled_with_the_ids_an_ehr_knows() -> None:
    context = {"patientId": "Patient/p1", "encounterId": "Encounter/e1", "userId": "Practitioner/u"}
    assert fill_template("Patient/{{context.patientId}}", context) == "Patient/p1"
    assert fill_template("Encounter/{{context.encounterId}}", context) == "Encounter/e1"
    assert fill_template("X?performer={{userPractitionerId}}", context) == "X?performer=u"
    assert fill_template("X?who={{userPatientId}}", context) is None
    assert fill_template("X?e={{context.encounterId}}", {"patientId": "p"}) is None
