"""The runs that decide an authored plan's conditions under ``$apply``, in the run store.

A plan's applicability conditions compile into a deployment of their own
(``app.plandefinition.conditions``), private to the process that compiled them. The run that
decides them goes through the hook service on its event loop, like a served service's
``$apply`` (:class:`StoredPlanRuns`): recorded with its proof, trace, input and source versions,
``origin`` ``apply``, so it is audited, left out of card analytics and replayable. The compiled
Turtle is kept under the deployment's IRI (``compiled_plans``) before the run is stored, and
:func:`run_deployment` loads it again for a replay or a run page in any process, after a restart
too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from anyio import from_thread
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.cds.errors import RunFailed, StoreUnavailable
from app.deployments import Deployment, Deployments, load_deployments, of_run
from app.errors import NotFound
from app.plandefinition.apply import stored_outcome
from app.plandefinition.conditions import plan_file
from app.store.compiled_plans import compiled_plan_text, keep_compiled_plan
from app.store.db import describe_error
from app.store.models import Run
from app.tools.packaged import PackagedTools

log = logging.getLogger("horismos.plandefinition")

#: The hook service's answer to a request on the deployments given (``HookService.applied``
#: with the operation's base URL bound).
Answer = Callable[[str, dict[str, Any], Deployments], Coroutine[Any, Any, Mapping[str, Any]]]


@dataclass(frozen=True)
class StoredPlanRuns:
    """``PlanRuns`` for a ``$apply`` call in a worker thread: the compiled Turtle kept, the run
    made by the hook service on the event loop, its stored outcome read back."""

    engine: Engine
    answer: Answer

    def __call__(
        self, deployment: Deployment, service_id: str, request: dict[str, Any], text: str
    ) -> Mapping[str, Any]:
        try:
            keep_compiled_plan(self.engine, deployment.iri, text)
        except SQLAlchemyError as exc:  # said as a hook run's unreachable store is: a 503
            raise _unavailable(exc) from None
        response = from_thread.run(self.answer, service_id, request, Deployments([deployment]))
        try:
            outcome = stored_outcome(self.engine, response) or {}
        except SQLAlchemyError as exc:
            raise _unavailable(exc) from None
        if "runId" not in outcome:
            raise RunFailed.one(
                "exception", f"the run deciding the plan's conditions ({service_id}) was not stored"
            )
        return outcome


def _unavailable(exc: SQLAlchemyError) -> StoreUnavailable:
    log.warning("an $apply run could not reach the run store: %s", describe_error(exc))
    return StoreUnavailable.one("transient", "the decision store is unavailable; retry later")


def run_deployment(
    session: Session, deployments: Deployments, row: Run, packaged: PackagedTools
) -> Deployment:
    """The deployment a stored run ran on: a served one (``of_run``), else the compiled plan
    kept under its IRI, loaded again (NotFound when neither)."""
    try:
        return of_run(deployments, row.deployment, row.workflow_iri)
    except NotFound:
        text = compiled_plan_text(session, row.deployment) if row.deployment else None
        if text is None:
            raise
    found: Deployment
    [found] = list(load_deployments([plan_file(text)], packaged))
    if not found.serving:
        raise NotFound(
            where="deployment",
            message=f"the run's compiled plan {row.deployment} no longer verifies",
        )
    return found


__all__ = ["Answer", "StoredPlanRuns", "run_deployment"]
