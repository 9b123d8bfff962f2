"""A create commit declared as an ActivityDefinition (``horis:activity``) writes the request
``$apply`` would have produced — ``instantiatesCanonical`` naming the definition, the call's
patient and encounter, the tool's arguments read as ``%name`` — once, conditionally on the
run's identifier, against the real Node FHIR server and real PostgreSQL; one that cannot be
built for the call sends nothing and says why; and at load, a declaration that cannot be
applied is refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from adapters.fhir.commit import CommitContext, CommitRefused, FhirCommitAdapter, SourceRef
from app.ontology import OntologyError, load_ontology
from app.ontology.model import XSD, AdapterCommit, EffectDecl, Ontology, ToolArg, ToolDef
from app.store.effects import effect_reports
from app.tools.call import ToolCall
from tests.ontology.conftest import PREFIXES
from tests.support.fhir_server import FhirServer
from tests.support.runs import claimed_run

NS = "https://example.org/activity-commits#"
ASSESSMENT = {
    "resourceType": "ActivityDefinition",
    "id": "nurse-assessment",
    "url": "http://example.org/ActivityDefinition/nurse-assessment",
    "version": "2",
    "status": "active",
    "kind": "Task",
    "intent": "order",
    "priority": "urgent",
    "code": {"coding": [{"system": "http://example.org/tasks", "code": "assess"}]},
    "dynamicValue": [
        {
            "path": "description",
            "expression": {
                "language": "text/fhirpath",
                "expression": "'Assess the patient in person: acuity ' + %level",
            },
        }
    ],
}


def _tool(definition: dict[str, Any]) -> ToolDef:
    return ToolDef(
        iri=NS + "assess",
        name="assess",
        args=(ToolArg(name="level", type=XSD + "string"),),
        effects=(EffectDecl(property=NS + "taskRef", type=XSD + "string"),),
        binding="fhir:commit",
        timeout=2.0,
        idempotent=True,
        commits=AdapterCommit(
            resource_type="Task",
            operation="create",
            scope="user/Task.write",
            activity=json.dumps({"activityDefinition": definition}),
        ),
    )


def _ontology(tool: ToolDef) -> Ontology:
    return Ontology(
        namespace=NS,
        version="1",
        digest="test",
        classes={},
        individuals={},
        properties={},
        rules=(),
        tools={tool.iri: tool},
        workflows={},
        services={},
    )


def _adapter(engine: Engine, base_url: str, tool: ToolDef, encounter: str) -> FhirCommitAdapter:
    context = CommitContext(
        fhir_server=base_url,
        access_token="token-123",
        scope="user/*.read user/Task.write",
        sources=(SourceRef(resource_type="Patient", id="p1", version_id="1"),),
        resources={"Patient/p1": {"resourceType": "Patient", "id": "p1"}},
        context_ids={"Patient": "p1", "Encounter": encounter},
        hook_context={"patientId": "p1", "encounterId": encounter},
        prefetch={},
        run_url="https://cds.example.org/runs/r1",
    )
    return FhirCommitAdapter(ontology=_ontology(tool), engine=engine, context=context)


def _call(tool: ToolDef, run_id: str) -> ToolCall:
    return ToolCall(tool=tool, args={"level": "Immediate"}, timeout=2.0, run_id=run_id)


@pytest.mark.fhirserver
def test_a_create_writes_the_request_its_activity_definition_defines(
    fhir_server: FhirServer, pg_engine: Engine
) -> None:
    run_id = claimed_run(pg_engine, NS + "Flow")
    tool = _tool(ASSESSMENT)
    mark = fhir_server.mark()

    result = _adapter(pg_engine, fhir_server.base_url, tool, "e1")(_call(tool, run_id))
    again = _adapter(pg_engine, fhir_server.base_url, tool, "e1")(_call(tool, run_id))

    [request, _retry] = fhir_server.requests(since=mark)
    [effect] = effect_reports(pg_engine, run_id)
    assert (request["method"], request["url"]) == ("POST", "/fhir/Task")
    assert request["ifNoneExist"] == f"identifier={effect['identifier']}"
    task = fhir_server.read("Task", effect["created"].split("/")[1])
    assert result == again == {"taskRef": f"Task/{task['id']}/_history/{effect['newVersion']}"}
    assert (
        task["instantiatesCanonical"] == "http://example.org/ActivityDefinition/nurse-assessment|2"
    )
    assert task["for"] == {"reference": "Patient/p1"}
    assert task["encounter"] == {"reference": "Encounter/e1"}
    assert (task["intent"], task["priority"]) == ("order", "urgent")
    assert task["code"] == ASSESSMENT["code"]
    assert task["description"] == "Assess the patient in person: acuity Immediate"
    assert [i["value"] for i in task["identifier"]] == [effect["identifier"].split("|")[1]]


@pytest.mark.fhirserver
def test_a_request_that_cannot_be_built_for_the_call_is_never_sent(
    fhir_server: FhirServer, pg_engine: Engine
) -> None:
    run_id = claimed_run(pg_engine, NS + "Flow")
    reads_encounter = {
        **ASSESSMENT,
        "dynamicValue": [
            {
                "path": "description",
                "expression": {"language": "text/fhirpath", "expression": "%encounter.status"},
            }
        ],
    }
    tool = _tool(reads_encounter)
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused) as refused:
        _adapter(pg_engine, fhir_server.base_url, tool, "e1")(_call(tool, run_id))

    assert fhir_server.requests(since=mark) == []
    assert "the call did not carry Encounter/e1" in refused.value.message


@pytest.fixture
def ttl(tmp_path: Path) -> Callable[[str], Path]:
    def write(body: str) -> Path:
        path = tmp_path / "tool.ttl"
        path.write_text(PREFIXES + body, encoding="utf-8")
        return path

    return write


TOOL = """
:order a horis:Tool ; horis:takes [ horis:arg [ horis:name "level" ; horis:type xsd:string ] ] ;
    horis:binding "fhir:commit" ;
    horis:commits [ horis:resourceType "{kind}" ; horis:operation horis:Create ;
                    horis:scope "user/Task.write" ;{more}
                    horis:activity {activity} ] .
