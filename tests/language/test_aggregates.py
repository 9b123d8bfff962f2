"""Aggregates: Count, Sum, Min and Max over the instances reached, kept current as facts come
and go (truth maintenance), stratified like negation, typed at load, explained in proofs."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest

from app.ontology import verify
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, Retract, StratificationError, World
from app.world.world import ontology_index
from tests.language.conftest import L

ORDERS = """
:Patient a horis:Class .
:Order a horis:Class .
:hasOrder a horis:Property ; horis:domain :Patient ; horis:range :Order .
:hasDraft a horis:Property ; horis:domain :Patient ; horis:range :Order .
:mme a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ;
    horis:cardinality "0..1" .
:opioid a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" .
:cancelled a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" .
:authored a horis:Property ; horis:domain :Order ; horis:range xsd:date ; horis:cardinality "0..1" .
:counts a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:Counts a horis:Rule ; horis:about :Order ;
    horis:when ( [ horis:property :opioid ; horis:is true ]
                 [ horis:property :cancelled ; horis:isAssigned false ] ) ;
    horis:then [ horis:property :counts ; horis:value true ] .
:totalMme a horis:Property ; horis:domain :Patient ; horis:range xsd:decimal ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Sum ; horis:over ( :hasDraft ) , ( :hasOrder ) ;
                      horis:of :mme ; horis:where ( [ horis:property :counts ; horis:is true ] ) ] .
:opioidOrders a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Count ; horis:over ( :hasDraft ) , ( :hasOrder ) ;
                      horis:where ( [ horis:property :counts ; horis:is true ] ) ] .
:firstOrder a horis:Property ; horis:domain :Patient ; horis:range xsd:date ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Min ; horis:over ( :hasOrder :authored ) ] .
:highestMme a horis:Property ; horis:domain :Patient ; horis:range xsd:decimal ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Max ; horis:over ( :hasOrder ) ; horis:of :mme ] .
:highDose a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:HighDose a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :totalMme ; horis:atLeast 50 ] ;
    horis:then [ horis:property :highDose ; horis:value true ] .
"""


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(ORDERS)
    assert verify(o) == []
    return o


def patient(onto: Ontology, *orders: tuple[str, str, int, bool]) -> World:
    """orders: (id, "hasDraft"|"hasOrder", mme, opioid)."""
    world = World(onto)
    changes = [AddInstance("p", L + "Patient")]
    for oid, link, mme, opioid in orders:
        changes += [
            AddInstance(oid, L + "Order"),
            Assert("p", L + link, oid),
            Assert(oid, L + "mme", mme),
            Assert(oid, L + "opioid", opioid),
        ]
    tx = world.transact(changes, provenance="api")
    assert tx.ok, tx.violations
    return world


def test_a_sum_over_two_paths_counts_each_order_once(onto: Ontology) -> None:
    world = patient(onto, ("d1", "hasDraft", 30, True), ("s1", "hasOrder", 20, True))
    # the same order both drafted and stored counts once
    assert world.transact([Assert("p", L + "hasOrder", "d1")], provenance="api").ok
    assert world.value("p", "totalMme") == Decimal(50)
    assert world.value("p", "opioidOrders") == 2
    assert world.value("p", "highDose") is True  # exactly 50 is "at least 50"


def test_nothing_counted_is_zero_and_a_minimum_of_nothing_is_unassigned(onto: Ontology) -> None:
    world = patient(onto, ("s1", "hasOrder", 20, False))
    assert world.value("p", "totalMme") == 0
    assert world.value("p", "opioidOrders") == 0
    assert world.value("p", "firstOrder") is None
    assert world.value("p", "highestMme") == Decimal(20)


def test_the_aggregate_follows_every_change(onto: Ontology) -> None:
    world = patient(onto, ("d1", "hasDraft", 30, True), ("s1", "hasOrder", 20, True))
    assert world.value("p", "highDose") is True
    # a premise of the filter changes below it: the order stops counting
    assert world.transact([Assert("s1", L + "cancelled", True)], provenance="api").ok
    assert world.value("p", "totalMme") == Decimal(30)
    assert world.value("p", "highDose") is None
    assert world.transact([Retract("s1", L + "cancelled")], provenance="api").ok
    assert world.value("p", "totalMme") == Decimal(50)
    # a value read on a kept order changes
    assert world.transact(
        [Retract("d1", L + "mme"), Assert("d1", L + "mme", 10)], provenance="api"
    ).ok
    assert world.value("p", "totalMme") == Decimal(30)
    assert world.value("p", "highDose") is None
    # a snapshot restores the aggregate with everything else
    snap = world.snapshot()
    assert world.transact(
        [
            AddInstance("s2", L + "Order"),
            Assert("p", L + "hasOrder", "s2"),
            Assert("s2", L + "mme", 25),
            Assert("s2", L + "opioid", True),
        ],
        provenance="api",
    ).ok
    assert world.value("p", "totalMme") == Decimal(55)
    world.restore(snap)
    assert world.value("p", "totalMme") == Decimal(30)


def test_dates_have_a_minimum(onto: Ontology) -> None:
    world = patient(onto, ("s1", "hasOrder", 20, True), ("s2", "hasOrder", 5, True))
    world.transact(
        [Assert("s1", L + "authored", "2025-03-01"), Assert("s2", L + "authored", "2024-12-31")],
        provenance="api",
    )
    assert world.value("p", "firstOrder") == "2024-12-31"


def test_the_proof_names_what_was_summed(onto: Ontology) -> None:
    world = patient(onto, ("d1", "hasDraft", 30, True), ("s1", "hasOrder", 20, True))
    text = world.proof("p", "highDose").render()
    assert "totalMme = 50  [Sum of mme over hasDraft, hasOrder where counts]" in text
    assert "d1.mme = 30" in text and "s1.mme = 20" in text
    # the aggregate is computed, never asserted
    tx = world.transact([Assert("p", L + "totalMme", 5)], provenance="api")
    assert not tx.ok and tx.violations[0].code == "rules-only"


def test_an_aggregate_on_a_cycle_is_refused(deployment: Callable[..., Ontology]) -> None:
    onto = deployment(
        ORDERS
        + """
:Feedback a horis:Rule ; horis:about :Order ;
    horis:when [ horis:path ( :forPatient :highDose ) ; horis:is true ] ;
    horis:then [ horis:property :counts ; horis:value true ] .
:forPatient a horis:Property ; horis:domain :Order ; horis:range :Patient .
"""
    )
    with pytest.raises(StratificationError):
        ontology_index(onto)
    assert any(p.code == "stratification" for p in verify(onto))


@pytest.mark.parametrize(
    ("aggregate", "message"),
    [
        ("horis:function horis:Sum ; horis:over ( :hasOrder ) ; horis:of :opioid", "adds numbers"),
        (
            "horis:function horis:Count ; horis:over ( :hasOrder :mme ) ; "
            "horis:where ( [ horis:property :opioid ; horis:is true ] )",
            "read instances",
        ),
        (
            "horis:function horis:Max ; horis:over ( :hasOrder ) ; horis:of :authored",
            "the property of their type",
        ),
    ],
)
def test_aggregate_inputs_are_typed(
    deployment: Callable[..., Ontology], aggregate: str, message: str
) -> None:
    onto = deployment(
        ORDERS
        + f"""
:broken a horis:Property ; horis:domain :Patient ; horis:range xsd:decimal ;
    horis:cardinality "0..1" ; horis:aggregate [ {aggregate} ] .
"""
    )
    problems = [p for p in verify(onto) if p.node == L + "broken"]
    assert problems and message in problems[0].message, problems
