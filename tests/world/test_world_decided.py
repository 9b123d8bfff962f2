"""Decidedness on small ontologies built in code: what an incomplete input can and cannot
change (docs/world.md, "Decided and undecided")."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from app.ontology.model import Ontology, PropertyDef, Value
from app.world import World
from app.world.facts import AddInstance, Assert, Change
from tests.world.builders import cls, cond, individual, iri, ontology, prop, rule

P = "p1"
LEVELS = ("High", "Low")
LEVEL_MEMBERS = [individual(name, "Level") for name in LEVELS]


def _level(*, rules_only: bool = True) -> PropertyDef:
    """The single-valued level the rules decide, High listed before Low."""
    return prop(
        "level",
        "Patient",
        "Level",
        cardinality="0..1",
        one_of=LEVELS,
        resolution="FirstListed",
        rules_only=rules_only,
    )


def _world(onto: Ontology, *facts: tuple[str, Value]) -> World:
    w = World(onto)
    changes: list[Change] = [AddInstance(P, iri("Patient"))]
    changes += [Assert(P, iri(p), v) for p, v in facts]
    assert w.transact(changes, provenance="api").ok
    return w


def _levels_ontology() -> Ontology:
    return ontology(
        [cls("Patient"), cls("Level", one_of=LEVELS)],
        [
            prop("a", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("b", "Patient", "xsd:decimal", cardinality="0..1"),
            _level(),
        ],
        [
            rule("HighA", "Patient", [cond("a", "greaterThan", 10)], [("level", "High")]),
            rule("HighB", "Patient", [cond("b", "greaterThan", 10)], [("level", "High")]),
            rule("LowA", "Patient", [cond("a", "isAssigned", True)], [("level", "Low")]),
        ],
        LEVEL_MEMBERS,
    )


GOAL = (cond("level", "isAssigned", True),)


def test_a_lower_value_is_undecided_while_an_input_that_could_overrule_it_is_incomplete() -> None:
    onto = _levels_ontology()
    w = _world(onto, ("a", Decimal(5)))
    assert w.value(P, iri("level")) == iri("Low")
    [blocker] = w.undecided(P, GOAL, {iri("b")})
    assert (blocker.input, blocker.how, blocker.rule, blocker.value) == (
        iri("b"),
        "overrule",
        iri("HighB"),
        iri("High"),
    )
    assert w.undecided(P, GOAL, set()) == ()


def test_the_first_listed_value_has_no_rival_and_stays_decided() -> None:
    onto = _levels_ontology()
    w = _world(onto, ("a", Decimal(50)))
    assert w.value(P, iri("level")) == iri("High")
    assert w.undecided(P, GOAL, {iri("b")}) == ()


def test_a_rival_ruled_out_by_a_complete_input_does_not_block() -> None:
    onto = _levels_ontology()
    two = replace(onto.rules[1], when=(cond("b", "greaterThan", 10), cond("a", "greaterThan", 100)))
    onto = replace(onto, rules=(onto.rules[0], two, onto.rules[2]))
    w = _world(onto, ("a", Decimal(5)))
    # HighB also needs a > 100, and a (complete) is 5: b cannot change the outcome
    assert w.undecided(P, GOAL, {iri("b")}) == ()


def test_a_rule_cycle_carries_every_input_of_the_cycle() -> None:
    """x and y derive each other; x also comes from d. The rival reading y depends on d through
    x, however the cycle is first walked (HighX, examined first, is ruled out by a = 5)."""
    onto = ontology(
        [cls("Patient"), cls("Level", one_of=LEVELS)],
        [
            prop("a", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("c", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("d", "Patient", "xsd:decimal", cardinality="0..1"),
            prop("x", "Patient", "xsd:boolean", cardinality="0..1"),
            prop("y", "Patient", "xsd:boolean", cardinality="0..1"),
            _level(),
        ],
        [
            rule(
                "HighX",
                "Patient",
                [cond("x", "is", True), cond("a", "greaterThan", 100)],
                [("level", "High")],
            ),
            rule("HighY", "Patient", [cond("y", "is", True)], [("level", "High")]),
            rule("XfromY", "Patient", [cond("y", "is", True)], [("x", True)]),
            rule("YfromX", "Patient", [cond("x", "is", True)], [("y", True)]),
            rule("YfromC", "Patient", [cond("c", "greaterThan", 1)], [("y", True)]),
            rule("XfromD", "Patient", [cond("d", "greaterThan", 1)], [("x", True)]),
            rule("LowA", "Patient", [cond("a", "isAssigned", True)], [("level", "Low")]),
        ],
        LEVEL_MEMBERS,
    )
    w = _world(onto, ("a", Decimal(5)), ("c", Decimal(0)))
    assert w.value(P, iri("level")) == iri("Low")
    found = w.undecided(P, GOAL, {iri("d")})
    assert {(b.input, b.rule) for b in found} == {(iri("d"), iri("HighY"))}


def test_an_absence_in_the_proof_on_an_incomplete_input_is_undecided() -> None:
    onto = ontology(
        [cls("Patient"), cls("Level", one_of=LEVELS)],
        [
            prop("a", "Patient", "xsd:decimal", cardinality="0..1"),
            _level(rules_only=False),
        ],
        [rule("LowNoA", "Patient", [cond("a", "isAssigned", False)], [("level", "Low")])],
        LEVEL_MEMBERS,
    )
    w = _world(onto)
    assert w.value(P, iri("level")) == iri("Low")
    [blocker] = w.undecided(P, GOAL, {iri("a")})
    assert (blocker.input, blocker.how) == (iri("a"), "absence")


def test_a_goal_that_fails_is_undecided_only_if_an_incomplete_input_could_make_it_hold() -> None:
    onto = _levels_ontology()
    w = _world(onto)
    assert w.value(P, iri("level")) is None
    assert {b.input for b in w.undecided(P, GOAL, {iri("b")})} == {iri("b")}
    # an input no rule deriving the level reads changes nothing
    assert w.undecided(P, GOAL, {iri("unrelated")}) == ()
