"""Continuing suspended runs of the served deployments: one with the facts it waited for, and
every run whose wait is overdue with none.

``POST /runs/{id}/resume`` (:mod:`app.api.resume`) continues one run; the service's periodic task
(:mod:`app.api.maintenance`) ends overdue waits, so a wait nobody answers still ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from app.deployments import DeploymentNotServed, Deployments, of_run, served
from app.errors import Conflict, NotFound
from app.ontology.model import Ontology
from app.runtime import Outcome
from app.runtime.runner import Runner, suspended_run, wait_deadline
from app.store import repo, session_scope

__all__ = ["expire_overdue_waits", "resume_run"]


def resume_run(
    engine: Engine,
    deployments: Deployments,
    run_id: str,
    facts: dict[str, Any],
    *,
    now: datetime | None = None,
    runner: Runner | None = None,
) -> Outcome:
    """Continue a suspended run on the served version of its deployment
    (:meth:`Runner.resume`): 404 for no run, 409 when it is not waiting, 400 when the facts
    are refused, 503 when its deployment is not served; the stored response and replay material
    stay."""

    def ontology_of(row: Mapping[str, Any]) -> Ontology:
        return served(of_run(deployments, row.get("deployment"), str(row["workflow_iri"])))

    return (runner or Runner()).resume(engine, ontology_of, run_id, facts, now=now)


def expire_overdue_waits(
    engine: Engine,
    deployments: Deployments,
    *,
    now: datetime,
    runner: Runner | None = None,
    limit: int = 500,
) -> list[Outcome]:
    """Resume, with no facts, every suspended run whose wait deadline has passed (the stored
    ``wait_deadline``, else the one its WaitStep's ``horis:timeout`` implies)."""
    with session_scope(engine) as session:
        due: list[str] = []
        for run in repo.list_runs(session, status="suspended", limit=limit):
            deadline = run.wait_deadline
            if deadline is None:
                row = {c: getattr(run, c) for c in ("id", "world_state", "position")}
                row |= {"updated_at": run.updated_at, "workflow_iri": run.workflow_iri}
                try:
                    ontology = served(of_run(deployments, run.deployment, run.workflow_iri))
                    deadline = wait_deadline(ontology, suspended_run(ontology, row, []))
                except (Conflict, NotFound, DeploymentNotServed):
                    continue  # waits somewhere no served deployment declares
            if deadline is not None and deadline <= now:
                due.append(run.id)
    done: list[Outcome] = []
    for run_id in due:
        try:
            done.append(resume_run(engine, deployments, run_id, {}, now=now, runner=runner))
        except (Conflict, NotFound, DeploymentNotServed):
            continue  # resumed by someone else meanwhile, or its deployment is not served
    return done
