"""horis:dated: an aggregate keeps a reached instance only when it is dated within a window before
a date of the subject ("a prescription from 31 to 1 days before the screen"), the window measured
in calendar days back from the subject's own date rather than from now."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pytest

from app.ontology import OntologyError, verify
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, Retract, World
from tests.language.conftest import L

NOW = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
SCREEN_DAY = date(2026, 2, 1)

SCREENS = """
:Patient a horis:Class .
:Order a horis:Class .
:Screen a horis:Class .
:hasOrder a horis:Property ; horis:domain :Patient ; horis:range :Order .
:hasScreen a horis:Property ; horis:domain :Patient ; horis:range :Screen .
:screenOf a horis:Property ; horis:domain :Screen ; horis:range :Patient ;
    horis:inverseOf :hasScreen .
:medication a horis:Property ; horis:domain :Order ; horis:range xsd:string .
:authored a horis:Property ; horis:domain :Order ; horis:range xsd:date ; horis:cardinality "0..1" .
:taken a horis:Property ; horis:domain :Screen ; horis:range xsd:date ; horis:cardinality "0..1" .
:positive a horis:Property ; horis:domain :Screen ; horis:range xsd:boolean ;
    horis:cardinality "0..1" .
:opioidsBefore a horis:Property ; horis:domain :Screen ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Count ; horis:over ( :screenOf :hasOrder ) ;
                      horis:where [ horis:property :medication ;
                                    horis:inValueSet <http://example.org/vs/opioids> ] ;
                      horis:dated [ horis:property :authored ; horis:anchor :taken ;
                                    horis:windowFrom "P31D" ; horis:windowTo "P1D" ] ] .
:unexpected a horis:Property ; horis:domain :Screen ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:FoundNotPrescribed a horis:Rule ; horis:about :Screen ;
    horis:when ( [ horis:property :positive ; horis:is true ]
                 [ horis:property :opioidsBefore ; horis:is 0 ] ) ;
    horis:then [ horis:property :unexpected ; horis:value true ] .
"""
OXYCODONE = "http://www.nlm.nih.gov/research/umls/rxnorm|1049502"


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(SCREENS)
    assert verify(o) == []
    return o


def chart(onto: Ontology, *orders: tuple[str, int, str]) -> World:
    """A positive screen on SCREEN_DAY; orders: (id, days before the screen, medication)."""
    world = World(onto, now=NOW)
    changes = [
        AddInstance("p", L + "Patient"),
        AddInstance("s1", L + "Screen"),
        Assert("p", L + "hasScreen", "s1"),
        Assert("s1", L + "screenOf", "p"),
        Assert("s1", L + "taken", SCREEN_DAY.isoformat()),
        Assert("s1", L + "positive", True),
    ]
    for oid, before, medication in orders:
        changes += [
            AddInstance(oid, L + "Order"),
            Assert("p", L + "hasOrder", oid),
            Assert(oid, L + "medication", medication),
            Assert(oid, L + "authored", (SCREEN_DAY - timedelta(days=before)).isoformat()),
        ]
    assert world.transact(changes, provenance="api").ok
    return world


@pytest.mark.parametrize(("before", "counted"), [(0, 0), (1, 1), (31, 1), (32, 0), (-3, 0)])
def test_an_order_counts_from_31_days_to_1_day_before_the_screen(
    onto: Ontology, before: int, counted: int
) -> None:
    world = chart(onto, ("o1", before, OXYCODONE))
    assert world.value("s1", L + "opioidsBefore") == counted
    assert world.value("s1", L + "unexpected") is (True if counted == 0 else None)


def test_only_orders_that_pass_the_filter_count(onto: Ontology) -> None:
    world = chart(onto, ("o1", 10, "http://www.nlm.nih.gov/research/umls/rxnorm|1298088"))
    assert world.value("s1", L + "opioidsBefore") == 0


def test_the_window_follows_the_screen_day_not_now(onto: Ontology) -> None:
    world = chart(onto, ("o1", 10, OXYCODONE))
    assert world.value("s1", L + "opioidsBefore") == 1
    moved = (SCREEN_DAY + timedelta(days=40)).isoformat()
    assert world.transact(
        [Retract("s1", L + "taken", SCREEN_DAY.isoformat()), Assert("s1", L + "taken", moved)],
        provenance="api",
    ).ok
    assert world.value("s1", L + "opioidsBefore") == 0
    assert world.value("s1", L + "unexpected") is True


def test_a_screen_without_a_date_keeps_nothing(onto: Ontology) -> None:
    world = chart(onto, ("o1", 10, OXYCODONE))
    assert world.transact([Retract("s1", L + "taken", SCREEN_DAY.isoformat())], provenance="api").ok
    assert world.value("s1", L + "opioidsBefore") == 0


def test_the_proof_names_the_dates_compared(onto: Ontology) -> None:
    text = chart(onto, ("o1", 10, OXYCODONE)).proof("s1", L + "opioidsBefore").render()
    assert "opioidsBefore = 1" in text
    assert "taken" in text and "authored" in text


def test_a_dated_window_that_cannot_be_read_is_a_load_error(
    deployment: Callable[..., Ontology],
) -> None:
    broken = SCREENS.replace("horis:anchor :taken ;", "")
    with pytest.raises(OntologyError) as err:
        deployment(broken)
    assert any("horis:dated needs horis:anchor" in p.message for p in err.value.problems)
    with pytest.raises(OntologyError):
        deployment(SCREENS.replace('"P31D"', '"a month"'))


def test_dates_of_the_wrong_type_fail_verification(deployment: Callable[..., Ontology]) -> None:
    text = SCREENS.replace(
        "horis:property :authored ; horis:anchor :taken",
        "horis:property :medication ; horis:anchor :positive",
    )
    messages = [p.message for p in verify(deployment(text))]
    assert any("horis:dated medication must be a date" in m for m in messages), messages
    assert any("horis:anchor positive must be a date" in m for m in messages), messages
