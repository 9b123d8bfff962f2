"""The conditional-commit adapter against the real Node FHIR server and real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
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
from adapters.fhir.reconcile import reconcile_pending, reconcile_run
from app.cds.write_notices import effect_notice
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

NS = "https://example.org/commit-test#"
PRIORITY = "http://terminology.hl7.org/CodeSystem/v3-ActPriority"
URGENT = NS + "High"
ROUTINE = NS + "Low"
TOOL = ToolDef(
    iri=NS + "setPriority",
    name="setPriority",
    args=(ToolArg(name="level", type=NS + "Level"),),
    effects=(
        EffectDecl(property=NS + "committedAt", now=True),
        EffectDecl(property=NS + "committedRef", type=XSD + "string"),
    ),
    binding="fhir:commit",
    timeout=2.0,
    commits=AdapterCommit(
        resource_type="Encounter",
        element="priority",
        value_arg="level",
        code_system=PRIORITY,
        scope="user/Encounter.write",
    ),
)
ONTOLOGY = Ontology(
    namespace=NS,
    version="1",
    digest="test",
    classes={},
    individuals={
        URGENT: Individual(
            iri=URGENT, name="High", class_iri=NS + "Level", codes=(f"{PRIORITY}|UR",)
        ),
        ROUTINE: Individual(
            iri=ROUTINE, name="Low", class_iri=NS + "Level", codes=(f"{PRIORITY}|R",)
        ),
        NS + "Uncoded": Individual(iri=NS + "Uncoded", name="Uncoded", class_iri=NS + "Level"),
    },
    properties={},
    rules=(),
    tools={TOOL.iri: TOOL},
    workflows={},
    services={},
)
GRANTED = "openid user/Patient.read user/Encounter.read user/Encounter.write"


@pytest.fixture
def run_id(pg_engine: Engine) -> str:
    return claimed_run(pg_engine, NS + "Flow")


@pytest.fixture
def encounter(fhir_server: FhirServer) -> dict[str, Any]:
    return fhir_server.create(
        {
            "resourceType": "Encounter",
            "id": fhir_server.new_id(),
            "status": "in-progress",
            "class": {"code": "EMER"},
        }
    )


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


def _adapter(
    engine: Engine,
    base_url: str,
    encounter: dict[str, Any],
    *,
    scope: str | None = GRANTED,
    version: str | None = None,
    with_body: bool = False,
) -> FhirCommitAdapter:
    source = SourceRef(
        resource_type="Encounter",
        id=encounter["id"],
        version_id=version or encounter["meta"]["versionId"],
    )
    context = CommitContext(
        fhir_server=base_url,
        access_token="token-123",
        scope=scope,
        sources=(source,),
        resources={f"Encounter/{encounter['id']}": encounter} if with_body else {},
    )
    return FhirCommitAdapter(ontology=ONTOLOGY, engine=engine, context=context)


def _call(run_id: str, level: str = "High") -> ToolCall:
    return ToolCall(tool=TOOL, args={"level": level, "patient": "p1"}, timeout=2.0, run_id=run_id)


def _priority(resource: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["system"], c["code"]) for c in resource.get("priority", {}).get("coding", [])]


@pytest.mark.parametrize("with_body", [False, True], ids=["read-then-write", "hydrated-body"])
def test_commit_writes_the_hydrated_version_and_records_acceptance(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    with_body: bool,
) -> None:
    adapter = _adapter(pg_engine, fhir_server.base_url, encounter, with_body=with_body)
    mark = fhir_server.mark()

    result = adapter(_call(run_id))

    history = fhir_server.history("Encounter", encounter["id"])
    assert len(history) == 2
    new_version = history[-1]["meta"]["versionId"]
    assert _priority(history[-1]) == [(PRIORITY, "UR")]
    assert history[-1]["class"] == {"code": "EMER"}
    assert result == {"committedRef": f"Encounter/{encounter['id']}/_history/{new_version}"}
    puts = [r for r in fhir_server.requests(since=mark) if r["method"] == "PUT"]
    assert [(p["ifMatch"], p["authorization"]) for p in puts] == [
        (f'W/"{encounter["meta"]["versionId"]}"', "present")
    ]
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "accepted"
    assert effect["expectedVersion"] == encounter["meta"]["versionId"]
    assert effect["newVersion"] == new_version
    assert effect["status"] == 200
    assert effect["attempts"] == 1
    assert adapter.effects() == [effect]
    # a write the EHR accepted needs no sentence on the card
    assert adapter.notices() == []
    assert effect_notice(effect) == (
        f"Recorded in the EHR: priority of Encounter/{encounter['id']} was updated"
        f" (version {new_version})."
    )


def test_a_record_changed_since_it_was_read_is_a_conflict_and_is_not_overwritten(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, fhir_server.base_url, encounter)
    meanwhile = fhir_server.update(
        {**encounter, "priority": {"coding": [{"system": PRIORITY, "code": "EL"}]}},
        if_match=encounter["meta"]["versionId"],
    )
    assert meanwhile.status_code == 200

    with pytest.raises(CommitFailed) as failure:
        adapter(_call(run_id))

    assert failure.value.conflicted
    assert failure.value.retryable is False
    current = fhir_server.read("Encounter", encounter["id"])
    assert _priority(current) == [(PRIORITY, "EL")]
    assert len(fhir_server.history("Encounter", encounter["id"])) == 2
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "conflicted"
    assert effect["status"] == 412
    assert failure.value.to_json()["effects"][0]["state"] == "conflicted"  # type: ignore[index]
    [notice] = adapter.notices()
    assert f"Encounter/{encounter['id']} changed since the decision was computed" in notice
    # the card's notices come from what the adapter committed: the same as reading them back
    assert adapter.effects() == effect_reports(pg_engine, run_id)


def test_missing_write_scope_sends_nothing_and_records_a_refusal(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(
        pg_engine, fhir_server.base_url, encounter, scope="user/Encounter.read user/Patient.*"
    )
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused) as refusal:
        adapter(_call(run_id))

    assert fhir_server.requests(since=mark) == []
    # Not a failure: nothing was sent, so the step goes on without escalating.
    assert not isinstance(refusal.value, CommitFailed)
    assert refusal.value.effect == "refused"
    assert refusal.value.message == (
        "Encounter.priority was not written: fhirAuthorization.scope does not grant "
        "user/Encounter.write"
    )
    assert [e.state for e in refusal.value.effects] == ["refused"]
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "refused"
    assert effect["attempts"] == 0
    assert "user/Encounter.write" in effect["detail"]
    [notice] = adapter.notices()
    assert adapter.effects() == effect_reports(pg_engine, run_id)
    assert notice == (
        f"The decision was not written to the EHR. Encounter.priority (Encounter/{encounter['id']})"
        " was not written: fhirAuthorization.scope does not grant user/Encounter.write."
    )
    assert adapter.effects() == effect_reports(pg_engine, run_id)
    assert adapter.notices() == [notice]


def test_a_target_the_run_never_read_is_refused_without_a_call(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str
) -> None:
    context = CommitContext(fhir_server=fhir_server.base_url, scope=GRANTED, sources=())
    adapter = FhirCommitAdapter(ontology=ONTOLOGY, engine=pg_engine, context=context)
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused):
        adapter(_call(run_id))

    assert fhir_server.requests(since=mark) == []
    assert effect_reports(pg_engine, run_id)[0]["state"] == "refused"


def test_a_value_without_a_code_in_the_declared_system_is_refused(
    fhir_server: FhirServer, pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, fhir_server.base_url, encounter)
    mark = fhir_server.mark()

    with pytest.raises(CommitRefused):
        adapter(_call(run_id, level=NS + "Uncoded"))

    assert fhir_server.requests(since=mark) == []
    assert effect_reports(pg_engine, run_id)[0]["state"] == "refused"


def test_an_unreachable_server_fails_the_effect(
    pg_engine: Engine, run_id: str, encounter: dict[str, Any]
) -> None:
    adapter = _adapter(pg_engine, "http://127.0.0.1:9/fhir", encounter, with_body=True)

    with pytest.raises(CommitFailed):
        adapter(_call(run_id))

    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "failed"
    assert effect["attempts"] == 1
    assert adapter.effects() == [effect]


def test_a_lost_answer_leaves_the_effect_unknown_until_reconciled(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    http: httpx.Client,
) -> None:
    origin = fhir_server.base_url.removesuffix("/fhir")
    with dropping_proxy(origin) as (proxy, forwarded):
        adapter = _adapter(pg_engine, proxy + "/fhir", encounter)
        with pytest.raises(CommitFailed):
            adapter(_call(run_id))
        assert forwarded == [f"/fhir/Encounter/{encounter['id']}"]
        assert effect_reports(pg_engine, run_id)[0]["state"] == "unknown"
        assert adapter.effects() == effect_reports(pg_engine, run_id)

        settled = reconcile_pending(pg_engine, http=http)

    assert [(s.before, s.after) for s in settled] == [("unknown", "accepted")]
    [effect] = effect_reports(pg_engine, run_id)
    current = fhir_server.read("Encounter", encounter["id"])
    assert effect["state"] == "accepted"
    assert effect["newVersion"] == current["meta"]["versionId"]
    assert _priority(current) == [(PRIORITY, "UR")]


def test_reconcile_fails_an_unknown_effect_whose_write_never_landed(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    http: httpx.Client,
) -> None:
    url = f"{fhir_server.base_url}/Encounter/{encounter['id']}"
    log_effect(
        pg_engine,
        run_id=run_id,
        effect_id="e1",
        tool=TOOL.iri,
        target=url,
        expected=encounter["meta"]["versionId"],
        state="unknown",
        response={
            "change": {
                "element": "priority",
                "value": {"coding": [{"system": PRIORITY, "code": "UR"}]},
            }
        },
    )

    settled = reconcile_pending(pg_engine, http=http)

    assert [(s.effect_id, s.after) for s in settled] == [("e1", "failed")]
    assert effect_reports(pg_engine, run_id)[0]["state"] == "failed"


def test_an_unreachable_server_leaves_unknown_effects_unknown(
    pg_engine: Engine, run_id: str, http: httpx.Client
) -> None:
    log_effect(
        pg_engine,
        run_id=run_id,
        effect_id="e1",
        tool=TOOL.iri,
        target="http://127.0.0.1:9/fhir/Encounter/x",
        expected="v1",
        state="unknown",
        response={"change": {"element": "priority", "value": "x"}},
    )

    settled = reconcile_pending(pg_engine, http=http)

    assert [(s.before, s.after) for s in settled] == [("unknown", "unknown")]
    assert effect_reports(pg_engine, run_id)[0]["state"] == "unknown"


def test_accepted_feedback_settles_a_refused_effect_the_ehr_then_applied(
    fhir_server: FhirServer,
    pg_engine: Engine,
    run_id: str,
    encounter: dict[str, Any],
    http: httpx.Client,
) -> None:
    adapter = _adapter(pg_engine, fhir_server.base_url, encounter, scope="user/Encounter.read")
    with pytest.raises(CommitRefused):
        adapter(_call(run_id))
    applied = fhir_server.update(
        {
            **encounter,
            "priority": {"coding": [{"system": PRIORITY, "code": "UR", "display": "urgent"}]},
        },
        if_match=encounter["meta"]["versionId"],
    )
    assert applied.status_code == 200

    settled = reconcile_run(pg_engine, run_id, http=http)

    assert [(s.before, s.after) for s in settled] == [("refused", "accepted")]
    assert effect_reports(pg_engine, run_id)[0]["state"] == "accepted"
