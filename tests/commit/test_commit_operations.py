"""PATCH and create commits against the real Node FHIR server and real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from adapters.fhir.commit import (
    CommitContext,
    CommitFailed,
    CommitRefused,
    FhirCommitAdapter,
    SourceRef,
)
from adapters.fhir.reconcile import reconcile_pending
from app.ontology.model import (
    XSD,
    AdapterCommit,
    EffectDecl,
    Individual,
    Ontology,
    ToolArg,
    ToolDef,
)
from app.store.effects import effect_reports
from app.tools.call import ToolCall
from tests.commit.dropping_proxy import dropping_proxy
from tests.support.effects import log_effect
from tests.support.fhir_server import FhirServer
from tests.support.runs import claimed_run

pytestmark = pytest.mark.fhirserver

NS = "https://example.org/commit-ops#"
PRIORITY = "http://terminology.hl7.org/CodeSystem/v3-ActPriority"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PATCH_TOOL = ToolDef(
    iri=NS + "setPriority",
    name="setPriority",
    args=(ToolArg(name="level", type=NS + "Level"),),
    effects=(EffectDecl(property=NS + "committedRef", type=XSD + "string"),),
    binding="fhir:commit",
    timeout=2.0,
    commits=AdapterCommit(
        resource_type="Encounter",
        element="priority",
        value_arg="level",
        code_system=PRIORITY,
        operation="patch",
        scope="user/Encounter.write",
    ),
)
TEMPLATE = {
    "status": "completed",
    "priority": "urgent",
    "subject": {"reference": "Patient/{{context.patientId}}"},
    "encounter": {"reference": "Encounter/{{context.encounterId}}"},
    "recipient": [
        "{{references.CareTeam ?? prefetch.encounter.participant.individual ?? "
        "prefetch.encounter.serviceProvider}}"
    ],
    "sent": "{{now}}",
    "reasonCode": [{"text": "{{arg.reason}}"}],
    "payload": [
        {"contentString": "Level {{label.level}}: {{arg.reason}}"},
        {"contentAttachment": {"url": "{{run.url}}", "title": "Decision record"}},
    ],
}
CREATE_TOOL = ToolDef(
    iri=NS + "notify",
    name="notify",
    args=(
        ToolArg(name="level", type=NS + "Level"),
        ToolArg(name="reason", type=XSD + "string"),
    ),
    effects=(EffectDecl(property=NS + "notifiedRef", type=XSD + "string"),),
    binding="fhir:commit",
    timeout=2.0,
    idempotent=True,
    commits=AdapterCommit(
        resource_type="Communication",
        operation="create",
        scope="user/Communication.write",
        template=json.dumps(TEMPLATE),
    ),
)
ONTOLOGY = Ontology(
    namespace=NS,
    version="1",
    digest="test",
    classes={},
    individuals={
        NS + "High": Individual(
            iri=NS + "High",
            name="High",
            class_iri=NS + "Level",
            codes=(f"{PRIORITY}|UR",),
            label="high priority",
        ),
    },
    properties={},
    rules=(),
    tools={PATCH_TOOL.iri: PATCH_TOOL, CREATE_TOOL.iri: CREATE_TOOL},
    workflows={},
    services={},
)
GRANTED = "user/*.read user/Encounter.write user/Communication.write"


@pytest.fixture
def run_id(pg_engine: Engine) -> str:
    return claimed_run(pg_engine, NS + "Flow")


@pytest.fixture
def encounter(fhir_server: FhirServer) -> dict[str, Any]:
    """An Encounter with elements a subsetted prefetch would not carry."""
    return fhir_server.create(
        {
            "resourceType": "Encounter",
            "id": fhir_server.new_id(),
            "status": "in-progress",
            "class": {"code": "EMER"},
            "reasonCode": [{"text": "chest pain since this morning"}],
            "participant": [{"individual": {"reference": "Practitioner/nurse-1"}}],
            "serviceProvider": {"reference": "Organization/ed"},
        }
    )


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def _context(base_url: str, encounter: dict[str, Any], **kw: Any) -> CommitContext:
    subset = {k: encounter[k] for k in ("resourceType", "id", "meta", "status", "class")}
    prefetch = {"encounter": encounter, "patient": {"resourceType": "Patient", "id": "p1"}}
    values: dict[str, Any] = {
        "fhir_server": base_url,
        "access_token": "token-123",
        "scope": GRANTED,
        "sources": (
            SourceRef(
                resource_type="Encounter",
                id=encounter["id"],
                version_id=encounter["meta"]["versionId"],
            ),
        ),
        "resources": {f"Encounter/{encounter['id']}": subset},
        "context_ids": {"Encounter": encounter["id"], "Patient": "p1"},
        "hook_context": {"patientId": "p1", "encounterId": encounter["id"]},
        "prefetch": prefetch,
        "run_url": "https://cds.example.org/runs/r1?exp=1&sig=abc",
    }
    values.update(kw)
    return CommitContext(**values)


def _adapter(engine: Engine, context: CommitContext) -> FhirCommitAdapter:
    return FhirCommitAdapter(ontology=ONTOLOGY, engine=engine, context=context)


def _patch_call(run_id: str) -> ToolCall:
    return ToolCall(tool=PATCH_TOOL, args={"level": "High"}, timeout=2.0, run_id=run_id)


def _create_call(run_id: str, reason: str = "heart rate 160/min") -> ToolCall:
    args = {"level": "High", "reason": reason}
    return ToolCall(tool=CREATE_TOOL, args=args, timeout=2.0, run_id=run_id, now=NOW)


# --- PATCH ---------------------------------------------------------------------------------


def test_a_patch_changes_only_its_element_against_the_version_read(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, _context(fhir_server.base_url, encounter))
    mark = fhir_server.mark()

    result = adapter(_patch_call(run_id))

    [request] = fhir_server.requests(since=mark)
    assert (request["method"], request["ifMatch"]) == (
        "PATCH",
        f'W/"{encounter["meta"]["versionId"]}"',
    )
    current = fhir_server.read("Encounter", encounter["id"])
    assert current["priority"] == {
        "coding": [{"system": PRIORITY, "code": "UR", "display": "high priority"}]
    }
    # everything the hook did not prefetch is still there, untouched
    unchanged = {k: v for k, v in current.items() if k not in ("priority", "meta")}
    assert unchanged == {k: v for k, v in encounter.items() if k != "meta"}
    version = current["meta"]["versionId"]
    assert result == {"committedRef": f"Encounter/{encounter['id']}/_history/{version}"}
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["operation"], effect["state"], effect["newVersion"]) == (
        "patch",
        "accepted",
        version,
    )


def test_a_patch_of_a_record_changed_since_it_was_read_is_a_conflict(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, _context(fhir_server.base_url, encounter))
    changed = fhir_server.update(
        {**encounter, "status": "finished"}, if_match=encounter["meta"]["versionId"]
    )
    assert changed.status_code == 200

    with pytest.raises(CommitFailed) as failure:
        adapter(_patch_call(run_id))

    assert failure.value.conflicted and not failure.value.retryable
    current = fhir_server.read("Encounter", encounter["id"])
    assert "priority" not in current and current["status"] == "finished"
    assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["conflicted"]


def _ignores_if_match(held: str) -> httpx.Client:
    """A FHIR server that does not honour If-Match: it runs the patch's ``test`` of the version
    and answers its failure 400, and holds version ``held`` of the Encounter."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH":
            issue = {"severity": "error", "code": "processing", "diagnostics": "patch failed"}
            return httpx.Response(400, json={"resourceType": "OperationOutcome", "issue": [issue]})
        held_resource = {"resourceType": "Encounter", "id": "e1", "meta": {"versionId": held}}
        return httpx.Response(200, json=held_resource)

    return httpx.Client(transport=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("held", "state"), [("2", "conflicted"), ("1", "failed")], ids=["changed", "unchanged"]
)
def test_a_patch_refused_400_is_a_conflict_when_the_record_changed_since_it_was_read(
    pg_engine: Engine, run_id: str, held: str, state: str
) -> None:
    read = {"resourceType": "Encounter", "id": "e1", "meta": {"versionId": "1"}}
    context = _context("https://ehr.example/fhir", {**read, "status": "in-progress", "class": {}})
    with _ignores_if_match(held) as http:
        adapter = FhirCommitAdapter(ontology=ONTOLOGY, engine=pg_engine, context=context, http=http)
        with pytest.raises(CommitFailed) as failure:
            adapter(_patch_call(run_id))

    assert failure.value.conflicted is (state == "conflicted")
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["state"], effect["status"]) == (state, 400)
    if state == "conflicted":
        assert "the server holds version 2" in effect["detail"]


