"""Workflows (``horis:Workflow``) and their steps, with what a step binds, branches on, proposes
and hands to a subflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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


@dataclass(frozen=True, kw_only=True)
class StepDef:
    """One workflow step. Fields not used by ``kind`` keep their defaults."""

    iri: str
    name: str
    kind: StepKind
    terminal: bool = False
    next: str | None = None
    requires: tuple[Condition, ...] = ()
    on_unsatisfied: str | None = None
    # PerceptionStep
    extracts: tuple[str, ...] = ()
    model: str | None = None
    confidence: float | None = None
    fallback: str | None = None  # PerceptionStep, ProposalStep
    retries: int | None = None  # PerceptionStep (default 2), ActionStep (tool's default)
    # ReasoningStep
    goal: tuple[Condition, ...] = ()
    on_unreachable: str | None = None
    on_incomplete: str | None = None  # horis:onIncomplete (falls back to on_unreachable)
    # ActionStep
    tool: str | None = None
    bindings: tuple[ArgBinding, ...] = ()
    on_error: str | None = None
    #: horis:forEach ( path )…: one call per instance reached from the focus (their union)
    for_each: tuple[tuple[str, ...], ...] = ()
    #: horis:where on a horis:forEach step: conditions each instance must satisfy
    each_where: tuple[Condition, ...] = ()
    # NarrationStep
    narrates: str | None = None  # horis:narrates [ horis:property P ]
    audience: str | None = None
    style: str | None = None
    required: bool = False
    # ProposalStep
    candidates: CandidateQuery | None = None
    rank_by: str | None = None
    selects: str | None = None  # horis:selects P: the focus property that receives the choice
    # WaitStep
    awaits: tuple[str, ...] = ()  # horis:awaits P (properties the resume must bring)
    timeout: float | None = None  # seconds (horis:timeout "PT4H" or "30s")
    on_timeout: str | None = None
    # ChoiceStep
    branches: tuple[Branch, ...] = ()
    otherwise: str | None = None  # also SubflowStep: when no outcome matches
    # SubflowStep
    workflow: str | None = None
    outcomes: tuple[SubflowOutcome, ...] = ()
    label: str | None = None  # rdfs:label: what a clinician calls the step

    def edges(self) -> tuple[str, ...]:
        """Every step this one can move to, in a stable order."""
        out = [
            self.next,
            self.on_unsatisfied,
            self.fallback,
            self.on_unreachable,
            self.on_incomplete,
            self.on_error,
            self.on_timeout,
            *(b.next for b in self.branches),
            self.otherwise,
            *(o.next for o in self.outcomes),
        ]
        return tuple(dict.fromkeys(e for e in out if e is not None))


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
