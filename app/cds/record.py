"""The record stage of a hook call: what a run produced, stored before anything is answered.

:func:`run_record` gathers the run's row: its outcome and trace, the replay material (the input
World, the run's time and input status), the data-quality notes, and the FHIR input itself
(:class:`~app.cds.hook_input.HookInput`) so a replay can hydrate the call again under another
version. :func:`store_run` writes it, its trace, source versions, issued cards and the effects
of writes that sent nothing at once (``app.store.runs``): if it fails, the decision is withheld
(503) and the run is recorded ``failed`` where the store still takes that.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy.exc import SQLAlchemyError

from app.cds.accept import HookCall
from app.cds.ahead import NOT_REUSED
from app.cds.assemble import Assembled
from app.cds.claim import ClaimLost, RunClaim
from app.cds.errors import StoreUnavailable
from app.cds.hook_input import HookInput
from app.cds.unsent import unsent_record
from app.deployments.catalog import Catalog
from app.ports import CommitHandler
from app.runtime.outcome import Outcome
from app.runtime.replay import RecordedRun
from app.runtime.runner import Runner, RunRecord
from app.store import changes as change_store
from app.store.db import describe_error
from app.store.models import new_id
from app.store.run_rows import CardIssue, NewRun, RunColumns

log = logging.getLogger("horismos.cds")


@dataclass(frozen=True, kw_only=True)
class HookRunRecord:
    """A hook run as it is stored, and what a shadow run replays of it."""

    record: RunRecord
    #: the run as replay reads it (input World, text, time, input status, outcome)
    recorded: RecordedRun
    #: the FHIR input hydration read, stored in the run's row
    stored_input: HookInput
    #: the source versions the run read, as rows
    sources: list[dict[str, Any]]


def run_record(
    runner: Runner,
    call: HookCall,
    assembled: Assembled,
    outcome: Outcome,
    *,
    input_world: dict[str, Any],
    writes_sent: bool,
    ahead: bool,
) -> HookRunRecord:
    """The stored form of the run that ended in ``outcome`` over ``assembled``'s input.

    ``writes_sent``: the run's writes went to the EHR's commit handler, whose effect log holds
    them; otherwise the writes that had nowhere to go are recorded in the outcome."""
    given, hydration, ontology = assembled.given, assembled.hydration, call.ontology
    recorded = RecordedRun.of(
        outcome,
        input_world=input_world,
        text=hydration.text,
        now=given.now,
        inputs=hydration.inputs,
    )
    record = runner.record(  # replayable: the outcome plus the recorded input
        ontology,
        recorded,
        outcome,
        inputViolations=[v.to_json() for v in assembled.violations],
        dataQuality=[n.to_json() for n in (*call.req.notes, *hydration.notes)],
        terminology=hydration.terminology,
        **({} if writes_sent else unsent_record(ontology, outcome.trace, call.req.context)),
    )
    record.values["inputs"] = hydration.inputs.to_json()
    if ahead and outcome.decision is None:  # only a decision is reused: order-sign computes
        record.values["ahead_key"] = NOT_REUSED
    stored_input = HookInput(
        service=call.service.id,
        hook=call.req.hook,
        context=call.req.context,
        prefetch=given.data,
        now=given.now.isoformat(),
        truncated=given.truncated,
        invalid=given.invalid,
    )
    record.values["input"] = stored_input.to_bytes()
    return HookRunRecord(
        record=record,
        recorded=recorded,
        stored_input=stored_input,
        sources=[s.to_row() for s in hydration.sources],
    )


def store_run(
    catalog: Catalog,
    call: HookCall,
    claim: RunClaim,
    stored: HookRunRecord,
    response: Mapping[str, Any],
    *,
    handler: CommitHandler | None,
    cards: list[CardIssue],
) -> str | None:
    """Everything the run produced, at once: the run's row (inserted, or the claimed one
    updated), its trace, source versions, cards and the effects of writes that sent nothing.
    Raises ``ClaimLost`` (nothing stored) when a twin stored its run first, ``VersionMoved``
    (nothing stored) when the deployment's active version moved since the call began (a
    claimed run is committed to its version and is stored), and ``StoreUnavailable`` (the run
    recorded failed where possible) when the store refuses. A suspended run keeps its
    SuspendedRun and deadline so ``/runs/{id}/resume`` works. Returns the change running in
    shadow mode beside the deployment, if any."""
    values = {**stored.record.values, "response": response}
    run = NewRun(
        columns=cast(RunColumns, {**claim.row, **values}),
        trace=stored.record.trace,
        sources=stored.sources,
        cards=cards,
        effects=handler.unsent_effects() if handler is not None and not claim.claimed else (),
    )
    dep = call.deployment
    try:
        if not claim.claimed:  # it sent nothing: the whole run, at once (one statement on PG)
            if claim.lost:
                raise ClaimLost(f"hookInstance {call.req.hook_instance} is held by another call")
            found = claim.store.record(run, deployment=dep.iri, generation=dep.generation)
            if not found.stored:
                catalog.verify(dep, found.generation)
                claim.lost = True
                raise ClaimLost(f"hookInstance {call.req.hook_instance} is held by another call")
            return found.shadow
        with claim.store.engine.begin() as connection:
            # committed to its version: it only needs the shadow change
            shadow = change_store.deployment_generation(connection, dep.iri)[1]
            claim.record(connection, values)
            claim.store.add_rows(connection, claim.run_id, run)
            if handler is not None:
                handler.write_pending(connection)
        return shadow
    except SQLAlchemyError as exc:
        log.error(
            "run %s could not be persisted, its decision is withheld: %s",
            claim.run_id,
            describe_error(exc),
        )
        record_failed(claim)
        raise StoreUnavailable.one(
            "transient",
            "the decision could not be recorded, so it is not returned; retry later",
        ) from None


def record_failed(claim: RunClaim) -> None:
    """Record the run ``failed`` (a retry of its hookInstance is then 409 at once): the
    claimed row is updated, else a failed row is inserted unless a twin holds the key."""
    try:
        with claim.engine.begin() as connection:
            claim.record(connection, {"status": "failed", "terminal": None, "decision": None})
    except ClaimLost:
        pass
    except SQLAlchemyError as exc:
        log.error("run %s could not even be marked failed: %s", claim.run_id, describe_error(exc))


def run_row(call: HookCall, origin: str | None = None) -> dict[str, Any]:
    """The run's row as it is claimed or first stored: what it is for and under which version
    (``origin``: where it came from when no CDS client made it)."""
    req, dep, workflow = call.req, call.deployment, call.workflow
    patient = req.context.get("patientId")
    return {
        "id": new_id(),
        "service_id": call.service.id,
        "hook": req.hook,
        "hook_instance": req.hook_instance,
        "patient": patient if isinstance(patient, str) else None,
        "workflow_iri": workflow.iri,
        "workflow_version": workflow.version,
        "ontology_digest": dep.digest,
        "deployment": dep.iri,
        "deployment_version": dep.version,
        "deployment_imports": dep.imports_json(),
        "request_digest": call.digest,
        "origin": origin,
    }


__all__ = ["HookRunRecord", "record_failed", "run_record", "run_row", "store_run"]
