"""Time windows: the run's time (the hook call's) is the World's ``now``; look-back windows
count calendar days and are checked at load."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.ontology import verify
from app.ontology.durations import parse_window
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, World
from app.world.windows import day_before
from tests.language.conftest import L

ORDERS = """
:Patient a horis:Class .
:authored a horis:Property ; horis:domain :Patient ; horis:range xsd:date .
:ends a horis:Property ; horis:domain :Patient ; horis:range xsd:dateTime .
:recent a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:lookBack a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:stillRunning a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
# "authored in the past 90 days, excluding the previous 24 hours"
:Recent a horis:Rule ; horis:about :Patient ;
    horis:when ( [ horis:property :authored ; horis:atMostAgo "P90D" ]
                 [ horis:property :authored ; horis:atLeastAgo "PT24H" ] ) ;
    horis:then [ horis:property :recent ; horis:value true ] .
:LookBack a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :authored ; horis:withinPast "P1Y" ] ;
    horis:then [ horis:property :lookBack ; horis:value true ] .
:StillRunning a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :ends ; horis:atMostAgo "P0D" ] ;
    horis:then [ horis:property :stillRunning ; horis:value true ] .
"""
NOW = datetime(2025, 6, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(ORDERS)
    assert verify(o) == []
    return o


def world_with(onto: Ontology, now: datetime | None, **facts: str) -> World:
    world = World(onto, now=now)
    changes = [AddInstance("p", L + "Patient")]
    changes += [Assert("p", L + k, v) for k, v in facts.items()]
    tx = world.transact(changes, provenance="api")
    assert tx.ok, tx.violations
    return world


def days_ago(n: int) -> str:
    return (NOW - timedelta(days=n)).date().isoformat()


@pytest.mark.parametrize(
    ("authored", "recent"),
    [
        (days_ago(0), None),  # today: within the 24 hours excluded
        (days_ago(1), True),  # yesterday counts
        (days_ago(90), True),  # the 90th day back is inside
        (days_ago(91), None),
        ((NOW + timedelta(days=3)).date().isoformat(), None),
    ],
)
def test_a_window_counts_calendar_days(onto: Ontology, authored: str, recent: bool | None) -> None:
    assert world_with(onto, NOW, authored=authored).value("p", "recent") is recent


def test_years_move_the_calendar_and_the_past_excludes_the_future(onto: Ontology) -> None:
    assert world_with(onto, NOW, authored="2024-06-01").value("p", "lookBack") is True
    assert world_with(onto, NOW, authored="2024-05-31").value("p", "lookBack") is None
    assert world_with(onto, NOW, authored="2025-06-02").value("p", "lookBack") is None
    leap = datetime(2024, 2, 29, tzinfo=UTC)
    assert day_before(parse_window("P1Y"), leap).isoformat() == "2023-02-28"  # type: ignore[arg-type]


def test_a_date_time_counts_on_its_own_day(onto: Ontology) -> None:
    # 23:30 at -06:00 on 31 May is 1 June in UTC, but the record says the 31st: still running
    # "at most 0 days ago" means today or later, so the 31st is over
    west = timezone(timedelta(hours=-6))
    ends = datetime(2025, 5, 31, 23, 30, tzinfo=west).isoformat()
    assert world_with(onto, NOW, ends=ends).value("p", "stillRunning") is None
    assert world_with(onto, NOW, ends="2025-06-01T00:00:00-06:00").value("p", "stillRunning")


def test_a_world_without_a_time_sees_no_value_in_any_window(onto: Ontology) -> None:
    world = world_with(onto, None, authored=days_ago(1))
    assert world.value("p", "recent") is None


def test_the_time_travels_with_the_saved_world(onto: Ontology) -> None:
    world = world_with(onto, NOW, authored=days_ago(10))
    data = world.to_json()
    assert data["now"] == NOW.isoformat()
    assert World.from_json(onto, data).value("p", "recent") is True
    later = NOW + timedelta(days=200)
    assert World.from_json(onto, data, now=later).value("p", "recent") is None


def test_a_window_on_a_number_is_a_verification_error(
    deployment: Callable[..., Ontology],
) -> None:
    broken = (
        ORDERS
        + """
:age a horis:Property ; horis:domain :Patient ; horis:range xsd:integer .
:Wrong a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :age ; horis:withinPast "P1Y" ] ;
    horis:then [ horis:property :recent ; horis:value true ] .
"""
    )
    (problem,) = verify(deployment(broken))
    assert problem.node == L + "Wrong" and "is a time window" in problem.message
