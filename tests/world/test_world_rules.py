"""Operators, paths, negation, stratification, resolution modes and retraction chains."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from app.ontology.model import Condition
from app.world import AddInstance, Assert, Retract, StratificationError, World
from tests.world.builders import cls, cond, individual, iri, ontology, prop, rule, triage


def _ops_world() -> World:
    onto = ontology(
        [
            cls("Patient"),
            cls("Symptom"),
            cls("Pain", "Symptom"),
            cls("ChestPain", "Pain"),
            cls("Dyspnea", "Symptom"),
            cls("Severity", one_of=("Mild", "Severe")),
        ],
        [
            prop("heartRate", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("name", "Patient", "xsd:string", cardinality="0..1"),
            prop("seen", "Patient", "xsd:dateTime", cardinality="0..1"),
            prop("hasSymptom", "Patient", "Symptom"),
            prop("severity", "Symptom", "Severity", cardinality="0..1", one_of=("Mild", "Severe")),
            prop("onsetDays", "Symptom", "xsd:integer", cardinality="0..1"),
        ],
        individuals=[individual("Mild", "Severity"), individual("Severe", "Severity")],
    )
    world = World(onto)
    r = world.transact(
        [
            AddInstance("p1", "Patient"),
            AddInstance("s1", "ChestPain"),
            AddInstance("s2", "Dyspnea"),
            Assert("p1", "heartRate", 130),
            Assert("p1", "name", "Ada Lovelace"),
            Assert("p1", "seen", "2024-05-01T10:00:00+00:00"),
            Assert("p1", "hasSymptom", "s1"),
            Assert("p1", "hasSymptom", "s2"),
            Assert("s1", "severity", "Severe"),
            Assert("s2", "onsetDays", 3),
        ],
        provenance="api",
    )
    assert r.ok, r.violations
    return world


@pytest.mark.parametrize(
    ("path", "op", "value", "expected"),
    [
        ("heartRate", "is", 130, True),
        ("heartRate", "is", Decimal("130.0"), True),
        ("heartRate", "is", 131, False),
        ("heartRate", "isNot", 131, True),
        ("heartRate", "isNot", 130, False),
        ("heartRate", "in", (120, 130), True),
        ("heartRate", "in", (120, 121), False),
        ("heartRate", "notIn", (120, 121), True),
        ("heartRate", "notIn", (130,), False),
        ("heartRate", "greaterThan", 129, True),
        ("heartRate", "greaterThan", 130, False),
        ("heartRate", "atLeast", 130, True),
        ("heartRate", "atLeast", Decimal("130.01"), False),
        ("heartRate", "lessThan", Decimal("130.5"), True),
        ("heartRate", "lessThan", 130, False),
        ("heartRate", "atMost", 130, True),
        ("heartRate", "atMost", 129, False),
        ("heartRate", "isAssigned", True, True),
        ("heartRate", "isAssigned", False, False),
        ("respRate", "isAssigned", False, True),
        ("name", "matches", "^Ada", True),
        ("name", "matches", "^Lovelace", False),
        ("seen", "greaterThan", "2024-04-30T23:00:00+00:00", True),
        ("seen", "lessThan", "2024-04-30T23:00:00+00:00", False),
        ("hasSymptom", "isA", "Pain", True),  # ChestPain ⊂ Pain ⊂ Symptom
        ("hasSymptom", "isA", "Symptom", True),
        ("hasSymptom", "isA", "Dyspnea", True),
        (("hasSymptom", "severity"), "is", "Severe", True),
        (("hasSymptom", "severity"), "is", "Mild", False),
        (("hasSymptom", "severity"), "isA", "Severity", True),
        (("hasSymptom", "onsetDays"), "atLeast", 3, True),
        (("hasSymptom", "onsetDays"), "greaterThan", 3, False),
        (("hasSymptom", "onsetDays"), "isAssigned", False, False),
    ],
)
def test_operator(path: Any, op: str, value: Any, expected: bool) -> None:
    world = _ops_world()
    if path == "respRate":
        c = Condition(path=(iri("nothing"),), op="isAssigned", value=False)
    else:
        c = cond(path, op, value)
    assert world.holds("p1", [c]) is expected
    assert world.failing("p1", [c]) == (() if expected else (c,))


def test_isa_is_false_for_a_class_outside_the_tree() -> None:
    world = _ops_world()
    world2 = _ops_world()
    assert world.transact([Retract("p1", "hasSymptom", "s2")], provenance="api").ok
    assert not world.holds("p1", [cond("hasSymptom", "isA", "Dyspnea")])
    assert world2.holds("p1", [cond("hasSymptom", "isA", "Dyspnea")])
    assert world.reach("p1", [iri("hasSymptom"), iri("severity")]) == (iri("Severe"),)
    assert world.is_a("s1", "Symptom") and not world.is_a("s1", "Dyspnea")
    assert [i.id for i in world.instances("Pain")] == ["s1"]


def _acuity(world: World, s: str = "p1") -> str | None:
    v = world.value(s, "acuity")
    return None if v is None else str(v).rsplit("#", 1)[1]


def test_triage_first_listed_resolution_and_retraction() -> None:
    world = World(triage())
    assert world.transact(
        [
            AddInstance("p1", "Patient"),
            AddInstance("s1", "ChestPain"),
            Assert("p1", "hasSymptom", "s1"),
        ],
        provenance="api",
    ).ok
    assert _acuity(world) == "Urgent"
    r = world.assert_("p1", "heartRate", 130)
    assert _acuity(world) == "Immediate"
    assert [(f.property.rsplit("#")[1], str(f.value).rsplit("#")[-1]) for f in r.removed] == [
        ("acuity", "Urgent")
    ]
    proof = world.proof("p1", "acuity")
    over = {o.label: [r.rsplit("#")[1] for r in o.rules] for o in proof.nodes[0].overruled}
    assert over == {
        "acuity = Urgent": ["ChestPainUrgent", "Tachycardia"],
        "acuity = Standard": ["PainStandard"],
        "acuity = NonUrgent": ["HasSymptom", "HasVitals"],  # in the order they fired
    }
    assert world.retract("p1", "hasSymptom", "s1").ok
    assert _acuity(world) == "Urgent"  # heartRate 130 > 100
    assert world.retract("p1", "heartRate").ok
    assert _acuity(world) is None
    assert world.proof("p1", "acuity").render() == "acuity was not assigned"


def test_reject_resolution_is_a_conflict_that_rolls_back() -> None:
    world = World(triage(resolution="Reject"))
    assert world.transact([AddInstance("p1", "Patient")], provenance="api").ok
    assert world.assert_("p1", "spo2", 99).ok
    assert _acuity(world) is None
    r = world.assert_("p1", "heartRate", 110)  # Tachycardia → Urgent, HasVitals → NonUrgent
    assert not r.ok
    (v,) = r.violations
    assert v.code == "conflict" and v.subject == "p1" and v.property == iri("acuity")
    assert "HasVitals" in v.message and "Tachycardia" in v.message
    assert world.values("p1", "heartRate") == ()
    assert world.version == 2


def test_negation_and_truth_maintenance_of_negative_premises() -> None:
    onto = ontology(
        [cls("Patient")],
        [
            prop("temperature", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("needsTemp", "Patient", "xsd:boolean", cardinality="0..1"),
            prop("flag", "Patient", "xsd:boolean", cardinality="0..1"),
        ],
        [
            rule(
                "NoTemp",
                "Patient",
                [cond("temperature", "isAssigned", False)],
                [("needsTemp", True)],
            ),
            rule("Flag", "Patient", [cond("needsTemp", "is", True)], [("flag", True)]),
        ],
    )
    world = World(onto)
    assert world.add_instance("p1", "Patient").ok
    assert world.values("p1", "flag") == (True,)
    (j,) = world.fact("p1", "needsTemp", True).justifications  # type: ignore[union-attr]
    assert [a.path for a in j.absent] == [(iri("temperature"),)]
    assert "temperature was not assigned" in world.proof("p1", "flag").render()
    r = world.assert_("p1", "temperature", 37)
    assert r.ok
    assert world.values("p1", "needsTemp") == () and world.values("p1", "flag") == ()
    assert {f.property for f in r.removed} == {iri("needsTemp"), iri("flag")}
    assert world.retract("p1", "temperature").ok
    assert world.values("p1", "flag") == (True,)


def test_unstratifiable_rules_are_refused_naming_the_rules() -> None:
    onto = ontology(
        [cls("T")],
        [prop("a", "T", "xsd:boolean"), prop("b", "T", "xsd:boolean")],
        [
            rule("AifNotB", "T", [cond("b", "isAssigned", False)], [("a", True)]),
            rule("BifA", "T", [cond("a", "isAssigned", True)], [("b", True)]),
        ],
    )
    with pytest.raises(StratificationError) as err:
        World(onto)
    assert set(err.value.rules) == {iri("AifNotB")}
    assert "AifNotB" in str(err.value)


def _chain_world(depth: int = 10) -> World:
    props = [prop(f"p{i}", "T", "xsd:boolean", cardinality="0..1") for i in range(depth + 1)]
    rules = [
        rule(f"Step{i}", "T", [cond(f"p{i}", "is", True)], [(f"p{i + 1}", True)])
        for i in range(depth)
    ]
    world = World(ontology([cls("T")], props, rules))
    assert world.add_instance("t", "T").ok
    return world


def test_retraction_chain_ten_deep() -> None:
    world = _chain_world()
    r = world.assert_("t", "p0", True)
    assert len(r.added) == 11
    proof = world.proof("t", "p10")
    assert [f.key for f in proof.base_facts()] == [("t", iri("p0"), True)]
    assert len(proof.render().splitlines()) == 11
    r = world.retract("t", "p0")
    assert len(r.removed) == 11
    assert [f for f in world.facts()] == []


def test_alternative_derivation_keeps_a_fact_alive() -> None:
    onto = ontology(
        [cls("T")],
        [prop(n, "T", "xsd:boolean", cardinality="0..1") for n in ("a", "b", "c")],
        [
            rule("FromA", "T", [cond("a", "is", True)], [("c", True)]),
            rule("FromB", "T", [cond("b", "is", True)], [("c", True)]),
        ],
    )
    world = World(onto)
    assert world.transact(
        [AddInstance("t", "T"), Assert("t", "a", True), Assert("t", "b", True)], provenance="api"
    ).ok
    fact = world.fact("t", "c", True)
    assert fact is not None and len(fact.justifications) == 2
    r = world.retract("t", "a")
    assert r.ok and world.values("t", "c") == (True,)
    assert [j.rule for j in world.fact("t", "c", True).justifications] == [iri("FromB")]  # type: ignore[union-attr]
    assert world.retract("t", "b").ok
    assert world.values("t", "c") == ()


def test_recursive_rules_do_not_keep_a_cycle_alive() -> None:
    onto = ontology(
        [cls("Node")],
        [
            prop("link", "Node", "Node"),
            prop("seed", "Node", "xsd:boolean"),
            prop("reached", "Node", "xsd:boolean"),
        ],
        [
            rule("Seed", "Node", [cond("seed", "is", True)], [("reached", True)]),
            rule("Follow", "Node", [cond(("link", "reached"), "is", True)], [("reached", True)]),
        ],
    )
    world = World(onto)
    changes: list[Any] = [AddInstance(n, "Node") for n in ("a", "b", "c")]
    changes += [Assert("a", "link", "b"), Assert("b", "link", "a"), Assert("c", "link", "a")]
    changes += [Assert("a", "seed", True)]
    assert world.transact(changes, provenance="api").ok
    assert all(world.values(n, "reached") == (True,) for n in "abc")
    assert world.retract("a", "seed").ok
    assert all(world.values(n, "reached") == () for n in "abc")
    assert world.assert_("b", "seed", True).ok
    assert all(world.values(n, "reached") == (True,) for n in "abc")


def test_negation_over_a_path_follows_changes_at_every_position() -> None:
    onto = ontology(
        [cls("Patient"), cls("Order")],
        [
            prop("hasOrder", "Patient", "Order"),
            prop("dose", "Order", "xsd:decimal", cardinality="0..1"),
            prop("undosed", "Patient", "xsd:boolean", cardinality="0..1"),
        ],
        [
            rule(
                "NoDose",
                "Patient",
                [cond(("hasOrder", "dose"), "isAssigned", False)],
                [("undosed", True)],
            )
        ],
    )
    world = World(onto)
    assert world.transact(
        [AddInstance("p1", "Patient"), AddInstance("o1", "Order")], provenance="api"
    ).ok
    assert world.values("p1", "undosed") == (True,)
    assert world.assert_("p1", "hasOrder", "o1").ok
    assert world.values("p1", "undosed") == (True,)  # the order has no dose yet
    assert world.assert_("o1", "dose", 5).ok  # a change at the end of the path
    assert world.values("p1", "undosed") == ()
    assert world.retract("p1", "hasOrder", "o1").ok  # a change at its start
    assert world.values("p1", "undosed") == (True,)
    assert "hasOrder → dose was not assigned" in world.proof("p1", "undosed").render()


def test_a_base_value_disagreeing_with_a_derivation_is_a_conflict() -> None:
    onto = ontology(
        [cls("T")],
        [prop("a", "T", "xsd:boolean"), prop("kind", "T", "xsd:string", cardinality="0..1")],
        [rule("Kind", "T", [cond("a", "is", True)], [("kind", "derived")])],
    )
    world = World(onto)
    assert world.transact(
        [AddInstance("t", "T"), Assert("t", "kind", "given")], provenance="human"
    ).ok
    r = world.assert_("t", "a", True)
    assert [v.code for v in r.violations] == ["conflict"]
    assert world.values("t", "kind") == ("given",) and world.values("t", "a") == ()


def test_reading_a_first_listed_property_it_concludes_is_refused() -> None:
    onto = ontology(
        [cls("T"), cls("Level", one_of=("High", "Low"))],
        [
            prop(
                "level",
                "T",
                "Level",
                cardinality="0..1",
                one_of=("High", "Low"),
                resolution="FirstListed",
            ),
            prop("x", "T", "xsd:boolean"),
        ],
        [
            rule("LowIfX", "T", [cond("x", "is", True)], [("level", "Low")]),
            rule("HighIfLow", "T", [cond("level", "is", "Low")], [("level", "High")]),
        ],
        [individual("High", "Level"), individual("Low", "Level")],
    )
    with pytest.raises(StratificationError) as err:
        World(onto)
    assert err.value.rules == (iri("HighIfLow"),)