def test_a_lost_answer_to_a_patch_is_settled_by_reconciliation(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    http: httpx.Client,
) -> None:
    origin = fhir_server.base_url.removesuffix("/fhir")
    with dropping_proxy(origin) as (proxy, forwarded):
        adapter = _adapter(pg_engine, _context(proxy + "/fhir", encounter))
        with pytest.raises(CommitFailed):
            adapter(_patch_call(run_id))
        assert forwarded == [f"/fhir/Encounter/{encounter['id']}"]
        assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["unknown"]
        settled = reconcile_pending(pg_engine, http=http)

    assert [(s.before, s.after) for s in settled] == [("unknown", "accepted")]
    current = fhir_server.read("Encounter", encounter["id"])
    assert effect_reports(pg_engine, run_id)[0]["newVersion"] == current["meta"]["versionId"]


# --- create --------------------------------------------------------------------------------


def _communications(fhir_server: FhirServer, identifier: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{fhir_server.base_url}/Communication",
        params={"identifier": identifier},
        headers={"accept": "application/fhir+json"},
    )
    response.raise_for_status()
    return [e["resource"] for e in response.json().get("entry", [])]


def test_a_create_posts_the_rendered_resource_once_with_if_none_exist(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, _context(fhir_server.base_url, encounter))
    mark = fhir_server.mark()

    result = adapter(_create_call(run_id))

    [request] = fhir_server.requests(since=mark)
    assert (request["method"], request["url"], request["status"]) == (
        "POST",
        "/fhir/Communication",
        201,
    )
    [effect] = effect_reports(pg_engine, run_id)
    assert request["ifNoneExist"] == f"identifier={effect['identifier']}"
    [made] = _communications(fhir_server, effect["identifier"])
    assert effect["created"] == f"Communication/{made['id']}"
    assert result == {"notifiedRef": f"Communication/{made['id']}/_history/{effect['newVersion']}"}
    assert made["subject"] == {"reference": "Patient/p1"}
    assert made["encounter"] == {"reference": f"Encounter/{encounter['id']}"}
    assert made["recipient"] == [{"reference": "Practitioner/nurse-1"}]
    assert made["reasonCode"] == [{"text": "heart rate 160/min"}]
    assert made["payload"][0] == {"contentString": "Level high priority: heart rate 160/min"}
    assert made["payload"][1]["contentAttachment"]["url"] == (
        "https://cds.example.org/runs/r1?exp=1&sig=abc"
    )
    # a message: the card says whom it reached
    assert adapter.notices() == [
        f"Sent through the EHR: Communication/{made['id']} was created, addressed to "
        "Practitioner/nurse-1."
    ]


