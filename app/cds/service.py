"""One hook call, end to end: validate, gather, hydrate, claim, run, persist, answer.

Order and why:

1. The service id (404), the client JWT (401), the request (400) and the hook it is for.
2. Prefetch and hydration. They happen before the claim so a transient FHIR failure (412) leaves
   no trace that would block the EHR's retry of the same hookInstance.
3. The claim of (service, hookInstance) in its own committed transaction: the one caller that
   creates the run executes it; a retry, or a concurrent twin, waits for the winner's stored
   response and returns it verbatim. The same hookInstance with a different body is 409.
4. The workflow runs (in a worker thread: tools may block) with tool commits routed to the FHIR
   adapter for this call.
5. Outcome, trace, proof, source versions and the response are committed in one transaction
   before anything is answered; if that fails the answer is 503 and carries no decision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
from anyio import to_thread
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from adapters.fhir.hydrate import Hydration, hydrate, resources_of
from app.bridge import Bridge
from app.cds.auth import ClientAuthenticator
from app.cds.cards import RunView, build_cards, build_system_actions
from app.cds.errors import (
    CdsError,
    HookInstanceConflict,
    Issue,
    RequestInvalid,
    RunFailed,
    ServiceNotFound,
    StoreUnavailable,
)
from app.cds.fhir_data import resource_issues
from app.cds.prefetch import gather
from app.cds.requests import HookRequest, parse_hook_request
from app.cds.response_check import check_response
from app.digest import canonical_digest
from app.ontology.model import CdsServiceDef, Ontology, WorkflowDef
from app.store import repo, session_scope
from app.store.db import describe_error
from app.tools.host import ToolHost
from app.world.facts import Change, Violation
from app.world.world import World

log = logging.getLogger("horismos.cds")

EXTENSION_KEY = "dev.horismos.run"
#: How long a duplicate call waits for the first caller's stored answer, beyond the FHIR deadline.
DUPLICATE_GRACE_SECONDS = 30.0
_POLL_SECONDS = 0.02
_PERSIST_ATTEMPTS = 3

#: Builds the ``fhir`` scheme handler for tool commits of one call, or None when not possible.
CommitHandlerFactory = Callable[..., Any]


@dataclass(kw_only=True)
class HookDeps:
    """What a hook call needs from the running service."""

    ontology: Ontology
    engine: Engine
    http: httpx.AsyncClient
    authenticator: ClientAuthenticator
    bridge: Bridge | None
    fhir_timeout: float
    #: URL prefixes ``fhirServer`` must lie under (empty: any server, open mode)
    allowed_fhir_servers: tuple[str, ...] = ()
    #: the most one prefetch key's FHIR answer (all its pages) may take in, in bytes
    max_fhir_response_bytes: int = 20_000_000
    #: picks the Bridge for a step's ``horis:model`` (``app.bridge.BridgeResolver``); None:
    #: ``bridge`` serves every step
    bridge_for: Callable[[str | None], Bridge | None] | None = None
    #: The handler it builds may offer ``notices() -> [sentence]``: what happened to each write
    #: the run attempted, from what the handler committed to the effect log during the run
    commit_handler: CommitHandlerFactory | None = None
    #: the process's tools (packaged callables, MCP sessions); None: in-process bindings only
    tools: ToolHost | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


def _notices(handler: Any) -> list[str]:
    """The card sentences about the run's writes, as the commit handler recorded them."""
    notices = getattr(handler, "notices", None)
    return list(notices()) if callable(notices) else []


def find_service(ontology: Ontology, service_id: str) -> tuple[CdsServiceDef, WorkflowDef]:
    try:
        service = ontology.service(service_id)
    except KeyError:
        raise ServiceNotFound.one(
            "not-found", f"no CDS service {service_id!r} is declared", "id"
        ) from None
    return service, ontology.workflow(service.workflow)


def request_digest(body: Mapping[str, Any]) -> str:
    return canonical_digest(body)


def _check_context_resources(ontology: Ontology, workflow: WorkflowDef, req: HookRequest) -> None:
    """FHIR resources the service reads from the hook context must be valid R4."""
    if workflow.focus is None:
        return
    wanted: dict[str, set[str]] = {}
    for prop in ontology.properties_of(workflow.focus):
        for m in prop.from_fhir:
            if m.context_key is not None:
                wanted.setdefault(m.context_key, set()).add(m.resource_type)
    issues: list[Issue] = []
    for key, types in wanted.items():
        value = req.context.get(key)
        entries = value.get("entry") if isinstance(value, dict) else None
        for i, entry in enumerate(entries or []):
            res = entry.get("resource") if isinstance(entry, dict) else None
            if isinstance(res, dict) and res.get("resourceType") in types:
                issues.extend(resource_issues(res, f"context.{key}.entry[{i}].resource"))
    if issues:
        raise RequestInvalid(issues=issues)


