"""Tools per instance: an ActionStep with ``horis:forEach`` calls its tool once for each
instance its paths reach (filtered by ``horis:where``), reads the arguments on that instance,
lands the results on it, and replays each call from the record."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from app.ontology import verify
from app.ontology.model import Ontology
from app.runtime import RunContext, run_workflow
from app.runtime.outcome import Outcome
from app.runtime.replay import RecordedRun, replay_run
from app.runtime.trace import ToolCall
from app.tools import ToolInvoker
from app.world import AddInstance, Assert, World
from tests.language.conftest import L

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CALLS: list[dict[str, Any]] = []


def daily_dose(dose: Any, perDay: Any) -> dict[str, Any]:
    """A test tool: the daily dose of one order (None when either part is missing)."""
    CALLS.append({"dose": dose, "perDay": perDay})
    if dose is None or perDay is None:
        return {"dailyDose": None}
    return {"dailyDose": float(Decimal(str(dose)) * Decimal(str(perDay)))}  # JSON numbers


INVOKER = ToolInvoker(tools={"daily_dose": daily_dose})

DEPLOYMENT = """
:Patient a horis:Class .
:Order a horis:Class .
:hasOrder a horis:Property ; horis:domain :Patient ; horis:range :Order .
:hasDraft a horis:Property ; horis:domain :Patient ; horis:range :Order .
:dose a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ; horis:cardinality "0..1" .
:perDay a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ;
    horis:cardinality "0..1" .
:cancelled a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" .
:dailyDose a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ;
    horis:cardinality "0..1" .
:totalDose a horis:Property ; horis:domain :Patient ; horis:range xsd:decimal ;
    horis:cardinality "0..1" ;
    horis:aggregate [ horis:function horis:Sum ; horis:of :dailyDose ;
                      horis:over ( :hasOrder ) , ( :hasDraft ) ] .

:dailyDoseTool a horis:Tool ;
    horis:takes [ horis:arg [ horis:name "dose" ; horis:type xsd:decimal ] ;
                  horis:arg [ horis:name "perDay" ; horis:type xsd:decimal ] ] ;
    horis:effect [ horis:asserts [ horis:property :dailyDose ; horis:type xsd:decimal ] ] ;
    horis:binding "python:daily_dose" ; horis:idempotent false .

:Doses a horis:Workflow ; horis:startsAt :EachOrder ; horis:focus :Patient .
:EachOrder a horis:ActionStep ; horis:tool :dailyDoseTool ;
    horis:forEach ( :hasOrder ) , ( :hasDraft ) ;
    horis:where [ horis:property :cancelled ; horis:isAssigned false ] ;
    horis:bind [ horis:arg "dose" ; horis:property :dose ] ,
               [ horis:arg "perDay" ; horis:property :perDay ] ;
    horis:onError :Failed ; horis:next :Done .
