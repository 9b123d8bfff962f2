"""Every gate violation kind, and rollback leaving the World exactly as before."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from app.world import AddInstance, Assert, Retract, Source, World
from tests.world.builders import cls, individual, iri, ontology, prop, triage


def _world() -> World:
    onto = ontology(
        [cls("Patient"), cls("Device"), cls("Symptom"), cls("ChestPain", "Symptom")],
        [
            prop(
                "heartRate",
                "Patient",
                "xsd:decimal",
                cardinality="0..1",
                min=0,
                max=300,
                unit="/min",
            ),
            prop("age", "Patient", "xsd:integer", cardinality="0..1"),
            prop("mrn", "Patient", "xsd:string", pattern=r"[A-Z]{2}\d{4}"),
            prop("smoker", "Patient", "xsd:boolean", cardinality="0..1"),
            prop("born", "Patient", "xsd:date", cardinality="0..1"),
            prop("seen", "Patient", "xsd:dateTime"),
            prop("ward", "Patient", "xsd:string", one_of=("A", "B")),
            prop("hasSymptom", "Patient", "Symptom"),
            prop("serial", "Device", "xsd:string"),
        ],
    )
    world = World(onto)
    assert world.transact(
        [
            AddInstance("p1", iri("Patient")),
            AddInstance("s1", iri("ChestPain")),
            AddInstance("d1", iri("Device")),
        ],
        provenance="api",
    ).ok
    return world


@pytest.mark.parametrize(
    ("prop_name", "subject", "value", "unit", "code"),
    [
        ("heartRate", "p1", -1, None, "min"),
        ("heartRate", "p1", 301, None, "max"),
        ("heartRate", "p1", "fast", None, "range"),
        ("heartRate", "p1", True, None, "range"),
        ("heartRate", "p1", 80, "/h", "unit"),
        ("age", "p1", Decimal("70.5"), None, "range"),
        ("mrn", "p1", "ab1234", None, "pattern"),
        ("mrn", "p1", "AB1234x", None, "pattern"),
        ("smoker", "p1", "yes", None, "range"),
        ("born", "p1", "1950-13-01", None, "range"),
        ("seen", "p1", "2024-01-01", None, "range"),
        ("ward", "p1", "C", None, "oneOf"),
        ("hasSymptom", "p1", "d1", None, "range"),
        ("hasSymptom", "p1", "nobody", None, "range"),
        ("serial", "p1", "x", None, "domain"),
        ("nosuch", "p1", 1, None, "unknown-property"),
        ("heartRate", "ghost", 80, None, "unknown-subject"),
    ],
)
def test_gate_rejects_with_a_structured_violation(
    prop_name: str, subject: str, value: Any, unit: str | None, code: str
) -> None:
    world = _world()
    before = world.facts()
    result = world.transact([Assert(subject, iri(prop_name), value, unit=unit)], provenance="api")
    assert not result.ok
    (violation,) = result.violations
    assert violation.code == code
    assert violation.subject == subject
    assert violation.value == value
    assert violation.message
    assert violation.to_json()["code"] == code
    assert world.facts() == before


def test_gate_accepts_well_typed_values() -> None:
    world = _world()
    result = world.transact(
        [
            Assert("p1", iri("heartRate"), 72.5, unit="/min"),
            Assert("p1", iri("age"), 70),
            Assert("p1", iri("mrn"), "AB1234"),
            Assert("p1", iri("smoker"), False),
            Assert("p1", iri("born"), "1950-02-01"),
            Assert("p1", iri("seen"), "2024-01-01T10:00:00Z"),
            Assert("p1", iri("ward"), "A"),
            Assert("p1", "hasSymptom", "s1"),
        ],
        provenance="api",
    )
    assert result.ok, result.violations
    assert world.value("p1", "heartRate") == Decimal("72.5")
    assert world.values("p1", "hasSymptom") == ("s1",)


def test_unknown_class_and_cardinality() -> None:
    world = _world()
    r = world.transact([AddInstance("x", "NoSuchClass")], provenance="api")
    assert [v.code for v in r.violations] == ["unknown-class"]
    assert world.instance("x") is None
    assert world.assert_("p1", "heartRate", 80).ok
    r = world.assert_("p1", "heartRate", 90)
    assert [v.code for v in r.violations] == ["cardinality"]
    assert world.values("p1", "heartRate") == (80,)
    # replacing within one transaction is fine
    r = world.transact(
        [Retract("p1", "heartRate", 80), Assert("p1", "heartRate", 90)], provenance="api"
    )
    assert r.ok
    assert world.values("p1", "heartRate") == (90,)
    assert world.assert_("p1", "heartRate", 90).ok  # the same value again is not a conflict


def test_rules_only_and_derived_retraction() -> None:
    world = World(triage())
    assert world.transact(
        [AddInstance("p1", iri("Patient")), Assert("p1", "heartRate", 130)], provenance="api"
    ).ok
    r = world.assert_("p1", "acuity", "Urgent", provenance="human")
    assert [v.code for v in r.violations] == ["rules-only"]
    r = world.retract("p1", "acuity", iri("Urgent"))
    assert [v.code for v in r.violations] == ["derived"]
    assert world.value("p1", "acuity") == iri("Urgent")


def test_rollback_leaves_the_world_exactly_as_before() -> None:
    world = World(triage())
    src = Source("Observation", "o1", "3", "2024-01-01T00:00:00Z")
    assert world.transact(
        [
            AddInstance("p1", iri("Patient")),
            AddInstance("s1", iri("ChestPain")),
            Assert("p1", "heartRate", 130, source=src),
            Assert("p1", "hasSymptom", "s1"),
        ],
        provenance="api",
    ).ok
    facts, version, json = world.facts(), world.version, world.to_json()
    proof = world.proof("p1", "acuity").render()
    result = world.transact(
        [
            AddInstance("p2", iri("Patient")),
            AddInstance("s2", iri("Dyspnea")),
            Assert("p2", "hasSymptom", "s2"),
            Retract("p1", "hasSymptom", "s1"),
            Assert("p1", "spo2", 85),
            Assert("p1", "temperature", 99),  # above max: the whole transaction fails
        ],
        provenance="api",
    )
    assert not result.ok
    assert [v.code for v in result.violations] == ["max"]
    assert world.facts() == facts
    assert world.version == version
    assert world.to_json() == json
    assert world.instance("p2") is None
    assert world.proof("p1", "acuity").render() == proof
    assert world.instances(iri("Symptom")) == (world.instance("s1"),)
    # the World keeps working after a rollback, with the next transaction id
    ok = world.assert_("p1", "spo2", 85)
    assert ok.ok and ok.tx == version + 1


def test_enumeration_values_must_be_listed_individuals() -> None:
    onto = ontology(
        [cls("Patient"), cls("Level", one_of=("High", "Low")), cls("Other")],
        [
            prop("level", "Patient", "Level", cardinality="0..1", one_of=("High", "Low")),
            prop("weight", "Patient", "xsd:decimal"),
        ],
        individuals=[
            individual("High", "Level"),
            individual("Low", "Level"),
            individual("Odd", "Other"),
        ],
    )
    world = World(onto)
    assert world.add_instance("p1", "Patient").ok
    for value in ("Odd", "Medium", iri("Odd")):
        r = world.assert_("p1", "level", value)
        assert [v.code for v in r.violations] == ["oneOf"], value
    r = world.assert_("p1", "level", "High")
    assert r.ok and world.value("p1", "level") == iri("High")
    r = world.assert_("p1", "weight", 70, unit="kg")  # the property declares no unit
    assert [v.code for v in r.violations] == ["unit"]
