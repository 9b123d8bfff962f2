"""Which hook calls run on the event loop: those whose run cannot act on anything outside the
process, so that a worker thread would cost more than it saves.

A workflow that only computes (``app.ontology.outside``: no language model, no wait, pure tools
only) never acts outside. A workflow with steps that could act outside still cannot in a given
call when every such step is held back before anything leaves:

- a language-model step (perception, narration, ranking) whose model has no Bridge configured:
  the step records that no model answered and the run goes on;
- a FHIR write (a ``fhir`` tool) when the call names no FHIR server, or when the call's
  ``fhirAuthorization`` does not grant the write's ``horis:scope`` for its operation: the commit
  adapter refuses it before any request (``CommitHandlers.may_send``), and the effect is
  recorded ``refused`` with the run, as in a worker thread.

Any other step that may act outside (a wait, a tool that is not ``horis:pure`` and not a FHIR
write) sends the run to a worker thread. The steps are found once per deployment version and
workflow; the call decides the rest.
"""

from __future__ import annotations

from app.bridge.protocol import Bridge
from app.cds.accept import HookCall
from app.ontology.outside import acts_outside
from app.ontology.workflows import ActionStep, NarrationStep, PerceptionStep, ProposalStep, StepDef
from app.ports import CommitHandlers
from app.runtime.runner import Runner
from app.tools.invoker import scheme_of

_MODEL_STEPS = (PerceptionStep, NarrationStep, ProposalStep)
#: How many deployment versions' steps are kept before they are found again.
_KEPT = 256


class InlineRuns:
    """Whether a call's run stays on the event loop (see the module)."""

    def __init__(self, runner: Runner, commits: CommitHandlers | None) -> None:
        self.runner = runner
        self.commits = commits
        #: (deployment digest, workflow IRI) → the steps that may act outside
        self._outside: dict[tuple[str | None, str], list[StepDef]] = {}
        self._bridges: dict[str | None, bool] = {}

    def stays_inside(self, call: HookCall) -> bool:
        key = (call.deployment.digest, call.workflow.iri)
        steps = self._outside.get(key)
        if steps is None:
            if len(self._outside) >= _KEPT:  # versions and compiled plans come and go
                self._outside.clear()
            found = acts_outside(call.ontology, call.workflow.iri)
            steps = self._outside[key] = [step for _workflow, step, _why in found]
        return all(self._held_back(call, step) for step in steps)

    def _held_back(self, call: HookCall, step: StepDef) -> bool:
        if isinstance(step, _MODEL_STEPS):
            return not self._has_bridge(step.model)
        if not isinstance(step, ActionStep):
            return False  # a wait
        tool = call.ontology.tools.get(step.tool or "")
        if tool is None or scheme_of(tool) != "fhir":
            return False
        if self.commits is None or call.req.fhir_server is None:
            return True  # the write has nowhere to go: it is never sent
        auth = call.req.authorization
        granted = auth.model_dump() if auth is not None else None
        return not self.commits.may_send(tool, granted)

    def _has_bridge(self, model: str | None) -> bool:
        known = self._bridges.get(model)
        if known is None:
            bridge: Bridge | None = (
                self.runner.bridges(model) if model else self.runner.default_bridge
            )
            known = self._bridges[model] = bridge is not None
        return known


__all__ = ["InlineRuns"]
