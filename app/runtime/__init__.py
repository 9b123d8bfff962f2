"""The workflow runtime: the interpreter, run outcomes, traces and replay.

``interpreter`` (its step bodies in ``steps``, a run's state in ``state``), ``perception``,
``effects``, ``names``, ``outcome``, ``context`` and ``replay`` are pure (no I/O, no clock, no
randomness): time, tool results and Bridge answers come through ``RunContext``. ``host`` is the
impure edge the CLI and the API use.
"""

from app.runtime.context import Recording, RunContext, ToolPort
from app.runtime.interpreter import resume_workflow, run_workflow
from app.runtime.outcome import Outcome, SuspendedRun
from app.statuses import OutcomeStatus

__all__ = [
    "Outcome",
    "OutcomeStatus",
    "Recording",
    "RunContext",
    "SuspendedRun",
    "ToolPort",
    "resume_workflow",
    "run_workflow",
]
