"""horis:sharing: an aggregate keeps a reached instance only when a value of it equals a value of
the subject (a care plan counts for an order being signed only when its author is the order's
prescriber)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.ontology import OntologyError, verify
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, Retract, World
from tests.language.conftest import L

PLANS = """
:Patient a horis:Class .
:Order a horis:Class .
:Plan a horis:Class .
:hasDraft a horis:Property ; horis:domain :Patient ; horis:range :Order .
:hasPlan a horis:Property ; horis:domain :Patient ; horis:range :Plan .
:planOf a horis:Property ; horis:domain :Plan ; horis:range :Patient ; horis:inverseOf :hasPlan .
:recorder a horis:Property ; horis:domain :Order ; horis:range xsd:string .
:author a horis:Property ; horis:domain :Plan ; horis:range xsd:string .
:byPrescriber a horis:Property ; horis:domain :Plan ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Count ; horis:over ( :planOf :hasDraft ) ;
                      horis:sharing [ horis:property :recorder ; horis:anchor :author ] ] .
"""


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(PLANS)
    assert verify(o) == []
    return o


def chart(onto: Ontology, author: str, *recorders: str) -> World:
    world = World(onto)
    changes = [
        AddInstance("p", L + "Patient"),
        AddInstance("plan", L + "Plan"),
        Assert("p", L + "hasPlan", "plan"),
        Assert("plan", L + "planOf", "p"),
        Assert("plan", L + "author", author),
    ]
    for i, recorder in enumerate(recorders):
        changes += [
            AddInstance(f"o{i}", L + "Order"),
            Assert("p", L + "hasDraft", f"o{i}"),
            Assert(f"o{i}", L + "recorder", recorder),
        ]
    assert world.transact(changes, provenance="api").ok
    return world


def test_only_orders_of_the_plans_author_are_kept(onto: Ontology) -> None:
    world = chart(onto, "Practitioner/a", "Practitioner/a", "Practitioner/b")
    assert world.value("plan", L + "byPrescriber") == 1
    assert chart(onto, "Practitioner/c", "Practitioner/a").value("plan", L + "byPrescriber") == 0


def test_the_count_follows_the_author(onto: Ontology) -> None:
    world = chart(onto, "Practitioner/a", "Practitioner/b")
    assert world.value("plan", L + "byPrescriber") == 0
    assert world.transact(
        [
            Retract("plan", L + "author", "Practitioner/a"),
            Assert("plan", L + "author", "Practitioner/b"),
        ],
        provenance="api",
    ).ok
    assert world.value("plan", L + "byPrescriber") == 1
    text = world.proof("plan", L + "byPrescriber").render()
    assert "author" in text and "recorder" in text


def test_a_sharing_without_an_anchor_is_a_load_error(deployment: Callable[..., Ontology]) -> None:
    with pytest.raises(OntologyError) as err:
        deployment(PLANS.replace(" ; horis:anchor :author", ""))
    assert any("horis:sharing needs horis:anchor" in p.message for p in err.value.problems)


def test_values_of_two_ranges_cannot_be_shared(deployment: Callable[..., Ontology]) -> None:
    text = PLANS.replace(
        ":author a horis:Property ; horis:domain :Plan ; horis:range xsd:string .",
        ":author a horis:Property ; horis:domain :Plan ; horis:range xsd:date .",
    )
    messages = [p.message for p in verify(deployment(text))]
    assert any("they must have one range" in m for m in messages), messages
