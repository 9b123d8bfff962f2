"""The ED triage deployment (docs/examples.md) is complete, faithful, and verifies."""

from __future__ import annotations

from app.ontology import derive_schema, verify
from app.ontology.model import XSD, Ontology

N = "https://horismos.dev/example/triage#"
SCT = "http://snomed.info/sct|"
PRIORITY = "http://terminology.hl7.org/CodeSystem/v3-ActPriority|"


def test_triage_verifies(triage: Ontology) -> None:
    assert verify(triage) == []
    assert triage.version == "1.5.0"


def test_symptom_classes_and_snomed_codes(triage: Ontology) -> None:
    expected = {
        "Pain": "22253000",
        "ChestPain": "29857009",
        "AbdominalPain": "21522001",
        "Headache": "25064002",
        "Dyspnea": "267036007",
        "Fever": "386661006",
        "Syncope": "271594007",
        "Unresponsive": "422768004",
    }
    for name, code in expected.items():
        assert triage.classes[N + name].codes[0] == SCT + code
        assert [c for c in triage.classes[N + name].codes if c.startswith(SCT)] == [SCT + code]
        assert triage.class_for_code(SCT + code) == N + name
    for name in ("ChestPain", "AbdominalPain", "Headache"):
        assert triage.classes[N + name].parents == (N + "Pain",)
    assert len(triage.subclasses(N + "Symptom")) == 9


def test_symptoms_are_also_read_in_icd10cm(triage: Ontology) -> None:
    """The billable ICD-10-CM codes whose title is the symptom (CMS Tabular List FY2026)."""
    icd = "http://hl7.org/fhir/sid/icd-10-cm|"
    expected = {
        "R07.9": "ChestPain",
        "R07.89": "ChestPain",
        "R07.1": "ChestPain",
        "R07.2": "ChestPain",
        "R06.02": "Dyspnea",
        "R06.00": "Dyspnea",
        "R10.9": "AbdominalPain",
        "R51.9": "Headache",
        "R50.9": "Fever",
        "R55": "Syncope",
        "R52": "Pain",
    }
    for code, name in expected.items():
        assert triage.class_for_code(icd + code) == N + name, code
    assert triage.class_for_code(icd + "R07.0") is None  # pain in throat is not chest pain
    assert not [c for c in triage.classes[N + "Unresponsive"].codes if c.startswith(icd)]


def test_acuity_levels_most_severe_first_with_act_priority_codes(triage: Ontology) -> None:
    acuity = triage.properties[N + "acuity"]
    assert acuity.one_of == tuple(N + n for n in ("Immediate", "Urgent", "Standard", "NonUrgent"))
    assert acuity.rules_only and acuity.resolution == "FirstListed" and acuity.single_valued
    codes = {
        n: triage.individuals[N + n].codes for n in ("Immediate", "Urgent", "Standard", "NonUrgent")
    }
    assert codes == {
        "Immediate": (PRIORITY + "EM",),
        "Urgent": (PRIORITY + "UR",),
        "Standard": (PRIORITY + "R",),
        "NonUrgent": (PRIORITY + "EL",),
    }


def test_inputs_and_their_fhir_sources(triage: Ontology) -> None:
    def loinc(prop: str) -> tuple[str, ...]:
        (m,) = triage.properties[N + prop].from_fhir
        assert m.resource_type == "Observation" and m.pick == "Latest"
        return m.codings

    assert loinc("heartRate") == ("http://loinc.org|8867-4",)
    assert loinc("respRate") == ("http://loinc.org|9279-1",)
    assert loinc("spo2") == ("http://loinc.org|59408-5", "http://loinc.org|2708-6")
    assert loinc("systolicBP") == ("http://loinc.org|8480-6",)
    # FHIR's body temperature code, and the same measurement coded by its site (8331-1 oral...)
    assert loinc("temperature") == tuple(
        f"http://loinc.org|{c}" for c in ("8310-5", "8331-1", "8333-7", "8328-7", "76010-8")
    )
    units = {
        p: triage.properties[N + p].unit
        for p in ("age", "heartRate", "respRate", "spo2", "systolicBP", "temperature")
    }
    assert units == {
        "age": "a",
        "heartRate": "/min",
        "respRate": "/min",
        "spo2": "%",
        "systolicBP": "mm[Hg]",
        "temperature": "Cel",
    }
    age = triage.properties[N + "age"]
    assert age.range == XSD + "integer"
    assert age.from_fhir[0].transform == "YearsSince"
    cond, reason = triage.properties[N + "hasSymptom"].from_fhir
    assert cond.resource_type == "Condition" and cond.pick == "All" and cond.where
    assert "encounter-diagnosis" in cond.where and "problem-list-item" in cond.where
    assert "active" in cond.where and "recurrence" in cond.where and "relapse" in cond.where
    assert (reason.resource_type, reason.fhir_path) == ("Encounter", "reasonCode")
    assert triage.properties[N + "hasSymptom"].closed_over == ("http://snomed.info/sct",)
    assert triage.properties[N + "queuedAt"].range == XSD + "dateTime"


