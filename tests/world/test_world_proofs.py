"""Proofs a nurse can read, snapshots, serialization and structured input."""

from __future__ import annotations

import json

import pytest

from app.world import (
    AddInstance,
    Assert,
    Source,
    World,
    WorldError,
    load_structured,
)
from tests.world.builders import iri, triage

OBS = Source("Observation", "obs-1", "3", "2024-05-01T10:00:00Z")
COND = Source("Condition", "c1", "1")


def _patient() -> World:
    world = World(triage())
    r = world.transact(
        [
            AddInstance("p1", "Patient"),
            AddInstance("s1", "ChestPain", source=COND),
            Assert("p1", "heartRate", 130, source=OBS),
            Assert("p1", "hasSymptom", "s1", source=COND),
            Assert("p1", "spo2", 85, source=Source("Observation", "obs-2", "1")),
        ],
        provenance="api",
    )
    assert r.ok, r.violations
    return world


def test_render_reads_like_the_chart_and_is_deterministic() -> None:
    text = _patient().proof("p1", "acuity").render()
    assert text == (
        "acuity = Immediate  [rule LowSpO2]\n"
        "  spo2 = 85 %  [api Observation/obs-2 v1]\n"
        "  also [rule TachyChestPain]\n"
        "    heartRate = 130 /min  [api Observation/obs-1 v3]\n"
        "    hasSymptom → s1 isA ChestPain  [api Condition/c1 v1]\n"
        "  overrules acuity = Urgent  [rule ChestPainUrgent, rule Tachycardia, rule SpO2Urgent]\n"
        "  overrules acuity = Standard  [rule PainStandard]\n"
        "  overrules acuity = NonUrgent  [rule HasVitals, rule HasSymptom]"
    )
    assert _patient().proof("p1", "acuity").render() == text


def test_proof_bottoms_out_in_base_facts_with_sources() -> None:
    world = _patient()
    proof = world.proof("p1", "acuity")
    leaves = list(proof.base_facts())
    assert [(f.property.rsplit("#")[1], f.source) for f in leaves] == [
        ("spo2", Source("Observation", "obs-2", "1")),
        ("heartRate", OBS),
        ("hasSymptom", COND),
    ]
    assert all(f.provenance == "api" for f in leaves)
    base = world.proof("p1", "heartRate")
    assert base.render() == "heartRate = 130 /min  [api Observation/obs-1 v3]"
    assert [f.key for f in base.base_facts()] == [("p1", iri("heartRate"), 130)]


def test_proof_json_names_rules_sources_and_overruled_values() -> None:
    data = _patient().proof("p1", "acuity").to_json()
    json.dumps(data)
    (node,) = data["values"]
    assert node["value"] == "Immediate" and node["provenance"] == "rule"
    first, second = node["derivations"]
    assert first["ruleName"] == "LowSpO2"
    assert first["premises"][0]["source"] == {
        "resourceType": "Observation",
        "id": "obs-2",
        "versionId": "1",
    }
    assert [p["property"] for p in second["premises"]] == ["heartRate", "hasSymptom"]
    assert [o["value"] for o in node["overruled"]] == ["Urgent", "Standard", "NonUrgent"]


def test_snapshots_restore_earlier_states() -> None:
    world = _patient()
    snap = world.snapshot()
    facts = world.facts()
    assert world.assert_("p1", "respRate", 35).ok
    assert world.transact([AddInstance("p2", "Patient")], provenance="api").ok
    later = world.snapshot()
    assert world.version == snap.version + 2
    world.restore(snap)
    assert world.facts() == facts and world.version == snap.version
    assert world.instance("p2") is None
    with pytest.raises(WorldError):
        world.restore(later)  # that future no longer exists
    with pytest.raises(WorldError):
        world.restore(World(triage()).snapshot())


def test_json_round_trip_rederives_the_same_world() -> None:
    world = _patient()
    assert world.transact(
        [AddInstance("p2", "Patient"), Assert("p2", "temperature", 38.5, confidence=0.8)],
        provenance="perception",
    ).ok
    data = json.loads(json.dumps(world.to_json()))
    again = World.from_json(triage(), data)
    assert again.version == world.version
    assert {(f.key, f.provenance, f.source, f.confidence) for f in again.facts()} == {
        (f.key, f.provenance, f.source, f.confidence) for f in world.facts()
    }
    assert str(again.value("p2", "temperature")) == "38.5"
    data["facts"][0]["value"] = "fast"
    with pytest.raises(WorldError) as err:
        World.from_json(triage(), data)
    assert err.value.violations[0].code == "range"


def test_structured_input_of_design_section_9() -> None:
    world = World(triage())
    r = load_structured(
        world,
        {
            "instances": [
                {"id": "p1", "class": "Patient", "heartRate": 130, "age": 70, "hasSymptom": ["s1"]},
                {"id": "s1", "class": "ChestPain"},
            ],
            "text": "chest pain since this morning",
        },
    )
    assert r.ok, r.violations
    assert world.value("p1", "acuity") == iri("Immediate")
    assert world.fact("p1", "age", 70).provenance == "api"  # type: ignore[union-attr]
    bad = load_structured(world, {"instances": [{"id": "p3", "class": "Patiant", "pulse": 1}]})
    assert {v.code for v in bad.violations} == {"unknown-class", "unknown-property"}
    bad = load_structured(world, {"instances": [{"id": "p1", "pulse": 1}]})
    assert [v.code for v in bad.violations] == ["unknown-property"]


def test_a_path_premise_names_the_instance_it_went_through() -> None:
    from tests.world.builders import cls, cond, individual, ontology, prop, rule

    onto = ontology(
        [cls("Patient"), cls("Symptom"), cls("Severity", one_of=("Mild", "Severe"))],
        [
            prop("hasSymptom", "Patient", "Symptom"),
            prop("severity", "Symptom", "Severity", cardinality="0..1", one_of=("Mild", "Severe")),
            prop("alarm", "Patient", "xsd:boolean", cardinality="0..1"),
        ],
        [
            rule(
                "SevereSymptom",
                "Patient",
                [cond(("hasSymptom", "severity"), "is", "Severe")],
                [("alarm", True)],
            )
        ],
        [individual("Mild", "Severity"), individual("Severe", "Severity")],
    )
    world = World(onto)
    assert world.transact(
        [
            AddInstance("p1", "Patient"),
            AddInstance("s1", "Symptom"),
            Assert("p1", "hasSymptom", "s1"),
            Assert("s1", "severity", "Severe", source=COND),
        ],
        provenance="perception",
        confidence=0.9,
    ).ok
    assert world.proof("p1", "alarm").render() == (
        "alarm = true  [rule SevereSymptom]\n"
        "  hasSymptom → s1 isA Symptom  [perception, confidence 0.9]\n"
        "  s1.severity = Severe  [perception Condition/c1 v1, confidence 0.9]"
    )
