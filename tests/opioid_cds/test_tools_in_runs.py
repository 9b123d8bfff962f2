"""The toolkit's tools bound from Turtle by dotted path and fired by an ActionStep: their results
land as facts with ``tool`` provenance, and what falls outside the contract never lands."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.ontology import load_ontology, verify
from app.ontology.model import Ontology
from app.runtime import Outcome, RunContext, run_workflow
from app.tools import ToolInvoker
from app.world import World, load_structured

TTL = Path(__file__).resolve().parents[1] / "data" / "opioid-cds" / "mme_tool.ttl"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FENTANYL_Q3D = {
    "rxnorm": ["197696"],
    "doseValue": 1,
    "doseUnit": "{patch}",
    "frequency": 1,
    "period": 3,
    "periodUnit": "d",
    "supplyValue": 30,
    "supplyUnit": "d",
}


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    loaded = load_ontology([TTL])
    assert verify(loaded) == []
    return loaded


def run(ontology: Ontology, order: dict[str, Any]) -> tuple[Outcome, World]:
    world = World(ontology)
    assert load_structured(world, {"instances": [{"id": "o1", "class": "Order", **order}]}).ok
    outcome = run_workflow(ontology, "Mme", world, RunContext(now=NOW, tools=ToolInvoker()))
    return outcome, world


def test_the_mme_lands_as_a_tool_fact(ontology: Ontology) -> None:
    outcome, world = run(ontology, FENTANYL_Q3D)

    assert outcome.terminal == "Done"
    ns = ontology.namespace
    assert world.value("o1", ns + "mme") == Decimal(180)
    assert world.value("o1", ns + "mmeStatus") == ns + "Computed"
    assert world.value("o1", ns + "supplyDays") == Decimal(30)
    fact = world.fact("o1", ns + "mme", Decimal(180))
    assert fact is not None and fact.provenance == "tool"
    call = outcome.trace[-2].calls[0]
    assert call.type == "tool" and call.args["rxnorm"] == ["197696"]
    assert call.result == {"mme": 180, "mmeStatus": "Computed"}


def test_an_order_with_several_doses_is_ambiguous(ontology: Ontology) -> None:
    invoker = ToolInvoker()
    tool = ontology.tools[ontology.namespace + "orderMme"]
    answer = invoker.invoke(tool, {**_mme_args(FENTANYL_Q3D), "doseValue": [1, 2]}, timeout=5.0)
    assert answer == {"mme": None, "mmeStatus": "AmbiguousDosage"}


def test_an_unknown_drug_answers_no_mme(ontology: Ontology) -> None:
    tool = ontology.tools[ontology.namespace + "orderMme"]
    answer = ToolInvoker().invoke(
        tool, {**_mme_args(FENTANYL_Q3D), "rxnorm": ["1185223"]}, timeout=5.0
    )
    assert answer == {"mme": None, "mmeStatus": "UnknownDrug"}


def test_an_argument_outside_the_contract_is_refused(ontology: Ontology, tmp_path: Path) -> None:
    text = TTL.read_text().replace('"periodUnit" ; horis:type', '"periodUnits" ; horis:type')
    text = text.replace('horis:arg "periodUnit" ;', 'horis:arg "periodUnits" ;')
    path = tmp_path / "typo.ttl"
    path.write_text(text)
    typo = load_ontology([path])
    outcome, world = run(typo, FENTANYL_Q3D)

    assert outcome.terminal == "Failed"
    error = outcome.trace[-2].calls[0].error
    assert error is not None and "periodUnits" in error.message
    assert world.value("o1", typo.namespace + "mme") is None


def _mme_args(order: dict[str, Any]) -> dict[str, Any]:
    names = ("rxnorm", "doseValue", "doseUnit", "frequency", "period", "periodUnit")
    return {k: order[k] for k in names}
