"""One hook call, end to end: a pipeline of stages, each in its own module.

The stages, in the order of the call, and what each hands the next:

1. **accept** (:mod:`app.cds.accept`): the service id (404), the client JWT (401), the request
   (400) and the hook it is for → :class:`~app.cds.accept.HookCall`.
2. **gather** (:mod:`app.cds.prefetch`): prefetch as sent, the rest read from the EHR's FHIR
   server under the call's deadline → :class:`~app.cds.prefetch.Gathered`. A transient FHIR
   failure (412) leaves no trace that would block the EHR's retry of the same hookInstance.
3. **answer ahead** (:mod:`app.cds.ahead`): an order-sign call whose input a run computed at
   order-select already decided answers from it.
4. **assemble** (:mod:`app.cds.assemble`): the World the run starts from, every unread,
   refused, stale or truncated input recorded → :class:`~app.cds.assemble.Assembled`; replay,
   shadow runs and change replays assemble their input with the same function.
5. **run** (here, in one worker thread: tools may block; on the event loop for a workflow that
   only computes, ``app.ontology.outside``): the workflow to a terminal step with
   tool commits routed to the FHIR adapter → :class:`~app.runtime.outcome.Outcome`. The run's
   row is claimed (committed as ``running``) only when the run is about to send something
   outside (:mod:`app.cds.claim`); a twin that finds the claim sends nothing and waits for the
   winner's stored response (:mod:`app.cds.twins`).
6. **render** (:mod:`app.cds.render`): cards, system actions and the run extension, checked
   against CDS Hooks 2.0 → :class:`~app.cds.render.Rendered`.
7. **record** (:mod:`app.cds.record`): outcome, trace, proof, source versions, the effect log of
   writes that sent nothing and the response, in one transaction before anything is answered →
   :class:`~app.cds.record.HookRunRecord`; if that fails the answer is 503 and carries no
   decision. The unique ``(service, hookInstance)`` key makes that transaction the claim of a
   run that sent nothing: of two twins, the one that commits second stores nothing and answers
   with the first one's stored response, verbatim. The same hookInstance with a different body
   is 409.
8. **answer**: the response, as stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import anyio
from anyio import to_thread
from sqlalchemy.exc import SQLAlchemyError

from app.cds.accept import HookCall, accept
from app.cds.ahead import input_key, order_sign_services, reuse, sign_request
from app.cds.assemble import Assembled, CallInput, assemble_input
from app.cds.claim import ClaimFirstTools, ClaimLost, RunClaim, claim_first_bridge
from app.cds.combined import combine, combined_prefetch, combined_service, member_body
from app.cds.errors import (
    CdsError,
    HookDeadlinePassed,
    RequestInvalid,
    RunFailed,
    ServiceNotFound,
    StoreUnavailable,
)
from app.cds.hook_deps import HookDeps
from app.cds.inline import InlineRuns
from app.cds.prefetch import Gathered, gather
from app.cds.record import record_failed, run_record, run_row, store_run
from app.cds.render import render
from app.cds.twins import stored_answer
from app.deployments import Deployment, Deployments
from app.deployments.catalog import VersionMoved
from app.fhir_json import resources_of
from app.ontology.model import CdsServiceDef
from app.ports import CommitHandler
from app.runtime import run_workflow
from app.runtime.outcome import Outcome
from app.store.db import describe_error

log = logging.getLogger("horismos.cds")


#: How many times a call runs again when the deployment's active version moves under it.
_VERSION_ATTEMPTS = 3


class HookService:
    """Serves ``POST /cds-services/{id}``."""

    def __init__(self, deps: HookDeps) -> None:
        self.deps = deps
        #: which calls' runs stay on the event loop
        self._inline = InlineRuns(deps.runner, deps.commit_handlers)

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
        return await self._within_deadline(
            service_id, lambda: self._answer(service_id, body, authorization, audience, base_url)
        )

    async def applied(
        self,
        service_id: str,
        body: Any,
        *,
        base_url: str,
        deployments: Deployments | None = None,
    ) -> dict[str, Any]:
        """The answer of a served service to a hook request an ``$apply`` call built (its
        caller verified by the operation), within the same deadline: recorded like a hook
        call, ``origin`` ``apply``. ``deployments``: those the service is looked up in instead
        of the served ones (an authored plan's conditions, compiled for this call)."""
        return await self._within_deadline(
            service_id,
            lambda: self._on_active(
                service_id,
                body,
                None,
                "",
                base_url,
                verified=True,
                origin="apply",
                deployments=deployments,
            ),
            retry="call $apply again",  # its caller never saw the hookInstance
        )

    async def _within_deadline(
        self,
        service_id: str,
        answer: Callable[[], Awaitable[dict[str, Any]]],
        *,
        retry: str = "send the same hookInstance again to get its answer",
    ) -> dict[str, Any]:
        """``answer()``, or past the deadline :class:`HookDeadlinePassed` telling the caller
        how to get the answer (``retry``)."""
        deadline = self.deps.deadline
        if deadline is None:
            return await answer()
        with anyio.move_on_after(deadline) as scope:
            return await answer()
        assert scope.cancelled_caught
        log.warning("a call to %s passed its %g s deadline", service_id, deadline)
        raise HookDeadlinePassed.one(
            "timeout",
            f"no decision within the service's {deadline:g} s deadline; if the run started it "
            f"carries on and is recorded: {retry}",
        )

    async def _answer(
        self,
        service_id: str,
        body: Any,
        authorization: str | None,
        audience: str,
        base_url: str,
    ) -> dict[str, Any]:
        """The answer of a service, or of a combined service (``app.cds.combined``)."""
        found = combined_service(self.deps.catalog.current(), service_id)
        if found is None:
            return await self._on_active(service_id, body, authorization, audience, base_url)
        combined, members = found
        await self.deps.authenticator.verify(authorization, audience)
        if not isinstance(body, dict):
            raise RequestInvalid.one("structure", "the body must be a JSON object")
        prefetch = combined_prefetch(members)

        async def one(member: CdsServiceDef, keys: dict[str, str]) -> dict[str, Any]:
            sent = member_body(body, keys)
            return await self._on_active(
                member.id, sent, authorization, audience, base_url, verified=True
            )

        answers: list[dict[str, Any] | BaseException] = [{} for _ in members]

        async def into(i: int, member: CdsServiceDef, keys: dict[str, str]) -> None:
            try:
                answers[i] = await one(member, keys)
            except Exception as exc:  # every member ends; the first failure is answered
                answers[i] = exc

        async with anyio.create_task_group() as group:
            for i, (member, keys) in enumerate(zip(members, prefetch.keys, strict=True)):
                group.start_soon(into, i, member, keys)
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        if failed is not None:
            raise failed
        done = [(m, a) for m, a in zip(members, answers, strict=True) if isinstance(a, dict)]
        return combine(combined, done)

    async def _on_active(
        self,
        service_id: str,
        body: Any,
        authorization: str | None,
        audience: str,
        base_url: str,
        *,
        verified: bool = False,
        origin: str | None = None,
        deployments: Deployments | None = None,
    ) -> dict[str, Any]:
        """The call on the active version of its deployment: when an activation or rollback
        committed while it ran, nothing of the run was stored or sent, and it runs again on the
        version now active. ``verified``: the caller's JWT was checked already (a combined
        service's call); ``origin``: the run's, when no CDS client made it (``runs.origin``);
        ``deployments``: where the service is found, when not among the served ones."""
        for _attempt in range(_VERSION_ATTEMPTS):
            try:
                return await self._call(
                    service_id,
                    body,
                    authorization,
                    audience,
                    base_url,
                    verified=verified,
                    origin=origin,
                    deployments=deployments,
                )
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
        verified: bool = False,
        origin: str | None = None,
        deployments: Deployments | None = None,
    ) -> dict[str, Any]:
        """The call's answer; with ``ahead``, the service's run computed ahead of an order-sign
        call (``app.cds.ahead``: sent by this service, not a client), its answer stored only;
        ``verified``: the caller's JWT was checked already; ``deployments``: where the service
        is found, when not among the served ones (no refresh of the catalog then)."""
        d = self.deps
        started = time.monotonic()

        def accepted(deployments: Deployments) -> Awaitable[HookCall]:
            return accept(
                deployments,
                service_id,
                body,
                authenticator=None if ahead or verified else d.authenticator,
                authorization=authorization,
                audience=audience,
                allowed_fhir_servers=d.allowed_fhir_servers,
            )

        try:
            call = await accepted(d.catalog.current() if deployments is None else deployments)
        except ServiceNotFound as missing:  # another worker's activation may have made it:
            # read the active versions again, at most once a second (unreadable: still a 404)
            if deployments is not None or not d.catalog.may_refresh():
                raise
            try:
                call = await accepted(await to_thread.run_sync(d.catalog.refresh, d.engine))
            except SQLAlchemyError:
                log.warning("deployments could not be refreshed for %r", service_id)
                raise missing from None
        fhir_deadline = d.fhir_timeout
        if d.deadline is not None:  # FHIR reads get what is left of the call's own deadline
            fhir_deadline = max(0.0, min(fhir_deadline, d.deadline - (time.monotonic() - started)))
        gathered = await gather(
            call.service.prefetch,
            call.req,
            d.http,
            readers=d.fhir_readers,
            deadline=fhir_deadline,
            max_bytes=d.max_fhir_response_bytes,
            max_pages=d.max_fhir_pages,
        )
        now = d.runner.clock()
        row = run_row(call, origin)
        # a run that cannot act outside runs on the event loop (app.cds.inline), and so does
        # its answered-ahead lookup (one prepared SELECT)
        inline = self._inline.stays_inside(call)
        if call.service.answered_ahead and d.answer_ahead_seconds > 0:
            dep = call.deployment
            key = input_key(
                service=call.service,
                deployment=(dep.iri, dep.version, dep.digest),
                req=call.req,
                gathered=gathered,
            )
            if ahead:
                row["ahead_key"] = key

            def look() -> dict[str, Any] | None:
                return self._reused(call.service, dep, row, key, now, base_url, ahead=ahead)

            reused = look() if inline else await to_thread.run_sync(look)
            if reused is not None:  # ahead: already computed, nothing to do
                return reused

        assembled = await self._assemble(call, gathered, now, started)
        claim = RunClaim(
            d.engine, row, leases=d.leases, guard=lambda c: d.catalog.check(c, call.deployment)
        )
        send_before = None if d.deadline is None else started + d.deadline
        first = [assembled]

        def run(claim: RunClaim) -> dict[str, Any] | None:
            # a run taken over starts again from a fresh World of the same reading
            this = first.pop() if first else assembled.again()
            return self._run(call, this, claim, base_url, send_before, ahead=ahead)

        if inline:
            # a run that cannot act outside (it only computes, or what could leave is held
            # back in this call) runs, renders and records on the event loop: a thread hop
            # would cost more than it
            answer = run(claim)
        else:
            # abandoned at the deadline, the thread carries on: it stores the run, or records
            # it failed, whatever happens to this call
            answer = await to_thread.run_sync(lambda: run(claim), abandon_on_cancel=True)
        if answer is None:  # another call holds this hookInstance
            return await stored_answer(
                d.engine,
                d.leases,
                service_id=call.service.id,
                hook_instance=call.req.hook_instance,
                digest=call.digest,
                template=row,
                run=run,
                fhir_timeout=d.fhir_timeout,
            )
        return answer

    async def _assemble(
        self, call: HookCall, gathered: Gathered, now: datetime, started: float
    ) -> Assembled:
        """The World the run starts from (``app.cds.assemble``), the terminology port asked
        off the event loop when it is a server."""
        d = self.deps
        port = d.terminologies.for_ontology(call.ontology) if d.terminologies is not None else None
        port_until = None
        if d.deadline is not None:  # terminology calls leave the run time to answer
            port_until = started + d.deadline - min(1.0, d.deadline / 4)
        given = CallInput.of(
            call, gathered, now, terminology=d.terminology, port=port, port_until=port_until
        )
        if port is not None and port.remote:
            return await to_thread.run_sync(lambda: assemble_input(given))
        return assemble_input(given)

    # --- answered ahead (app.cds.ahead) -------------------------------------------------

    def ahead_job(
        self, service_id: str, body: Any, *, audience: str, base_url: str
    ) -> Callable[[], Awaitable[None]] | None:
        """After an order-select call to ``service_id`` is answered: the work that computes what
        each ``horis:answeredAhead`` order-sign service would answer the order-sign call for
        the same patient and draft orders; None when there is none."""
        if self.deps.answer_ahead_seconds <= 0 or not isinstance(body, dict):
            return None
        try:
            combined = combined_service(self.deps.catalog.current(), service_id)
        except CdsError:
            return None
        if combined is not None:  # the order-select services it combines compute ahead
            members = combined[1]
            found_jobs = (
                self.ahead_job(
                    member.id, member_body(body, keys), audience=audience, base_url=base_url
                )
                for member, keys in zip(members, combined_prefetch(members).keys, strict=True)
            )
            jobs = [j for j in found_jobs if j is not None]
            if not jobs:
                return None

            async def all_jobs() -> None:
                for each in jobs:
                    await each()

            return all_jobs
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

    # --- the run --------------------------------------------------------------------------

    def _run(
        self,
        call: HookCall,
        assembled: Assembled,
        claim: RunClaim,
        base_url: str,
        send_before: float | None,
        *,
        ahead: bool,
    ) -> dict[str, Any] | None:
        """The run, stored: its response, or None when another call holds the hookInstance."""
        try:
            return self._decide(call, assembled, claim, base_url, send_before, ahead=ahead)
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
                log.exception("run %s of %s failed", claim.run_id, call.workflow.name)
                record_failed(claim)
                if claim.lost:  # a run that never claimed met its hookInstance's earlier row
                    return None
            if isinstance(exc, CdsError):
                raise
            raise RunFailed.one(
                "exception",
                f"run {claim.run_id} failed and is recorded as failed; "
                + ("call $apply again" if claim.row.get("origin") else "send a new hookInstance"),
            ) from None
        finally:
            claim.release()

    def _decide(
        self,
        call: HookCall,
        assembled: Assembled,
        claim: RunClaim,
        base_url: str,
        send_before: float | None,
        *,
        ahead: bool,
    ) -> dict[str, Any]:
        """Run, render, record: the stages after the input is assembled, in the worker thread."""
        d = self.deps
        input_world = assembled.world.to_json()  # before the run adds to it
        resources = [r for v in assembled.given.data.values() for r in resources_of(v)]
        handler = (  # a run computed ahead acts on nothing outside (verified: pure tools only)
            None
            if ahead
            else self._commit_handler(call, assembled, claim, resources, base_url, send_before)
        )
        outcome = self._execute(call, assembled, claim, handler, send_before)
        run_url = d.authenticator.run_url(base_url, claim.run_id)
        rendered = render(
            call,
            outcome,
            assembled.world,
            violations=assembled.violations,
            notices=handler.notices() if handler is not None else [],
            resources=resources,
            run_url=run_url,
            zone=d.zone,
        )
        stored = run_record(
            d.runner,
            call,
            assembled,
            outcome,
            input_world=input_world,
            writes_sent=handler is not None,
            ahead=ahead,
        )
        shadow = store_run(
            d.catalog,
            call,
            claim,
            stored,
            rendered.response,
            handler=handler,
            cards=rendered.issued,
        )
        # beside the answer, never in it; a run computed ahead answers nobody, and an $apply
        # run's data need not be a live chart: shadow agreement is read from live calls only
        live = not ahead and not claim.row.get("origin")
        if shadow is not None and d.shadow is not None and live:
            d.shadow(
                change_id=shadow,
                deployment=call.deployment,
                recorded=stored.recorded,
                stored=stored.stored_input,
            )
        return rendered.response

    def _commit_handler(
        self,
        call: HookCall,
        assembled: Assembled,
        claim: RunClaim,
        resources: list[dict[str, Any]],
        base_url: str,
        send_before: float | None,
    ) -> CommitHandler | None:
        """The handler of this call's FHIR writes; None when they have nowhere to go."""
        d, req = self.deps, call.req
        if d.commit_handlers is None or req.fhir_server is None:
            return None
        return d.commit_handlers(
            ontology=call.ontology,
            fhir_server=req.fhir_server,
            fhir_authorization=req.authorization.model_dump() if req.authorization else None,
            sources=[s.to_row() for s in assembled.hydration.sources],
            resources=resources,
            context=req.context,
            ensure_run=claim.ensure,
            prefetch=assembled.given.data,
            run_url=d.authenticator.run_url(base_url, claim.run_id),
            send_before=send_before,
            resumed=claim.resumed,
        )

    def _execute(
        self,
        call: HookCall,
        assembled: Assembled,
        claim: RunClaim,
        handler: CommitHandler | None,
        send_before: float | None,
    ) -> Outcome:
        """The workflow run to a terminal step, every outside call claiming the run first."""
        d = self.deps
        tools = d.runner.invoker()
        if handler is not None:
            tools.register_scheme("fhir", handler)
        ctx = d.runner.context(
            run_id=claim.run_id,
            now=assembled.given.now,
            text=assembled.hydration.text,
            tools=ClaimFirstTools(tools, claim),
            wrap_bridge=lambda bridge: claim_first_bridge(bridge, claim),
            deadline=send_before,
            inputs=assembled.hydration.inputs,
        )
        outcome = run_workflow(call.ontology, call.workflow.iri, assembled.world, ctx)
        if claim.moved:  # the claim found a newer active version: run again on it
            raise VersionMoved(
                f"run {claim.run_id}: the deployment's version moved before its claim"
            )
        if claim.lost:  # a twin claimed the run while this one ran: it answers, not this one
            raise ClaimLost(f"run {claim.run_id} lost its claim")
        return outcome


__all__ = ["HookDeps", "HookService"]
