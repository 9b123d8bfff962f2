"""One hook call, end to end: validate, gather, hydrate, run, persist, answer.

Order and why:

1. The service id (404), the client JWT (401), the request (400) and the hook it is for.
2. Prefetch and hydration. They happen before anything is stored so a transient FHIR failure
   (412) leaves no trace that would block the EHR's retry of the same hookInstance.
3. The workflow runs (in one worker thread: tools may block) with tool commits routed to the
   FHIR adapter for this call. The run's row is claimed (committed as ``running``) only when
   the run is about to send something outside (:mod:`app.cds.claim`); a twin that finds the
   claim sends nothing and waits for the winner's stored response.
4. Outcome, trace, proof, source versions, the effect log of writes that sent nothing and the
   response are committed in one transaction before anything is answered; if that fails the
   answer is 503 and carries no decision. The unique ``(service, hookInstance)`` key makes that
   transaction the claim of a run that sent nothing: of two twins, the one that commits second
   stores nothing and answers with the first one's stored response, verbatim. The same
   hookInstance with a different body is 409.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import Any

import anyio
import httpx
from anyio import to_thread
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from app.cds.ahead import EXTENSION_KEY, input_key, order_sign_services, reuse, sign_request
from app.cds.ahead import NOT_REUSED as AHEAD_UNDECIDED
from app.cds.assemble import Assembled, CallInput, assemble_input
from app.cds.auth import ClientAuthenticator
from app.cds.cards import RunView, build_system_actions, declared_cards, unread_order_cards
from app.cds.claim import (
    ClaimFirstTools,
    ClaimLost,
    RunClaim,
    claim_first_bridge,
    take_over_claim,
)
from app.cds.errors import (
    CdsError,
    DeploymentRefused,
    HookDeadlinePassed,
    HookInstanceConflict,
    Issue,
    RequestInvalid,
    RunFailed,
    ServiceNotFound,
    StoreUnavailable,
)
from app.cds.hook_input import HookInput
from app.cds.issued import card_issues, proof_rules
from app.cds.leases import LeaseKeeper, abandoned
from app.cds.leniency import read_draft_orders
from app.cds.prefetch import Gathered, gather
from app.cds.requests import HookRequest, as_service_hook, parse_hook_request
from app.cds.response_check import check_response
from app.cds.run_story import by_reference, context_resources, detours, failed_actions, narration
from app.cds.unsent import unsent_notices, unsent_record
from app.deployments import Deployment, Deployments
from app.deployments.catalog import Catalog, VersionMoved
from app.digest import canonical_digest
from app.fhir_json import resources_of
from app.fhir_reads import FhirReaders
from app.ontology.model import CdsServiceDef, Ontology, WorkflowDef
from app.ports import CommitHandler, CommitHandlers
from app.runtime.runner import Runner, RunRecord
from app.store import changes as change_store
from app.store import repo
from app.store.db import describe_error
from app.store.models import new_id
from app.store.repo import CardIssue
from app.terminology import Terminology
from app.terminology.choice import TerminologyChoice

log = logging.getLogger("horismos.cds")

#: How long a duplicate call waits for the first caller's stored answer, beyond the FHIR deadline.
DUPLICATE_GRACE_SECONDS = 30.0
_POLL_SECONDS = 0.02


@dataclass(kw_only=True)
class HookDeps:
    """What a hook call needs from the running service."""

    #: the deployments at their active versions, each serving its own services (or refused)
    catalog: Catalog
    engine: Engine
    http: httpx.AsyncClient
    #: builds the reader of one call's FHIR server (``app.fhir_reads.FhirReaders``)
    fhir_readers: FhirReaders
    authenticator: ClientAuthenticator
    #: builds the run's context (clock, timer, Bridges, tools) and its record
    runner: Runner
    fhir_timeout: float
    #: URL prefixes ``fhirServer`` must lie under (empty: any server, open mode)
    allowed_fhir_servers: tuple[str, ...] = ()
    #: the most one prefetch key's FHIR answer (all its pages) may take in, in bytes, and the
    #: most pages it follows; a search reaching either is truncated
    max_fhir_response_bytes: int = 20_000_000
    max_fhir_pages: int = 10
    #: builds the ``fhir`` scheme handler of one call's writes (``app.ports.CommitHandlers``):
    #: it claims the run through ``ensure_run`` before a request leaves, says in ``notices()``
    #: what became of each write and stores the writes that sent nothing in the run's own
    #: transaction (``write_pending``); None: writes are not sent, and the cards say so
    commit_handlers: CommitHandlers | None = None
    #: runs an approved change beside the active version after the answer is stored, called
    #: with ``change_id``, ``deployment``, ``recorded`` and ``stored`` (never on the answer's
    #: path: it queues the work); None: no shadow mode
    shadow: Callable[..., None] | None = None
    #: keeps the leases of claimed runs; None: claims carry no lease and are never taken over
    leases: LeaseKeeper | None = None
    #: the longest one hook call may take, in seconds; None: no end-to-end deadline
    deadline: float | None = None
    #: the time zone cards show dates in
    zone: tzinfo = UTC
    #: resolves code-system aliases in what the EHR sends (None: the installed terminology)
    terminology: Terminology | None = None
    #: the terminology port a deployment's runs ask (None: codes are read from the lists alone)
    terminologies: TerminologyChoice | None = None
    #: how long an order-sign answer computed ahead at order-select may answer the order-sign
    #: call (``app.cds.ahead``), in seconds; 0: nothing is computed ahead
    answer_ahead_seconds: float = 0.0


#: How many times a call runs again when the deployment's active version moves under it.
_VERSION_ATTEMPTS = 3


def catalog_shadow(connection: Connection, dep: Deployment) -> str | None:
    """The change in shadow mode beside ``dep``'s deployment (a claimed run, committed to its
    version, only needs to know this)."""
    return change_store.deployment_generation(connection, dep.iri)[1]


def served_deployment(deployments: Deployments, service_id: str) -> Deployment:
    """The deployment serving ``service_id``: 404 when no deployment declares it, 503 with the
    verification report when its deployment is not served."""
    dep = deployments.for_service(service_id)
    if dep is None:
        raise ServiceNotFound.one("not-found", f"no CDS service {service_id!r} is declared", "id")
    if not dep.serving:
        issues = [
            Issue(
                code="not-supported",
                diagnostics=f"deployment {dep.id} {dep.version} does not verify and is not "
                f"served: {p}",
            )
            for p in dep.problems
        ]
        raise DeploymentRefused(
            issues=issues
            or [Issue(code="not-supported", diagnostics=f"deployment {dep.id} is not served")]
        )
    return dep


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


def _check_context_resources(
    ontology: Ontology, workflow: WorkflowDef, req: HookRequest
) -> HookRequest:
    """``req`` with the draft orders the service reads from the hook context repaired where they
    can mean one thing and left out, as ``unread``, where they are not valid R4 (the answer says
    each was not checked; the others are)."""
    if workflow.focus is None:
        return req
    wanted: dict[str, set[str]] = {}
    for prop in ontology.properties_of(workflow.focus):
        for m in prop.from_fhir:
            if m.context_key is not None:
                wanted.setdefault(m.context_key, set()).add(m.resource_type)
    context, notes, unread = read_draft_orders(req.context, wanted)
    if not notes and not unread:
        return req
    return replace(
        req,
        context=context,
        notes=(*req.notes, *notes, *(u.to_note() for u in unread)),
        unread=(*req.unread, *unread),
    )


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
        """The hook call's answer, within ``deps.deadline`` (else :class:`HookDeadlinePassed`:
        the run carries on in its thread and stores its answer for a retry)."""
        deadline = self.deps.deadline
        if deadline is None:
            return await self._on_active(service_id, body, authorization, audience, base_url)
        with anyio.move_on_after(deadline) as scope:
            return await self._on_active(service_id, body, authorization, audience, base_url)
        assert scope.cancelled_caught
        log.warning("a call to %s passed its %g s deadline", service_id, deadline)
        raise HookDeadlinePassed.one(
            "timeout",
            f"no decision within the service's {deadline:g} s deadline; if the run started it "
            "carries on and is recorded: send the same hookInstance again to get its answer",
        )

    async def _on_active(
        self,
        service_id: str,
        body: Any,
        authorization: str | None,
        audience: str,
        base_url: str,
    ) -> dict[str, Any]:
        """The call on the active version of its deployment: when an activation or rollback
        committed while it ran, nothing of the run was stored or sent, and it runs again on the
        version now active."""
        for _attempt in range(_VERSION_ATTEMPTS):
            try:
                return await self._call(service_id, body, authorization, audience, base_url)
            except VersionMoved as exc:
                log.info("%s; the call to %s runs again on the new version", exc, service_id)
                await to_thread.run_sync(self.deps.catalog.refresh, self.deps.engine)
        raise StoreUnavailable.one(
            "transient", f"the deployment of {service_id} keeps changing; retry later"
        )

    async def _call(
        self,
        service_id: str,
        body: Any,
        authorization: str | None,
        audience: str,
        base_url: str,
        *,
        ahead: bool = False,
    ) -> dict[str, Any]:
        """The call's answer; with ``ahead``, the service's run computed ahead of an order-sign
        call (``app.cds.ahead``: sent by this service, not a client), its answer stored only."""
        d = self.deps
        started = time.monotonic()
        dep = served_deployment(d.catalog.current(), service_id)
        ontology = dep.ontology
        assert ontology is not None
        service, workflow = find_service(ontology, service_id)
        if not ahead:
            await d.authenticator.verify(authorization, audience)
        req = parse_hook_request(body, allowed_fhir_servers=d.allowed_fhir_servers)
        req = as_service_hook(req, service.hook)
        if workflow.focus is None:
            raise RequestInvalid.one("not-supported", f"{workflow.name} declares no focus")
        req = _check_context_resources(ontology, workflow, req)
        fhir_deadline = d.fhir_timeout
        if d.deadline is not None:  # FHIR reads get what is left of the call's own deadline
            fhir_deadline = max(0.0, min(fhir_deadline, d.deadline - (time.monotonic() - started)))
        gathered = await gather(
            service.prefetch,
            req,
            d.http,
            readers=d.fhir_readers,
            deadline=fhir_deadline,
            max_bytes=d.max_fhir_response_bytes,
            max_pages=d.max_fhir_pages,
        )
        now = d.runner.clock()
        port = d.terminologies.for_ontology(ontology) if d.terminologies is not None else None
        port_until = None
        if d.deadline is not None:  # terminology calls leave the run time to answer
            port_until = started + d.deadline - min(1.0, d.deadline / 4)

        # one call however the client spells its hookInstance (upper or lower case)
        digest = request_digest({**body, "hookInstance": req.hook_instance})
        patient = req.context.get("patientId")
        send_before = None if d.deadline is None else started + d.deadline
        row: dict[str, Any] = {
            "id": new_id(),
            "service_id": service.id,
            "hook": req.hook,
            "hook_instance": req.hook_instance,
            "patient": patient if isinstance(patient, str) else None,
            "workflow_iri": workflow.iri,
            "workflow_version": workflow.version,
            "ontology_digest": dep.digest,
            "deployment": dep.iri,
            "deployment_version": dep.version,
            "deployment_imports": dep.imports_json(),
            "request_digest": digest,
        }
        if service.answered_ahead and d.answer_ahead_seconds > 0:
            key = input_key(
                service=service,
                deployment=(dep.iri, dep.version, dep.digest),
                req=req,
                gathered=gathered,
            )
            if ahead:
                row["ahead_key"] = key
            reused = await to_thread.run_sync(
                lambda: self._reused(service, dep, row, key, now, base_url, ahead=ahead)
            )
            if reused is not None:  # ahead: already computed, nothing to do
                return reused

        given = CallInput(
            ontology=ontology,
            service=service,
            workflow=workflow,
            context=req.context,
            data=gathered.data,
            now=now,
            truncated=gathered.truncated,
            invalid=gathered.invalid,
            terminology=d.terminology,
            port=port,
            port_until=port_until,
        )
        # a server is asked off the event loop; the embedded terminology never waits
        if port is not None and port.remote:
            assembled = await to_thread.run_sync(lambda: assemble_input(given))
        else:
            assembled = assemble_input(given)
        claim = RunClaim(d.engine, row, leases=d.leases, guard=lambda c: d.catalog.check(c, dep))

        first = [assembled]

        def run(claim: RunClaim) -> dict[str, Any] | None:
            # a run taken over starts again from a fresh World of the same reading
            this = first.pop() if first else assembled.again()
            return self._run(
                service,
                workflow,
                req,
                this,
                gathered,
                claim,
                now,
                base_url,
                send_before,
                dep=dep,
                ahead=ahead,
            )

        # abandoned at the deadline, the thread carries on: it stores the run, or records it
        # failed, whatever happens to this call
        answer = await to_thread.run_sync(lambda: run(claim), abandon_on_cancel=True)
        if answer is None:  # another call holds this hookInstance
            return await self._stored_answer(service, req, digest, row, run)
        return answer

    # --- answered ahead (app.cds.ahead) -------------------------------------------------

    def ahead_job(
        self, service_id: str, body: Any, *, audience: str, base_url: str
    ) -> Callable[[], Awaitable[None]] | None:
        """After an order-select call to ``service_id`` is answered: the work that computes what
        each ``horis:answeredAhead`` order-sign service would answer the order-sign call for
        the same patient and draft orders; None when there is none."""
        if self.deps.answer_ahead_seconds <= 0 or not isinstance(body, dict):
            return None
        if (found := order_sign_services(self.deps.catalog.current(), service_id)) is None:
            return None
        select, signs = found

        async def job() -> None:
            for sign in signs:
                request = sign_request(body, select=select, sign=sign)
                try:
                    await self._call(sign.id, request, None, audience, base_url, ahead=True)
                except Exception as exc:  # answers nobody: the order-sign call computes afresh
                    log.info("%s was not answered ahead: %s", sign.id, exc)

        return job

    def _reused(  # app.cds.ahead.reuse with this service's parts
        self, service: CdsServiceDef, dep: Deployment, row: Mapping[str, Any], key: str,
        now: datetime, base_url: str, *, ahead: bool,
    ) -> dict[str, Any] | None:  # fmt: skip
        d = self.deps
        return reuse(
            engine=d.engine,
            check=lambda connection: d.catalog.check(connection, dep),
            service=service,
            row=row,
            key=key,
            now=now,
            seconds=d.answer_ahead_seconds,
            zone=d.zone,
            run_url=lambda run_id: d.authenticator.run_url(base_url, run_id),
            ahead=ahead,
        )

    # --- idempotency ---------------------------------------------------------------------

    async def _stored_answer(
        self,
        service: CdsServiceDef,
        req: HookRequest,
        digest: str,
        template: Mapping[str, Any],
        run: Callable[[RunClaim], dict[str, Any] | None],
    ) -> dict[str, Any]:
        """The answer stored for this hookInstance by the call that holds it: verbatim once it
        is stored (a twin still running is waited for, within the call's deadline), 409 for a
        different body or a failed run. A run whose holder's lease has expired (its process
        died) is taken over: run again under its own id, after its earlier writes are
        reconciled (``resumed`` claim), and answered."""

        def look() -> Mapping[str, Any] | None:
            with self.deps.engine.connect() as connection:
                return repo.hook_run(connection, service.id, req.hook_instance)

        with anyio.move_on_after(self.deps.fhir_timeout + DUPLICATE_GRACE_SECONDS):
            while True:
                try:
                    row = await to_thread.run_sync(look)
                except SQLAlchemyError as exc:
                    log.error(
                        "cannot read hookInstance %s: %s", req.hook_instance, describe_error(exc)
                    )
                    raise StoreUnavailable.one(
                        "transient", "the decision store is unavailable; retry later"
                    ) from None
                if row is not None and row["request_digest"] != digest:
                    raise HookInstanceConflict.one(
                        "conflict",
                        f"hookInstance {req.hook_instance} was already used with a different "
                        "request",
                        "hookInstance",
                    )
                if row is not None and row["response"] is not None:
                    return dict(row["response"])
                if row is not None and row["status"] == "failed":
                    raise HookInstanceConflict.one(
                        "conflict",
                        f"hookInstance {req.hook_instance} failed earlier; send a new hookInstance",
                        "hookInstance",
                    )
                if row is not None and self.deps.leases is not None and abandoned(row):
                    taken = await self._take_over(str(row["id"]), template, run)
                    if taken is not None:
                        return taken
                await anyio.sleep(_POLL_SECONDS)
        raise HookInstanceConflict.one(
            "conflict",
            f"hookInstance {req.hook_instance} is being answered by another request",
            "hookInstance",
        )

    async def _take_over(
        self,
        run_id: str,
        template: Mapping[str, Any],
        run: Callable[[RunClaim], dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """Take the abandoned run ``run_id`` and run it again; None when another call took it
        first (then its answer is waited for like any twin's)."""
        leases = self.deps.leases
        assert leases is not None
        claim = await to_thread.run_sync(
            lambda: take_over_claim(self.deps.engine, leases, run_id, template)
        )
        if claim is None:
            return None
        return await to_thread.run_sync(lambda: run(claim), abandon_on_cancel=True)

    # --- the run --------------------------------------------------------------------------

    def _run(
        self,
        service: CdsServiceDef,
        workflow: WorkflowDef,
        req: HookRequest,
        assembled: Assembled,
        gathered: Gathered,
        claim: RunClaim,
        now: datetime,
        base_url: str,
        send_before: float | None = None,
        *,
        dep: Deployment,
        ahead: bool = False,
    ) -> dict[str, Any] | None:
        """The run, stored: its response, or None when another call holds the hookInstance."""
        try:
            return self._decide(
                service,
                workflow,
                req,
                assembled,
                gathered,
                claim,
                now,
                base_url,
                send_before,
                dep=dep,
                ahead=ahead,
            )
        except ClaimLost:
            return None
        except VersionMoved:
            raise  # nothing stored, nothing sent: the call runs again
        except SQLAlchemyError as exc:  # the claim before an outside call could not be taken
            log.error("run %s could not claim its run: %s", claim.run_id, describe_error(exc))
            raise StoreUnavailable.one(
                "transient", "the decision store is unavailable; retry later"
            ) from None
        except Exception as exc:
            if claim.lost:  # it broke because a twin holds the run: that one answers
                return None
            if not isinstance(exc, StoreUnavailable):  # that one was recorded failed already
                log.exception("run %s of %s failed", claim.run_id, workflow.name)
                self._record_failed(claim)
                if claim.lost:  # a run that never claimed met its hookInstance's earlier row
                    return None
            if isinstance(exc, CdsError):
                raise
            raise RunFailed.one(
                "exception",
                f"run {claim.run_id} failed and is recorded as failed; send a new hookInstance",
            ) from None
        finally:
            claim.release()

    def _decide(
        self,
        service: CdsServiceDef,
        workflow: WorkflowDef,
        req: HookRequest,
        assembled: Assembled,
        gathered: Gathered,
        claim: RunClaim,
        now: datetime,
        base_url: str,
        send_before: float | None = None,
        *,
        dep: Deployment,
        ahead: bool = False,
    ) -> dict[str, Any]:
        from app.runtime import run_workflow
        from app.runtime.replay import RecordedRun

        d = self.deps
        ontology = dep.ontology
        assert ontology is not None
        run_id = claim.run_id
        focus_id = str(req.context["patientId"])
        world = assembled.world
        hydration = assembled.hydration
        problems = assembled.violations
        input_world = world.to_json()
        data = gathered.data
        tools = d.runner.invoker()
        resources = [r for v in data.values() for r in resources_of(v)]
        handler: CommitHandler | None = None
        # a run computed ahead acts on nothing outside (verified: pure tools only)
        if d.commit_handlers is not None and req.fhir_server is not None and not ahead:
            handler = d.commit_handlers(
                ontology=ontology,
                fhir_server=req.fhir_server,
                fhir_authorization=req.authorization.model_dump() if req.authorization else None,
                sources=[s.to_row() for s in hydration.sources],
                resources=resources,
                context=req.context,
                ensure_run=claim.ensure,
                prefetch=data,
                run_url=d.authenticator.run_url(base_url, run_id),
                send_before=send_before,
                resumed=claim.resumed,
            )
            tools.register_scheme("fhir", handler)
        ctx = d.runner.context(
            run_id=run_id,
            now=now,
            text=hydration.text,
            tools=ClaimFirstTools(tools, claim),
            wrap_bridge=lambda bridge: claim_first_bridge(bridge, claim),
            deadline=send_before,
            inputs=hydration.inputs,
        )
        outcome = run_workflow(ontology, workflow.iri, world, ctx)
        if claim.moved:  # the claim found a newer active version: run again on it
            raise VersionMoved(f"run {run_id}: the deployment's version moved before its claim")
        if claim.lost:  # a twin claimed the run while this one ran: it answers, not this one
            raise ClaimLost(f"run {run_id} lost its claim")
        decided = outcome.decision is not None
        view = RunView(
            run_id=run_id,
            terminal=outcome.terminal,
            decided=decided,
            undecided=outcome.undecided,
            narration=narration(outcome.trace),
            focus_id=focus_id,
            violations=problems,
            failed_actions=failed_actions(ontology, outcome.trace),
            detours=detours(workflow, outcome.trace, outcome.terminal),
            notices=[
                *(handler.notices() if handler is not None else []),
                *unsent_notices(ontology, outcome.trace),
            ],
            resources=by_reference([*resources, *context_resources(req.context)]),
            zone=d.zone,
        )
        run_url = d.authenticator.run_url(base_url, run_id)
        unread = unread_order_cards(
            ontology=ontology, service=service, unread=req.unread, run_url=run_url
        )
        declared = declared_cards(
            ontology=ontology,
            service=service,
            workflow=workflow,
            world=world,
            run=view,
            run_url=run_url,
        )
        cards = [*unread, *(card for _decl, card in declared)]
        # the decided proof the run already holds; an escalated run's cards show the rules' proof
        # of what they still derived, computed here only then
        proof = outcome.proof
        if proof is None and workflow.decides is not None and declared:
            proof = world.proof(focus_id, workflow.decides).to_json()
        issued = card_issues(declared, unread, proof_rules(proof))
        ext: dict[str, Any] = {
            "runId": run_id,
            "workflow": outcome.workflow,
            "version": outcome.version,
            "terminal": outcome.terminal,
        }
        if outcome.decision is not None:
            ext["decision"] = outcome.decision
        if outcome.undecided is not None:  # which inputs kept it from deciding, for integrators
            ext["undecided"] = {
                "property": outcome.undecided.get("property"),
                "inputs": [
                    {"input": i["input"], "state": i["state"]} for i in outcome.undecided["inputs"]
                ],
            }
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
        recorded = RecordedRun.of(
            outcome,
            input_world=input_world,
            text=hydration.text,
            now=now,
            inputs=hydration.inputs,
        )
        record = d.runner.record(  # replayable: the outcome plus the recorded input
            ontology,
            recorded,
            outcome,
            inputViolations=[v.to_json() for v in problems],
            dataQuality=[n.to_json() for n in (*req.notes, *hydration.notes)],
            terminology=hydration.terminology,
            # the writes that had nowhere to go (the effect log holds the ones that went)
            **({} if handler is not None else unsent_record(ontology, outcome.trace, req.context)),
        )
        record.values["inputs"] = hydration.inputs.to_json()
        if ahead and not decided:  # only a decision is reused: order-sign computes the rest
            record.values["ahead_key"] = AHEAD_UNDECIDED
        # what hydration read, so replay can hydrate it again under another version
        stored_input = HookInput(
            service=service.id,
            hook=req.hook,
            context=req.context,
            prefetch=data,
            now=now.isoformat(),
            truncated=gathered.truncated,
            invalid=gathered.invalid,
        )
        record.values["input"] = stored_input.to_bytes()
        rows = [s.to_row() for s in hydration.sources]
        shadow = self._store(service.id, claim, record, response, rows, handler, dep, issued)
        # beside the answer, never in it; a run computed ahead answers nobody
        if shadow is not None and d.shadow is not None and not ahead:
            d.shadow(change_id=shadow, deployment=dep, recorded=recorded, stored=stored_input)
        return response

    def _store(
        self,
        service_id: str,
        claim: RunClaim,
        record: RunRecord,
        response: dict[str, Any],
        sources: list[dict[str, Any]],
        handler: CommitHandler | None,
        dep: Deployment,
        cards: list[CardIssue],
    ) -> str | None:
        """One transaction for everything the run produced: the run's row (inserted, or the
        claimed one updated), its trace, source versions and the effects of writes that sent
        nothing. Raises ``ClaimLost`` (nothing stored) when a twin stored its run first,
        ``VersionMoved`` (nothing stored) when the deployment's active version moved since the
        call began (a claimed run is committed to its version and is stored), and
        ``StoreUnavailable`` (the run recorded failed where possible) when the store refuses.
        A suspended run keeps its SuspendedRun and deadline so ``/runs/{id}/resume`` works.
        Returns the change running in shadow mode beside the deployment, if any."""
        values = {**record.values, "response": response}
        catalog = self.deps.catalog
        try:
            with self.deps.engine.begin() as connection:
                if claim.claimed:
                    shadow = catalog_shadow(connection, dep)
                else:
                    shadow = catalog.check(connection, dep)
                claim.record(connection, values)
                # this call owns the run: nothing else wrote its trace, which starts at 0
                repo.add_run_rows(
                    connection,
                    claim.run_id,
                    trace=record.trace,
                    sources=sources,
                    service_id=service_id,
                    cards=cards,
                )
                if handler is not None:
                    handler.write_pending(connection)
            return shadow
        except SQLAlchemyError as exc:
            log.error(
                "run %s could not be persisted, its decision is withheld: %s",
                claim.run_id,
                describe_error(exc),
            )
            self._record_failed(claim)
            raise StoreUnavailable.one(
                "transient",
                "the decision could not be recorded, so it is not returned; retry later",
            ) from None

    def _record_failed(self, claim: RunClaim) -> None:
        """Record the run ``failed`` (a retry of its hookInstance is then 409 at once): the
        claimed row is updated, else a failed row is inserted unless a twin holds the key."""
        try:
            with self.deps.engine.begin() as connection:
                claim.record(connection, {"status": "failed", "terminal": None, "decision": None})
        except ClaimLost:
            pass
        except SQLAlchemyError as exc:
            log.error(
                "run %s could not even be marked failed: %s", claim.run_id, describe_error(exc)
            )
