"""DaysCovered: how many days of a window before now the spans of the kept instances cover
("on an opioid at least 7 of the past 10 days"), each span from a start date to an end date or a
length in days, clipped to the window, merged where spans overlap or meet."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from app.ontology import OntologyError, verify
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, Retract, World
from tests.language.conftest import L

NOW = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)
TODAY = NOW.date()

ORDERS = """
:Patient a horis:Class .
:Order a horis:Class .
:hasOrder a horis:Property ; horis:domain :Patient ; horis:range :Order .
:opioid a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" .
:authored a horis:Property ; horis:domain :Order ; horis:range xsd:date ; horis:cardinality "0..1" .
:supplyDays a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ;
    horis:cardinality "0..1" .
:stopped a horis:Property ; horis:domain :Order ; horis:range xsd:date ; horis:cardinality "0..1" .
:opioidDays a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:DaysCovered ; horis:over ( :hasOrder ) ;
                      horis:where ( [ horis:property :opioid ; horis:is true ] ) ;
                      horis:start :authored ; horis:lengthDays :supplyDays ;
                      horis:windowFrom "P10D" ] .
:daysLastMonth a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:DaysCovered ; horis:over ( :hasOrder ) ;
                      horis:start :authored ; horis:end :stopped ;
                      horis:windowFrom "P2M" ; horis:windowTo "P1M" ] .
:onOpioids a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:OnOpioids a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :opioidDays ; horis:atLeast 7 ] ;
    horis:then [ horis:property :onOpioids ; horis:value true ] .
