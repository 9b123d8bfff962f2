"""Workflows (``horis:Workflow``) and their steps, with what a step binds, branches on, proposes
and hands to a subflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from app.ontology.rules import Condition

StepKind = Literal[
    "Step",  # a plain terminal step (horis:Step ; horis:terminal true)
    "PerceptionStep",
    "ReasoningStep",
    "ActionStep",
    "NarrationStep",
    "ProposalStep",
    "WaitStep",
    "ChoiceStep",
    "SubflowStep",
]


@dataclass(frozen=True, kw_only=True)
class ArgBinding:
    """``horis:bind [ horis:arg "queue" ; horis:property :acuity ]`` or ``… horis:focus true``."""

    arg: str
    property: str | None = None
    focus: bool = False


@dataclass(frozen=True, kw_only=True)
class Branch:
    """One ChoiceStep branch: ``[ horis:when [ … ] ; horis:next S ]``."""

    when: tuple[Condition, ...]
    next: str


@dataclass(frozen=True, kw_only=True)
class CandidateQuery:
    """``horis:candidates [ horis:path (:hasOption) ; horis:where ( … ) ]``.

    Candidates are the values reached from the focus along ``path`` (or, with ``class_iri``,
    every instance of that class) for which every ``where`` condition holds on the candidate.
    """

    path: tuple[str, ...] = ()
    class_iri: str | None = None  # horis:class
    where: tuple[Condition, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SubflowOutcome:
    """``horis:outcome [ horis:terminal :SubDone ; horis:next :ParentStep ]``."""

    terminal: str
    next: str


def _present(*edges: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e for e in edges if e is not None))


@dataclass(frozen=True, kw_only=True)
class StepBase:
    """What every step has: its name, whether the run ends on it, where it goes next, and the
    conditions it requires before its body runs. Each step kind is a subclass with its own
    fields; :data:`StepDef` is their union, so code that reads a kind's field says which kind."""

    kind: ClassVar[StepKind]
    iri: str
    name: str
    terminal: bool = False
    next: str | None = None
    requires: tuple[Condition, ...] = ()
    on_unsatisfied: str | None = None
    label: str | None = None  # rdfs:label: what a clinician calls the step

    def edges(self) -> tuple[str, ...]:
        """Every step this one can move to, in a stable order."""
        return _present(self.next, self.on_unsatisfied, *self._own_edges())

    def _own_edges(self) -> tuple[str | None, ...]:
        return ()

    def conditions(self) -> tuple[tuple[str, Condition], ...]:
        """The conditions the step decides on (requirements, a goal, branches), each with the
        predicate it hangs from."""
        return (*(("horis:requires", c) for c in self.requires), *self._own_conditions())

    def _own_conditions(self) -> tuple[tuple[str, Condition], ...]:
        return ()


@dataclass(frozen=True, kw_only=True)
class PlainStep(StepBase):
    """``horis:Step``: no body; a terminal step, or one that only follows ``next``."""

    kind: ClassVar[StepKind] = "Step"


@dataclass(frozen=True, kw_only=True)
class PerceptionStep(StepBase):
    """``horis:PerceptionStep``: a model reads text into the typed facts ``extracts`` names."""

    kind: ClassVar[StepKind] = "PerceptionStep"
    extracts: tuple[str, ...] = ()
    model: str | None = None
    confidence: float | None = None
    fallback: str | None = None
    retries: int | None = None  # default PERCEPTION_RETRIES

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.fallback,)


@dataclass(frozen=True, kw_only=True)
class ReasoningStep(StepBase):
    """``horis:ReasoningStep``: the rules decide whether ``goal`` holds."""

    kind: ClassVar[StepKind] = "ReasoningStep"
    goal: tuple[Condition, ...] = ()
    on_unreachable: str | None = None
    on_incomplete: str | None = None  # horis:onIncomplete (falls back to on_unreachable)

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.on_unreachable, self.on_incomplete)

    def _own_conditions(self) -> tuple[tuple[str, Condition], ...]:
        return tuple(("horis:goal", c) for c in self.goal)