def _apply(world: World, changes: list[Change], problems: list[Violation]) -> None:
    """One ``api`` transaction; facts the gate refuses are dropped one by one and recorded."""
    pending = list(changes)
    for _attempt in range(len(pending) + 1):
        result = world.transact(pending, provenance="api")
        if result.ok:
            return
        problems.extend(result.violations)
        bad = {(v.subject, v.property) for v in result.violations}
        # AddInstance has no subject/property: it is only dropped when its instance is refused
        kept = [
            c
            for c in pending
            if (getattr(c, "subject", None), getattr(c, "property", None)) not in bad
        ]
        if len(kept) == len(pending):  # an instance itself was refused: keep nothing of it
            bad_ids = {v.subject for v in result.violations}
            kept = [c for c in pending if getattr(c, "id", None) not in bad_ids]
            kept = [c for c in kept if getattr(c, "subject", None) not in bad_ids]
        if len(kept) == len(pending):
            return
        pending = kept


_FAILURE_EDGES = ("fallback", "onUnreachable", "onError", "onUnsatisfied", "onTimeout")


def _failed_actions(trace: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for entry in trace:
        for call in entry.get("calls") or []:
            error = call.get("error") if isinstance(call, dict) else None
            if not isinstance(error, dict) or call.get("type") != "tool" or "effects" in error:
                continue
            if call.get("status") == "proposed":
                # an adapter-mediated write with nowhere to go: say so in the reader's terms
                out.append(f"{call.get('tool')}: the request names no FHIR server to write to")
            else:
                out.append(f"{call.get('tool')}: {error.get('message', 'failed')}")
    return out


def _detours(trace: list[dict[str, Any]], terminal: str | None) -> list[str]:
    """One sentence per step that took a failure edge: why the run ended where it did."""
    out: list[str] = []
    for entry in trace:
        edge = entry.get("edge")
        if edge not in _FAILURE_EDGES:
            continue
        why = entry.get("reason") or entry.get("error") or "it could not complete"
        out.append(
            f"{entry.get('step')} took its {edge} edge ({why}); the run ended at {terminal}."
        )
    return out


def _narration(trace: list[dict[str, Any]]) -> str | None:
    for entry in reversed(trace):
        if entry.get("kind") != "NarrationStep":
            continue
        for key in ("narration", "text", "output"):
            value = entry.get(key)
            if isinstance(value, dict):
                value = value.get("text") or value.get("narration") or value.get("output")
            if isinstance(value, str) and value.strip():
                return value
    return None


def _context_resources(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """FHIR resources the hook context carries (e.g. ``draftOrders``)."""
    return [r for v in context.values() for r in resources_of(v)]


def _by_reference(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``Type/id`` → the resource as read; the first one read wins."""
    out: dict[str, dict[str, Any]] = {}
    for r in resources:
        if isinstance(r.get("resourceType"), str) and isinstance(r.get("id"), str):
            out.setdefault(f"{r['resourceType']}/{r['id']}", r)
    return out


class HookService:
    """Serves ``POST /cds-services/{id}``."""

    def __init__(self, deps: HookDeps) -> None:
        self.deps = deps

    async def call(
        self,
        service_id: str,
        body: Any,
        *,
        authorization: str | None,
        audience: str,
        base_url: str,
    ) -> dict[str, Any]:
        d = self.deps
        service, workflow = find_service(d.ontology, service_id)
        await d.authenticator.verify(authorization, audience)
        req = parse_hook_request(body, allowed_fhir_servers=d.allowed_fhir_servers)
        if req.hook != service.hook:
            raise RequestInvalid.one(
                "not-supported",
                f"service {service.id!r} answers hook {service.hook!r}, not {req.hook!r}",
                "hook",
            )
        if workflow.focus is None:
            raise RequestInvalid.one("not-supported", f"{workflow.name} declares no focus")
        _check_context_resources(d.ontology, workflow, req)
        gathered = await gather(
            service.prefetch,
            req,
            d.http,
            deadline=d.fhir_timeout,
            max_bytes=d.max_fhir_response_bytes,
        )
        now = d.clock()
        hydration = hydrate(
            d.ontology,
            focus_id=str(req.context.get("patientId")),
            focus_class=workflow.focus,
            data=gathered.data,
            context=req.context,
            now=now,
            texts=service.text,
        )
        # one call however the client spells its hookInstance (upper or lower case)
        digest = request_digest({**body, "hookInstance": req.hook_instance})
        run_id, created, stored = await self._claim(service, workflow, req, digest)
        if not created:
            return stored if stored is not None else await self._await_answer(run_id, req)
        try:
            return await to_thread.run_sync(
                lambda: self._run(
                    service, workflow, req, hydration, gathered.data, run_id, now, base_url
                )
            )
        except Exception as exc:  # the run is claimed: it must not stay "running"
            if not isinstance(exc, StoreUnavailable):  # that one was marked failed already
                log.exception("run %s of %s failed after its claim", run_id, workflow.name)
                await to_thread.run_sync(lambda: self._mark_failed(run_id))
            if isinstance(exc, CdsError):
                raise
            raise RunFailed.one(
                "exception",
                f"run {run_id} failed and is recorded as failed; send a new hookInstance",
            ) from None

    # --- idempotency ---------------------------------------------------------------------

    async def _claim(
        self, service: CdsServiceDef, workflow: WorkflowDef, req: HookRequest, digest: str
    ) -> tuple[str, bool, dict[str, Any] | None]:
        def claim() -> tuple[str, bool, dict[str, Any] | None, str | None, str]:
            with session_scope(self.deps.engine) as session:
                run, created = repo.claim_run(
                    session,
                    workflow_iri=workflow.iri,
                    workflow_version=workflow.version,
                    ontology_digest=self.deps.ontology.digest,
                    service_id=service.id,
                    hook=req.hook,
                    hook_instance=req.hook_instance,
                    request_digest=digest,
                )
                return run.id, created, run.response, run.request_digest, run.status

        try:
            run_id, created, response, seen_digest, status = await to_thread.run_sync(claim)
        except SQLAlchemyError as exc:
            log.error("cannot claim hookInstance %s: %s", req.hook_instance, describe_error(exc))
            raise StoreUnavailable.one(
                "transient", "the decision store is unavailable; retry later"
            ) from None
        if not created and seen_digest != digest:
            raise HookInstanceConflict.one(
                "conflict",
                f"hookInstance {req.hook_instance} was already used with a different request",
                "hookInstance",
            )
        if not created and response is None and status == "failed":
            raise HookInstanceConflict.one(
                "conflict",
                f"hookInstance {req.hook_instance} failed earlier; send a new hookInstance",
                "hookInstance",
            )
        return run_id, created, response

    async def _await_answer(self, run_id: str, req: HookRequest) -> dict[str, Any]:
        """A twin of a call still running: wait for its stored response."""

        def look() -> tuple[dict[str, Any] | None, str]:
            with session_scope(self.deps.engine) as session:
                run = repo.get_run(session, run_id)
                return (run.response, run.status) if run is not None else (None, "failed")

        with anyio.move_on_after(self.deps.fhir_timeout + DUPLICATE_GRACE_SECONDS):
            while True:
                try:
                    response, status = await to_thread.run_sync(look)
                except SQLAlchemyError:
                    raise StoreUnavailable.one(
                        "transient", "the decision store is unavailable"
                    ) from None
                if response is not None:
                    return response
                if status == "failed":
                    break
                await anyio.sleep(_POLL_SECONDS)
        raise HookInstanceConflict.one(
            "conflict",
            f"hookInstance {req.hook_instance} is being answered by another request",
            "hookInstance",
        )

    # --- the run --------------------------------------------------------------------------

    def _run(
        self,
        service: CdsServiceDef,
        workflow: WorkflowDef,
        req: HookRequest,
        hydration: Hydration,
        data: Mapping[str, Any],
        run_id: str,
        now: datetime,
        base_url: str,
    ) -> dict[str, Any]:
        from app.runtime import RunContext, run_workflow
        from app.runtime.host import outcome_document
        from app.runtime.replay import RecordedRun
        from app.tools.invoker import ToolInvoker

        d = self.deps
        focus_id = str(req.context["patientId"])
        world = World(d.ontology, now=now)
        problems: list[Violation] = list(hydration.violations)
        _apply(world, hydration.changes, problems)
        input_world = world.to_json()
        tools = d.tools.invoker() if d.tools is not None else ToolInvoker()
        resources = [r for v in data.values() for r in resources_of(v)]
        handler: Any = None
        if d.commit_handler is not None and req.fhir_server is not None:
            handler = d.commit_handler(
                fhir_server=req.fhir_server,
                fhir_authorization=req.authorization.model_dump() if req.authorization else None,
                sources=[s.to_row() for s in hydration.sources],
                resources=resources,
                context=req.context,
            )
            if handler is not None:
                tools.register_scheme("fhir", handler)
        try:
            outcome = run_workflow(
                d.ontology,
                workflow.iri,
                world,
                RunContext(
                    now=now,
                    bridge=d.bridge,
                    bridge_for=d.bridge_for,
                    tools=tools,
                    text=hydration.text,
                    run_id=run_id,
                ),
            )
        except Exception:
            log.exception("run %s of %s crashed", run_id, workflow.name)
            self._mark_failed(run_id)
            raise
        decided = outcome.decision is not None
        view = RunView(
            run_id=run_id,
            terminal=outcome.terminal,
            decided=decided,
            narration=_narration(outcome.trace),
            focus_id=focus_id,
            violations=problems,
            failed_actions=_failed_actions(outcome.trace),
            detours=_detours(outcome.trace, outcome.terminal),
            notices=_notices(handler),
            resources=_by_reference([*resources, *_context_resources(req.context)]),
        )
        cards = build_cards(
            ontology=d.ontology,
            service=service,
            workflow=workflow,
            world=world,
            run=view,
            run_url=d.authenticator.run_url(base_url, run_id),
        )
        ext: dict[str, Any] = {
            "runId": run_id,
            "workflow": outcome.workflow,
            "version": outcome.version,
            "terminal": outcome.terminal,
        }
        if outcome.decision is not None:
            ext["decision"] = outcome.decision
        response: dict[str, Any] = {"cards": cards}
        actions = build_system_actions(service=service, workflow=workflow, world=world, run=view)
        if actions:
            response["systemActions"] = actions
        response["extension"] = {EXTENSION_KEY: ext}
        problems_in_response = check_response(response)
        if problems_in_response:
            raise RunFailed.one(
                "exception",
                f"run {run_id} built a response that breaks CDS Hooks 2.0 and was not answered: "
                + "; ".join(str(p) for p in problems_in_response),
            )
        recorded = RecordedRun.of(outcome, input_world=input_world, text=hydration.text, now=now)
        record = outcome_document(recorded)  # replayable: DESIGN §9 plus the recorded input
        record["inputViolations"] = [v.to_json() for v in problems]
        rows = [s.to_row() for s in hydration.sources]
        try:
            self._persist(service.id, run_id, outcome, record, response, rows)
        except SQLAlchemyError as exc:
            log.error(
                "run %s could not be persisted, its decision is withheld: %s",
                run_id,
                describe_error(exc),
            )
            self._mark_failed(run_id)
            raise StoreUnavailable.one(
                "transient",
                "the decision could not be recorded, so it is not returned; retry later",
            ) from None
        return response

    def _persist(
        self,
        service_id: str,
        run_id: str,
        outcome: Any,
        record: dict[str, Any],
        response: dict[str, Any],
        sources: list[dict[str, Any]],
    ) -> None:
        """One transaction for everything the run produced. A SQLite snapshot made stale by a
        concurrent writer (another call's claim) is retried; PostgreSQL never needs it. A
        suspended run keeps its whole SuspendedRun and deadline so ``/runs/{id}/resume`` works."""
        from app.api.resume import wait_deadline

        suspended = outcome.suspended
        for attempt in range(_PERSIST_ATTEMPTS):
            try:
                with session_scope(self.deps.engine) as session:
                    repo.save_outcome(
                        session,
                        run_id,
                        status=outcome.status,
                        terminal=outcome.terminal,
                        decision=outcome.decision,
                        outcome=record,
                        response=response,
                        trace=outcome.trace,
                        sources=sources,
                        world_state=suspended.to_json() if suspended else None,
                        position=suspended.step if suspended else None,
                        wait_deadline=(
                            wait_deadline(self.deps.ontology, suspended) if suspended else None
                        ),
                        first_seq=0,  # this call claimed the run: nothing else writes its trace
                    )
                    repo.record_cards(
                        session,
                        run_id=run_id,
                        service_id=service_id,
                        card_uuids=[str(c["uuid"]) for c in response.get("cards", [])],
                    )
                return
            except OperationalError as exc:
                if "locked" not in str(exc) or attempt == _PERSIST_ATTEMPTS - 1:
                    raise

    def _mark_failed(self, run_id: str) -> None:
        try:
            with session_scope(self.deps.engine) as session:
                repo.save_outcome(
                    session, run_id, status="failed", terminal=None, decision=None, outcome=None
                )
        except SQLAlchemyError as exc:
            log.error("run %s could not even be marked failed: %s", run_id, describe_error(exc))