"""


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(ORDERS)
    assert verify(o) == []
    return o


def patient(onto: Ontology, *orders: tuple[str, int, float]) -> World:
    """orders: (id, authored days ago, days of supply), all opioids."""
    world = World(onto, now=NOW)
    changes = [AddInstance("p", L + "Patient")]
    for oid, ago, supply in orders:
        changes += [
            AddInstance(oid, L + "Order"),
            Assert("p", L + "hasOrder", oid),
            Assert(oid, L + "opioid", True),
            Assert(oid, L + "authored", (TODAY - timedelta(days=ago)).isoformat()),
            Assert(oid, L + "supplyDays", Decimal(str(supply))),
        ]
    assert world.transact(changes, provenance="api").ok
    return world


def test_seven_days_of_supply_eight_days_ago_cover_seven_of_the_past_ten(onto: Ontology) -> None:
    world = patient(onto, ("o1", 8, 7))
    assert world.value("p", L + "opioidDays") == 7
    assert world.value("p", L + "onOpioids") is True


def test_six_days_cover_six_and_decide_nothing(onto: Ontology) -> None:
    world = patient(onto, ("o1", 8, 6))
    assert world.value("p", L + "opioidDays") == 6
    assert world.value("p", L + "onOpioids") is None


def test_a_span_is_clipped_to_the_window(onto: Ontology) -> None:
    # 30 days from 20 days ago: the window [today - 10, today] is covered end to end
    assert patient(onto, ("o1", 20, 30)).value("p", L + "opioidDays") == 10
    # ended 11 days ago: nothing of the window
    assert patient(onto, ("o1", 20, 9)).value("p", L + "opioidDays") == 0


def test_overlapping_spans_count_once_and_spans_that_meet_merge(onto: Ontology) -> None:
    overlapping = patient(onto, ("o1", 9, 5), ("o2", 7, 5))  # days -9..-4 and -7..-2
    assert overlapping.value("p", L + "opioidDays") == 7
    meeting = patient(onto, ("o1", 9, 3), ("o2", 5, 3))  # -9..-6 and -5..-2 meet
    assert meeting.value("p", L + "opioidDays") == 7
    apart = patient(onto, ("o1", 9, 2), ("o2", 5, 3))  # -9..-7 and -5..-2: a day between
    assert apart.value("p", L + "opioidDays") == 5


def test_a_fraction_of_a_day_of_supply_is_dropped(onto: Ontology) -> None:
    assert patient(onto, ("o1", 8, 7.9)).value("p", L + "opioidDays") == 7


def test_only_kept_instances_count_and_the_count_follows_retractions(onto: Ontology) -> None:
    world = patient(onto, ("o1", 8, 7))
    assert world.transact([Retract("o1", L + "opioid", True)], provenance="api").ok
    assert world.value("p", L + "opioidDays") == 0
    assert world.value("p", L + "onOpioids") is None


def test_an_order_without_a_start_or_a_length_covers_nothing(onto: Ontology) -> None:
    world = patient(onto, ("o1", 8, 7))
    assert world.transact([Retract("o1", L + "supplyDays", Decimal(7))], provenance="api").ok
    assert world.value("p", L + "opioidDays") == 0


def test_a_window_of_months_moves_the_calendar_and_ends_may_be_dates(onto: Ontology) -> None:
    world = World(onto, now=NOW)  # window: 10 January to 10 February 2026
    assert world.transact(
        [
            AddInstance("p", L + "Patient"),
            AddInstance("o1", L + "Order"),
            Assert("p", L + "hasOrder", "o1"),
            Assert("o1", L + "authored", date(2026, 1, 1).isoformat()),
            Assert("o1", L + "stopped", date(2026, 1, 31).isoformat()),
        ],
        provenance="api",
    ).ok
    assert world.value("p", L + "daysLastMonth") == 21


def test_the_proof_names_the_spans_it_counted(onto: Ontology) -> None:
    text = patient(onto, ("o1", 8, 7)).proof("p", L + "onOpioids").render()
    assert "opioidDays = 7" in text
    assert "supplyDays" in text and "authored" in text


def test_a_world_without_a_time_counts_no_day(onto: Ontology) -> None:
    world = World(onto)
    assert world.transact([AddInstance("p", L + "Patient")], provenance="api").ok
    assert world.value("p", L + "opioidDays") == 0


def _with_days(span: str, range_: str = "xsd:integer") -> str:
    """ORDERS with :opioidDays's aggregate given another span."""
    return (
        ORDERS.split(":opioidDays a")[0]
        + f"""
:opioidDays a horis:Property ; horis:domain :Patient ; horis:range {range_} ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:DaysCovered ; horis:over ( :hasOrder ) ; {span} ] .
"""
    )


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ('horis:start :authored ; horis:lengthDays :supplyDays ; horis:windowFrom "10 days"',
         "ISO 8601 duration"),
        ('horis:start :authored ; horis:windowFrom "P10D"', "horis:end or horis:lengthDays"),
        ('horis:lengthDays :supplyDays ; horis:windowFrom "P10D"', "horis:start"),
        ("horis:start :authored ; horis:lengthDays :supplyDays", "horis:windowFrom"),
    ],
)  # fmt: skip
def test_a_span_that_cannot_be_read_is_a_load_error(
    deployment: Callable[..., Ontology], span: str, message: str
) -> None:
    with pytest.raises(OntologyError) as err:
        deployment(_with_days(span))
    assert any(message in p.message for p in err.value.problems), err.value.problems


def test_a_span_of_the_wrong_types_fails_verification(deployment: Callable[..., Ontology]) -> None:
    span = 'horis:start :supplyDays ; horis:lengthDays :authored ; horis:windowFrom "P10D"'
    messages = [p.message for p in verify(deployment(_with_days(span, "xsd:decimal")))]
    assert any("horis:start supplyDays must be a date" in m for m in messages), messages
    assert any("horis:lengthDays authored must be a number" in m for m in messages), messages
    assert any("DaysCovered counts whole days" in m for m in messages), messages


def test_span_terms_belong_to_days_covered_only(deployment: Callable[..., Ontology]) -> None:
    text = (
        ORDERS
        + """
:count a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Count ; horis:over ( :hasOrder ) ;
                      horis:windowFrom "P10D" ] .
"""
    )
    with pytest.raises(OntologyError) as err:
        deployment(text)
    assert any("belongs to a DaysCovered" in p.message for p in err.value.problems)