@dataclass(frozen=True, kw_only=True)
class ActionStep(StepBase):
    """``horis:ActionStep``: one call of ``tool`` (or one per ``for_each`` instance)."""

    kind: ClassVar[StepKind] = "ActionStep"
    tool: str | None = None
    bindings: tuple[ArgBinding, ...] = ()
    on_error: str | None = None
    retries: int | None = None  # default: the tool's
    #: horis:forEach ( path )…: one call per instance reached from the focus (their union)
    for_each: tuple[tuple[str, ...], ...] = ()
    #: horis:where on a horis:forEach step: conditions each instance must satisfy
    each_where: tuple[Condition, ...] = ()

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.on_error,)


@dataclass(frozen=True, kw_only=True)
class NarrationStep(StepBase):
    """``horis:NarrationStep``: a model tells the proof of ``narrates`` in words."""

    kind: ClassVar[StepKind] = "NarrationStep"
    narrates: str | None = None  # horis:narrates [ horis:property P ]
    model: str | None = None
    audience: str | None = None
    style: str | None = None
    required: bool = False
    on_error: str | None = None  # where a required narration's failure goes

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.on_error,)


@dataclass(frozen=True, kw_only=True)
class ProposalStep(StepBase):
    """``horis:ProposalStep``: a model ranks the legal ``candidates``; the choice is recorded
    on ``selects``."""

    kind: ClassVar[StepKind] = "ProposalStep"
    candidates: CandidateQuery | None = None
    rank_by: str | None = None
    selects: str | None = None  # horis:selects P: the focus property that receives the choice
    model: str | None = None
    confidence: float | None = None
    fallback: str | None = None

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.fallback,)


@dataclass(frozen=True, kw_only=True)
class WaitStep(StepBase):
    """``horis:WaitStep``: the run suspends until a resume brings ``awaits``."""

    kind: ClassVar[StepKind] = "WaitStep"
    awaits: tuple[str, ...] = ()  # horis:awaits P (properties the resume must bring)
    timeout: float | None = None  # seconds (horis:timeout "PT4H" or "30s")
    on_timeout: str | None = None

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.on_timeout,)


@dataclass(frozen=True, kw_only=True)
class ChoiceStep(StepBase):
    """``horis:ChoiceStep``: the first branch whose conditions hold, else ``otherwise``."""

    kind: ClassVar[StepKind] = "ChoiceStep"
    branches: tuple[Branch, ...] = ()
    otherwise: str | None = None

    def _own_edges(self) -> tuple[str | None, ...]:
        return (*(b.next for b in self.branches), self.otherwise)

    def _own_conditions(self) -> tuple[tuple[str, Condition], ...]:
        return tuple(("horis:branches", c) for b in self.branches for c in b.when)


@dataclass(frozen=True, kw_only=True)
class SubflowStep(StepBase):
    """``horis:SubflowStep``: runs ``workflow``; its terminal step picks the outcome."""

    kind: ClassVar[StepKind] = "SubflowStep"
    workflow: str | None = None
    outcomes: tuple[SubflowOutcome, ...] = ()
    otherwise: str | None = None  # when no outcome matches

    def _own_edges(self) -> tuple[str | None, ...]:
        return (self.otherwise, *(o.next for o in self.outcomes))


#: a compiled step, one class per kind
StepDef = (
    PlainStep
    | PerceptionStep
    | ReasoningStep
    | ActionStep
    | NarrationStep
    | ProposalStep
    | WaitStep
    | ChoiceStep
    | SubflowStep
)

#: the class of each step kind: a new kind adds its class here (and its body to the runtime)
STEP_CLASSES: dict[StepKind, type[StepDef]] = {
    c.kind: c
    for c in (
        PlainStep,
        PerceptionStep,
        ReasoningStep,
        ActionStep,
        NarrationStep,
        ProposalStep,
        WaitStep,
        ChoiceStep,
        SubflowStep,
    )
}


@dataclass(frozen=True, kw_only=True)
class WorkflowDef:
    """``W a horis:Workflow``."""

    iri: str
    name: str
    starts_at: str
    steps: dict[str, StepDef] = field(default_factory=dict)  # every step reachable from start
    decides: str | None = None
    focus: str | None = None
    version: str = "0"
