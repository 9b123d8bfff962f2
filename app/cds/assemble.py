"""A hook call's input read into the World its run starts from: one sequence for the live call and
for replay.

:func:`assemble_input` hydrates what the call carried (the context, each prefetch key's data, the
keys whose search was cut off, the resources left out as not valid FHIR), notes what the free
text would have said when the resource carrying it was not received, records which terminology
answered, and applies the facts to a new World through the gate, noting each refused one in the
input status. The live call (:mod:`app.cds.service`) and every replay that hydrates a stored
input again (:mod:`app.cds.hook_input`: ``POST /runs/{id}/replay`` with ``rehydrate``,
``horismos replay --rehydrate``, a change's sandbox replay, shadow runs) call it, so a replay
reports the input status the call reported.

What differs is only what is given: the live call passes its terminology port and the time
its answers must come by; a replay passes no port, so value-set membership the deployment's
lists do not settle is not asked of a terminology server again (docs/replay.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.data_notes import DataNote, Unreadable
from app.fhir.hydrate import hydrate
from app.fhir.hydration import Hydration
from app.fhir.inputs import note_gate_refusals, note_unread_text
from app.ontology.model import CdsServiceDef, Ontology, WorkflowDef
from app.terminology import Terminology
from app.terminology.choice import used_by_run
from app.terminology.port import TerminologyPort
from app.world.facts import Change, Violation
from app.world.inputs import InputStatus
from app.world.world import World

if TYPE_CHECKING:
    from app.cds.accept import HookCall
    from app.cds.prefetch import Gathered


@dataclass(frozen=True, kw_only=True)
class CallInput:
    """What one hook call gives hydration: the same for the live call and a replay of it."""

    ontology: Ontology
    service: CdsServiceDef
    workflow: WorkflowDef
    context: Mapping[str, Any]
    #: prefetch keys → the resource or Bundle read for it (None: not provided)
    data: Mapping[str, Any]
    now: datetime
    #: prefetch keys whose search was cut off → why
    truncated: Mapping[str, str] = field(default_factory=dict)
    #: prefetch keys → the resources left out as not valid FHIR
    invalid: Mapping[str, Sequence[Unreadable]] = field(default_factory=dict)
    #: resolves code-system aliases (None: the installed terminology)
    terminology: Terminology | None = None
    #: answers value-set membership the lists do not settle (None: the lists alone)
    port: TerminologyPort | None = None
    #: ``time.monotonic()`` after which the port is no longer asked
    port_until: float | None = None

    @classmethod
    def of(cls, call: HookCall, gathered: Gathered, now: datetime, **extra: Any) -> CallInput:
        """The input of an accepted call with its prefetch gathered, at ``now`` (``extra``: the
        terminology and its port, where the caller asks them)."""
        return cls(
            ontology=call.ontology,
            service=call.service,
            workflow=call.workflow,
            context=call.req.context,
            data=gathered.data,
            now=now,
            truncated=gathered.truncated,
            invalid=gathered.invalid,
            **extra,
        )


@dataclass(kw_only=True)
class Assembled:
    """The World a run starts from and what reading the call recorded on the way."""

    given: CallInput
    world: World
    hydration: Hydration
    #: problems found before and at the gate, in that order
    violations: list[Violation]

    @property
    def inputs(self) -> InputStatus:
        """Whether each property's inputs are complete (refusals at the gate included)."""
        return self.hydration.inputs

    @property
    def text(self) -> str | None:
        return self.hydration.text

    @property
    def notes(self) -> list[DataNote]:
        """What was read leniently or left out (the run's data-quality notes)."""
        return self.hydration.notes

    def again(self) -> Assembled:
        """A fresh World from the same reading, for a run that starts over (a claim taken
        over): nothing is read or asked again, and the gate's refusals, the same as the first
        time, are not noted a second time in the input status."""
        return _on_world(self.given, self.hydration, note=False)


def apply_api_facts(
    world: World,
    changes: list[Change],
    problems: list[Violation],
    *,
    inputs: InputStatus | None = None,
) -> None:
    """One ``api`` transaction; facts the gate refuses are dropped one by one and recorded (as
    *refused* inputs of their properties in ``inputs``, when given)."""
    pending = list(changes)
    for _attempt in range(len(pending) + 1):
        result = world.transact(pending, provenance="api")
        if result.ok:
            return
        problems.extend(result.violations)
        if inputs is not None:
            note_gate_refusals(inputs, world.ontology.properties, result.violations)
        bad = {(v.subject, v.property) for v in result.violations}
        # AddInstance has no subject/property: it is only dropped when its instance is refused
        kept = [
            c
            for c in pending
            if (getattr(c, "subject", None), getattr(c, "property", None)) not in bad
        ]
        if len(kept) == len(pending):  # an instance itself was refused: keep nothing of it
            bad_ids = {v.subject for v in result.violations}
            kept = [c for c in pending if getattr(c, "id", None) not in bad_ids]
            kept = [c for c in kept if getattr(c, "subject", None) not in bad_ids]
        if len(kept) == len(pending):
            return
        pending = kept


def assemble_input(given: CallInput) -> Assembled:
    """Read ``given`` into the World its run starts from (the workflow must declare a focus)."""
    ontology, service, workflow = given.ontology, given.service, given.workflow
    if workflow.focus is None:
        raise ValueError(f"{workflow.name} declares no focus")
    hydration = hydrate(
        ontology,
        focus_id=str(given.context.get("patientId")),
        focus_class=workflow.focus,
        data=given.data,
        context=given.context,
        now=given.now,
        texts=service.text,
        prefetch=service.prefetch,
        truncated=given.truncated,
        invalid=given.invalid,
        clock_skew=service.clock_skew,
        terminology=given.terminology,
        port=given.port,
        port_until=given.port_until,
    )
    hydration.terminology = used_by_run(given.port, ontology)
    note_unread_text(
        hydration.inputs,
        ontology,
        workflow,
        texts=service.text,
        prefetch=service.prefetch,
        data=given.data,
    )
    return _on_world(given, hydration)


def _on_world(given: CallInput, hydration: Hydration, *, note: bool = True) -> Assembled:
    world = World(given.ontology, now=given.now)
    problems: list[Violation] = list(hydration.violations)
    inputs = hydration.inputs if note else None
    apply_api_facts(world, hydration.changes, problems, inputs=inputs)
    return Assembled(given=given, world=world, hydration=hydration, violations=problems)


__all__ = ["Assembled", "CallInput", "apply_api_facts", "assemble_input"]