"""


@pytest.mark.parametrize(
    ("kind", "definition", "more", "problem"),
    [
        ("ServiceRequest", ASSESSMENT, "", "is not the commit's horis:resourceType"),
        ("Task", {k: v for k, v in ASSESSMENT.items() if k != "url"}, "", "needs a url"),
        ("Task", ASSESSMENT, ' horis:template "{{}}" ;', "not both"),
        ("Task", {**ASSESSMENT, "library": ["http://example.org/L"]}, "", "logic library"),
        # what ActivityDefinition/$apply refuses whatever the patient, refused at load too
        ("Appointment", {**ASSESSMENT, "kind": "Appointment"}, "", "not one this host builds"),
        (
            "Task",
            {
                **ASSESSMENT,
                "timingTiming": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}},
            },
            "",
            "timingTiming is not carried",
        ),
    ],
)
def test_a_commit_activity_that_cannot_be_applied_is_refused_at_load(
    ttl: Callable[[str], Path], kind: str, definition: dict[str, Any], more: str, problem: str
) -> None:
    literal = '"""' + json.dumps({"activityDefinition": definition}) + '"""'
    path = ttl(TOOL.format(kind=kind, more=more, activity=literal))
    with pytest.raises(OntologyError, match=problem):
        load_ontology([path])


def test_a_commit_activity_loads(ttl: Callable[[str], Path]) -> None:
    literal = '"""' + json.dumps({"activityDefinition": ASSESSMENT}) + '"""'
    ontology = load_ontology([ttl(TOOL.format(kind="Task", more="", activity=literal))])
    [tool] = ontology.tools.values()
    assert tool.commits is not None and tool.commits.template is None
    assert json.loads(tool.commits.activity or "")["activityDefinition"] == ASSESSMENT
