"""Runs over HTTP: start a workflow on structured input, read a run, replay it.

Routes are thin: parse, call ``app.runtime.host``, map the result. A run is persisted (run,
trace, proof and replay material) before its outcome is returned; if it cannot be stored the
caller gets an error, never an unrecorded decision.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from app.bridge import Bridge, bridge_from_model_string
from app.deps import OntologyDep, SessionDep, SettingsDep
from app.runtime.host import save_run, start_run, stored_outcome, stored_recording
from app.runtime.replay import replay_run
from app.settings import Settings
from app.tools import ToolInvoker

router = APIRouter(tags=["runs"])


class RunInput(BaseModel):
    """Structured input (DESIGN §9): instances by local name, optional free text."""

    model_config = ConfigDict(extra="forbid")

    instances: list[dict[str, Any]] = Field(default_factory=list)
    text: str | None = None


class ReplayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rerun_idempotent: bool = False


def _bridge(request: Request, settings: Settings) -> Bridge | None:
    state = request.app.state
    if not hasattr(state, "runtime_bridge"):
        state.runtime_bridge = bridge_from_model_string(settings.bridge_model, settings)
    bridge: Bridge | None = state.runtime_bridge
    return bridge


def _tools(request: Request) -> ToolInvoker:
    tools = getattr(request.app.state, "tools", None)
    return tools if isinstance(tools, ToolInvoker) else ToolInvoker()


@router.post("/workflows/{workflow}/runs", summary="Run a workflow on structured input")
def create_run(
    workflow: str,
    body: RunInput,
    request: Request,
    ontology: OntologyDep,
    session: SessionDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    started = start_run(
        ontology,
        workflow,
        body.model_dump(),
        bridge=_bridge(request, settings),
        tools=_tools(request),
    )
    with session.begin():
        save_run(session, ontology, started)
    return started.outcome.to_json()


@router.get("/runs/{run_id}", summary="A run's outcome: terminal, decision, proof, trace")
def read_run(run_id: str, session: SessionDep) -> dict[str, Any]:
    return stored_outcome(session, run_id)


@router.post("/runs/{run_id}/replay", summary="Replay a recorded run and report divergence")
def replay(
    run_id: str,
    session: SessionDep,
    ontology: OntologyDep,
    request: Request,
    options: ReplayOptions | None = None,
) -> dict[str, Any]:
    recorded = stored_recording(session, run_id)
    report = replay_run(
        ontology,
        recorded,
        tools=_tools(request),
        rerun_idempotent=options.rerun_idempotent if options else False,
    )
    return report.to_json()
