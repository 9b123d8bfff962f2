"""A run that starts over (its claim taken over after its process died) gets a fresh World from
the same reading (``Assembled.again``): the same facts, the same refusals, each said once."""

from __future__ import annotations

from datetime import UTC, datetime

from app.cds.assemble import CallInput, assemble_input
from app.ontology import load_ontology
from tests.cds import clinical as fx
from tests.ontology.conftest import TRIAGE

TEMP = "8310-5"


def test_a_run_started_over_says_each_refused_value_once() -> None:
    ontology = load_ontology([TRIAGE])
    service = ontology.service("horismos-triage")
    pid, eid = fx.new_id(), fx.new_id()
    given = CallInput(
        ontology=ontology,
        service=service,
        workflow=ontology.workflow(service.workflow),
        context={"patientId": pid, "encounterId": eid},
        data={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            # 50 °C: read, then refused by the World's gate (out of the property's range)
            "vitals": fx.searchset([fx.observation(pid, TEMP, 50, "Cel")]),
            "conditions": fx.searchset([]),
        },
        now=datetime.now(UTC),
    )
    first = assemble_input(given)
    before = first.inputs.to_json()
    refused = [
        r for p in before for r in p.get("reasons", []) if "not used" in str(r.get("detail"))
    ]
    assert len(refused) == 1, before

    again = first.again()

    assert again.inputs.to_json() == before
    assert [v.message for v in again.violations] == [v.message for v in first.violations]
    assert again.world is not first.world