def test_one_rule_per_criterion(triage: Ontology) -> None:
    by_level: dict[str, int] = {}
    for r in triage.rules:
        (t,) = r.then
        by_level[str(t.value).rsplit("#", 1)[1]] = (
            by_level.get(str(t.value).rsplit("#", 1)[1], 0) + 1
        )
    assert by_level == {"Immediate": 8, "Urgent": 10, "Standard": 3, "NonUrgent": 2}
    chest = next(r for r in triage.rules if r.name == "ImmediateChestPainTachycardia")
    assert [(c.path, c.op, c.value) for c in chest.when] == [
        ((N + "hasSymptom",), "isA", N + "ChestPain"),
        ((N + "heartRate",), "greaterThan", 120),
    ]


def test_workflow_as_documented(triage: Ontology) -> None:
    w = triage.workflow("Triage")
    assert (w.decides, w.focus, w.version) == (N + "acuity", N + "Patient", "1.3.0")
    steps = {s.name: s for s in w.steps.values()}
    assert steps["Intake"].extracts == (N + "Patient", N + "Symptom")
    assert steps["Intake"].confidence == 0.85
    assert steps["Intake"].fallback == N + "EscalateToNurse"
    assert steps["Route"].on_error == N + "EscalateToNurse"
    assert {(b.arg, b.property, b.focus) for b in steps["Route"].bindings} == {
        ("queue", N + "acuity", False),
        ("patient", None, True),
    }
    assert steps["EscalateToNurse"].terminal and steps["Done"].terminal


def test_queue_assignment_commits_through_the_fhir_adapter(triage: Ontology) -> None:
    tool = triage.tools[N + "ehr.assign_queue"]
    assert tool.binding == "fhir:commit" and tool.commits is not None
    assert (tool.commits.resource_type, tool.commits.element, tool.commits.value_arg) == (
        "Encounter",
        "priority",
        "queue",
    )
    assert tool.commits.scope == "user/Encounter.write"
    assert [(e.property, e.now) for e in tool.effects] == [(N + "queuedAt", True)]


def test_the_escalation_creates_a_communication_through_the_fhir_adapter(
    triage: Ontology,
) -> None:
    tool = triage.tools[N + "paging.notify_nurse"]
    assert tool.binding == "fhir:commit" and tool.commits is not None
    assert (tool.commits.resource_type, tool.commits.operation, tool.commits.scope) == (
        "Communication",
        "create",
        "user/Communication.write",
    )
    assert tool.idempotent and tool.retries == 1
    escalate = triage.step(N + "EscalateToNurse")
    assert [(b.arg, b.property) for b in escalate.bindings] == [("acuity", N + "acuity")]


def test_cds_service(triage: Ontology) -> None:
    svc = triage.service("horismos-triage")
    assert svc.hook == "encounter-start" and svc.workflow == N + "Triage"
    assert [p.key for p in svc.prefetch] == ["patient", "encounter", "vitals", "conditions"]
    assert [(t.resource_type, t.fhir_path) for t in svc.text] == [("Encounter", "reasonCode.text")]
    cards = [(c.indicator, c.terminal, c.when[0].value if c.when else None) for c in svc.cards]
    assert cards == [
        ("critical", N + "Done", N + "Immediate"),
        ("warning", N + "Done", N + "Urgent"),
        ("info", N + "Done", N + "Standard"),
        ("info", N + "Done", N + "NonUrgent"),
        ("critical", N + "EscalateToNurse", N + "Immediate"),
        ("warning", N + "EscalateToNurse", N + "Urgent"),
        ("warning", N + "EscalateToNurse", N + "Standard"),
        ("warning", N + "EscalateToNurse", N + "NonUrgent"),
        ("warning", N + "EscalateToNurse", False),
        ("warning", N + "EscalateIncomplete", None),
    ]
    assert "nurse's assessment" in svc.cards[-2].summary


def test_extraction_schema_has_the_closed_symptom_tree_and_no_acuity(triage: Ontology) -> None:
    schema = derive_schema(triage, ["Patient", "Symptom"])
    variants = {v["title"]: v for v in schema["properties"]["instances"]["items"]["anyOf"]}
    assert "acuity" not in variants["Patient"]["properties"]
    assert variants["Symptom"]["properties"]["class"]["enum"] == [
        "Symptom",
        "Pain",
        "ChestPain",
        "AbdominalPain",
        "Headache",
        "Dyspnea",
        "Fever",
        "Syncope",
        "Unresponsive",
    ]