def test_a_create_sent_again_for_the_same_run_finds_the_one_it_made(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    first = _adapter(pg_engine, _context(fhir_server.base_url, encounter))(_create_call(run_id))
    again = _adapter(pg_engine, _context(fhir_server.base_url, encounter))(_create_call(run_id))

    assert first == again
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["state"], effect["attempts"]) == ("accepted", 2)
    assert len(_communications(fhir_server, effect["identifier"])) == 1


def test_a_lost_answer_to_a_create_is_retryable_and_the_retry_creates_nothing_more(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    origin = fhir_server.base_url.removesuffix("/fhir")
    with dropping_proxy(origin, drop_first=1) as (proxy, forwarded):
        adapter = _adapter(pg_engine, _context(proxy + "/fhir", encounter))
        with pytest.raises(CommitFailed) as lost:
            adapter(_create_call(run_id))
        assert lost.value.retryable  # the identifier makes sending it again safe
        assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["unknown"]

        adapter(_create_call(run_id))

    assert forwarded == ["/fhir/Communication", "/fhir/Communication"]
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "accepted"
    assert len(_communications(fhir_server, effect["identifier"])) == 1


def test_a_lost_answer_to_a_create_is_settled_by_searching_its_identifier(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    http: httpx.Client,
) -> None:
    origin = fhir_server.base_url.removesuffix("/fhir")
    with dropping_proxy(origin) as (proxy, _):
        adapter = _adapter(pg_engine, _context(proxy + "/fhir", encounter))
        with pytest.raises(CommitFailed):
            adapter(_create_call(run_id))
        assert "Not confirmed" in adapter.notices()[0]
        settled = reconcile_pending(pg_engine, http=http)

    assert [(s.before, s.after) for s in settled] == [("unknown", "accepted")]
    [effect] = effect_reports(pg_engine, run_id)
    [made] = _communications(fhir_server, effect["identifier"])
    assert effect["created"] == f"Communication/{made['id']}"


def test_a_create_that_never_landed_is_settled_as_failed(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, http: httpx.Client
) -> None:
    log_effect(
        pg_engine,
        run_id=run_id,
        effect_id="notify:Communication.create",
        tool=CREATE_TOOL.iri,
        target=f"{fhir_server.base_url}/Communication",
        state="unknown",
        response={
            "change": {
                "resourceType": "Communication",
                "operation": "create",
                "identifier": "urn:ietf:rfc:3986|urn:uuid:00000000-0000-5000-8000-000000000000",
            }
        },
    )

    settled = reconcile_pending(pg_engine, http=http)

    assert [s.after for s in settled] == ["failed"]
    assert "holds no Communication" in settled[0].detail


def test_a_create_without_a_write_scope_sends_nothing_and_says_nobody_was_notified(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    context = _context(fhir_server.base_url, encounter, scope="user/*.read")
    adapter = _adapter(pg_engine, context)
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused) as refused:
        adapter(_create_call(run_id))

    assert fhir_server.requests(since=mark) == []
    assert refused.value.message == (
        "no Communication was created: fhirAuthorization.scope does not grant "
        "user/Communication.write"
    )
    assert adapter.notices() == [
        "Nobody was notified through the EHR: no Communication was created "
        "(fhirAuthorization.scope does not grant user/Communication.write)."
    ]


def test_a_rendered_resource_that_is_not_valid_fhir_is_never_sent(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    broken = replace(
        CREATE_TOOL,
        commits=replace(
            CREATE_TOOL.commits,  # type: ignore[type-var]
            template=json.dumps({**TEMPLATE, "status": {"not": "a code"}}),
        ),
    )
    adapter = _adapter(pg_engine, _context(fhir_server.base_url, encounter))
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused) as refused:
        adapter(ToolCall(tool=broken, args={"reason": "x"}, timeout=2.0, run_id=run_id))

    assert fhir_server.requests(since=mark) == []
    assert "is not valid FHIR: status" in refused.value.message


def test_the_recipients_fall_back_in_the_order_the_template_names_them(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    team = {"resourceType": "CareTeam", "id": "team-ed", "status": "active"}
    resources = {"CareTeam/team-ed": team}
    with_team = _context(fhir_server.base_url, encounter, resources=resources)
    _adapter(pg_engine, with_team)(_create_call(run_id))
    no_participants = {k: v for k, v in encounter.items() if k != "participant"}
    other = claimed_run(pg_engine, NS + "Flow")
    without = _context(fhir_server.base_url, encounter, prefetch={"encounter": no_participants})
    _adapter(pg_engine, without)(_create_call(other))

    [first] = effect_reports(pg_engine, run_id)
    [second] = effect_reports(pg_engine, other)
    assert first["recipients"] == ["CareTeam/team-ed"]
    assert second["recipients"] == ["Organization/ed"]