:Done a horis:Step ; horis:terminal true .
:Failed a horis:Step ; horis:terminal true .
"""


@pytest.fixture
def load(deployment: Callable[..., Ontology]) -> Callable[[str], Ontology]:
    def _load(text: str) -> Ontology:
        return deployment(text, registry={"daily_dose": daily_dose})

    return _load


def patient(onto: Ontology, *orders: tuple[str, str, dict[str, Any]]) -> World:
    world = World(onto, now=NOW)
    changes: list[Any] = [AddInstance("p", L + "Patient")]
    for oid, link, props in orders:
        changes += [AddInstance(oid, L + "Order"), Assert("p", L + link, oid)]
        changes += [Assert(oid, L + k, v) for k, v in props.items()]
    tx = world.transact(changes, provenance="api")
    assert tx.ok, tx.violations
    return world


def run(onto: Ontology, world: World, **ctx: Any) -> Outcome:
    CALLS.clear()
    return run_workflow(onto, "Doses", world, RunContext(now=NOW, tools=INVOKER, **ctx))


def test_the_tool_runs_once_per_instance_and_lands_on_it(load: Callable[[str], Ontology]) -> None:
    onto = load(DEPLOYMENT)
    assert verify(onto) == []
    world = patient(
        onto,
        ("o1", "hasOrder", {"dose": 10, "perDay": 3}),
        ("o2", "hasDraft", {"dose": 5, "perDay": 2}),
        ("o3", "hasOrder", {"dose": 7, "perDay": 1, "cancelled": True}),
    )

    outcome = run(onto, world)

    assert outcome.terminal == "Done"
    assert world.value("o1", L + "dailyDose") == Decimal(30)
    assert world.value("o2", L + "dailyDose") == Decimal(10)
    assert world.value("o3", L + "dailyDose") is None  # horis:where left it out
    assert world.value("p", L + "totalDose") == Decimal(40)
    entry = outcome.trace[0]
    assert entry.instances == ["o1", "o2"]
    assert [c.args for c in entry.calls if isinstance(c, ToolCall)] == [
        {"dose": 10, "perDay": 3},
        {"dose": 5, "perDay": 2},
    ]
    fact = world.fact("o1", L + "dailyDose", Decimal(30))
    assert fact is not None and fact.provenance == "tool"


def test_an_instance_reached_twice_is_computed_once(load: Callable[[str], Ontology]) -> None:
    onto = load(DEPLOYMENT)
    world = patient(onto, ("o1", "hasOrder", {"dose": 10, "perDay": 3}))
    assert world.transact([Assert("p", L + "hasDraft", "o1")], provenance="api").ok

    outcome = run(onto, world)

    assert outcome.trace[0].instances == ["o1"]
    assert len(CALLS) == 1


def test_no_instance_means_no_call_and_the_run_goes_on(load: Callable[[str], Ontology]) -> None:
    onto = load(DEPLOYMENT)
    outcome = run(onto, patient(onto))

    assert outcome.terminal == "Done"
    assert outcome.trace[0].instances == []
    assert CALLS == []


def test_a_replay_substitutes_each_recorded_call_in_order(
    load: Callable[[str], Ontology],
) -> None:
    onto = load(DEPLOYMENT)
    orders = (
        ("o1", "hasOrder", {"dose": 10, "perDay": 3}),
        ("o2", "hasDraft", {"dose": 5, "perDay": 2}),
    )
    world = patient(onto, *orders)
    input_world = world.to_json()
    outcome = run(onto, world)
    recorded = RecordedRun.of(outcome, input_world=input_world, text=None, now=NOW)
    CALLS.clear()

    report = replay_run(onto, recorded, tools=INVOKER)

    assert report.same, report.divergences
    assert CALLS == []  # the tool is not idempotent: every call came from the record
    assert report.outcome is not None
    assert [c.substituted for c in report.outcome.trace[0].calls] == [True, True]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("( :hasOrder ) , ( :hasDraft ) ;", "( :hasOrder :dose ) ;"),
            "whose values are literals",
        ),
        (
            ("horis:property :dose ] ,", "horis:property :totalDose ] ,"),
            "which the focus Order does not carry",
        ),
        (
            (":cancelled ; horis:isAssigned", ":totalDose ; horis:isAssigned"),
            "totalDose belongs to Patient, not to Order",
        ),
    ],
)
def test_verification_reads_bindings_and_filters_on_the_instances(
    load: Callable[[str], Ontology], change: tuple[str, str], message: str
) -> None:
    onto = load(DEPLOYMENT.replace(*change))
    problems = verify(onto)
    assert any(message in p.message for p in problems), problems


def test_where_without_for_each_is_a_load_error(deployment: Callable[..., Ontology]) -> None:
    from app.ontology import OntologyError

    text = DEPLOYMENT.replace("horis:forEach ( :hasOrder ) , ( :hasDraft ) ;", "")
    with pytest.raises(OntologyError) as err:
        deployment(text, registry={"daily_dose": daily_dose})
    assert any("filters horis:forEach" in p.message for p in err.value.problems)


def test_a_null_result_asserts_nothing(load: Callable[[str], Ontology]) -> None:
    onto = load(DEPLOYMENT)
    world = patient(onto, ("o1", "hasOrder", {"dose": 10}))  # no perDay: the tool answers null

    outcome = run(onto, world)

    assert outcome.terminal == "Done"
    assert world.value("o1", L + "dailyDose") is None
    assert world.value("p", L + "totalDose") == Decimal(0)
