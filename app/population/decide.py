"""One patient of a population decided exactly as a hook call with that patient's data as
prefetch: the same request parsing (``accept``), prefetch reading (``gather``), hydration
(``assemble_input``), interpreter and card rendering (``render``) — no second implementation.
What differs is what a population run has no use for: no JWT (nobody calls), no FHIR server
(every template is answered from the patient's data, ``app.population.bulk``), nothing stored
and nothing written to an EHR (the run's writes have no handler), and no decision-record link
on the cards (no run record is kept: the row is the record).

Only services whose hook context a population can build are run: ``patient-view``, whose
context is the patient (and a user, which a population run names ``POPULATION_USER``). A hook
that needs a draft order, an encounter or an appointment is refused with a message naming what
is missing.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from app.cds.accept import HookCall, accept
from app.cds.assemble import CallInput, assemble_input
from app.cds.card_parts import RUN_LINK_PREFIX
from app.cds.errors import CdsError
from app.cds.prefetch import gather
from app.cds.render import render
from app.deployments import Deployments
from app.fhir_json import resources_of
from app.population.bulk import TemplateUnsupported, answer_template
from app.runtime import run_workflow
from app.runtime.outcome import Outcome
from app.runtime.runner import Runner
from app.terminology import Terminology

#: hooks whose context is the patient (and the user) alone: a population can build it
POPULATION_HOOKS = ("patient-view",)
#: the user a population run's requests name (CDS Hooks requires a user for patient-view)
POPULATION_USER = "Practitioner/horismos-population"
#: the columns of a population run's decisions
COLUMNS = (
    "patient_id",
    "service_id",
    "decision",
    "undecided",
    "terminal",
    "cards",
    "input_digest",
    "deployment_version",
    "error",
    "proof",
)
_NAMESPACE = uuid.UUID("2f1d0c4e-8a51-4f7e-9d3b-6a0c5e7b1f20")


class ServiceRefused(ValueError):
    """A service a population run cannot run, and why."""


def comparable(cards: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Cards as two runs' answers are compared: without what is per run (the card and
    suggestion ``uuid``\\ s, the decision-record links; the pages a card links to are
    compared)."""
    out = []
    for card in cards:
        kept = {k: v for k, v in card.items() if k not in ("uuid", "links")}
        pages = [
            link
            for link in card.get("links") or ()
            if not str(link.get("label", "")).startswith(RUN_LINK_PREFIX)
        ]
        if pages:
            kept["links"] = pages
        if "suggestions" in kept:
            kept["suggestions"] = [
                {k: v for k, v in s.items() if k != "uuid"} for s in kept["suggestions"]
            ]
        out.append(kept)
    return out


@dataclass
class PatientDecider:
    """Decides one service for one patient at a time, on one set of deployments."""

    deployments: Deployments
    service_id: str
    at: datetime
    runner: Runner
    #: resolves code-system aliases as hydration does (None: the installed snapshot)
    terminology: Terminology | None = None

    def __post_init__(self) -> None:
        found = next((s for s, _d in self.deployments.services() if s.id == self.service_id), None)
        if found is None:
            raise ServiceRefused(f"no served CDS service {self.service_id!r}")
        if found.hook not in POPULATION_HOOKS:
            raise ServiceRefused(
                f"{self.service_id} answers {found.hook}, whose context needs more than the "
                f"patient (a draft order, an encounter): a population run builds "
                f"{', '.join(POPULATION_HOOKS)} calls only"
            )
        self.service = found
        self._loop = asyncio.new_event_loop()

    def close(self) -> None:
        self._loop.close()

    def request(
        self,
        patient: str,
        resources: Sequence[Mapping[str, Any]],
        shared: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        """The hook request a live call would carry: its context and, for every template, the
        patient's data as the EHR's FHIR server answers it."""
        return {
            "hook": self.service.hook,
            "hookInstance": str(uuid.uuid5(_NAMESPACE, f"{self.service_id}|{patient}|{self.at}")),
            "context": {"patientId": patient, "userId": POPULATION_USER},
            "prefetch": {
                t.key: answer_template(t.query, patient, resources, shared)
                for t in self.service.prefetch
            },
        }

    def decide(
        self,
        patient: str,
        resources: Sequence[Mapping[str, Any]],
        shared: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        """The patient's row: the decision and cards, or the reason none could be made."""
        row: dict[str, Any] = dict.fromkeys(COLUMNS)
        row.update(patient_id=patient, service_id=self.service_id)
        try:
            body = self.request(patient, resources, shared)
            row.update(self._run(body))
        except (CdsError, TemplateUnsupported) as exc:
            row["error"] = str(getattr(exc, "message", None) or exc)
        except Exception as exc:  # a bad record never stops a population: its row says so
            row["error"] = f"the run failed: {type(exc).__name__}: {exc}"
        return row

    def _run(self, body: dict[str, Any]) -> dict[str, Any]:
        answered = answer_in_process(
            self.deployments,
            self.service_id,
            body,
            at=self.at,
            runner=self.runner,
            loop=self._loop,
            terminology=self.terminology,
        )
        outcome, call = answered.outcome, answered.call
        cards = comparable(answered.response["cards"])
        return {
            "decision": json.dumps(outcome.decision.to_json(), sort_keys=True, default=str)
            if outcome.decision
            else None,
            "undecided": json.dumps(outcome.undecided.to_json(), sort_keys=True, default=str)
            if outcome.undecided
            else None,
            "terminal": outcome.terminal,
            "cards": json.dumps(cards, sort_keys=True),
            "input_digest": call.digest,
            "deployment_version": call.deployment.version,
            "proof": json.dumps(outcome.proof, sort_keys=True, default=str)
            if outcome.proof
            else None,
        }


@dataclass(frozen=True, kw_only=True)
class Answered:
    """A hook request answered in-process: the call, the run's outcome and the response."""

    call: HookCall
    outcome: Outcome
    response: dict[str, Any]


def answer_in_process(
    deployments: Deployments,
    service_id: str,
    body: dict[str, Any],
    *,
    at: datetime,
    runner: Runner,
    loop: asyncio.AbstractEventLoop,
    terminology: Terminology | None = None,
) -> Answered:
    """``body`` (every prefetch template answered) through the hook call's own stages —
    ``accept``, ``gather``, ``assemble_input``, the interpreter and ``render`` — with no JWT,
    no FHIR server, no store and no EHR write; the cards link to no decision record.
    ``terminology`` resolves code-system aliases (the installed snapshot when not given)."""
    call = loop.run_until_complete(
        accept(deployments, service_id, body, authenticator=None, authorization=None, audience="")
    )
    gathered = loop.run_until_complete(
        gather(
            call.service.prefetch,
            call.req,
            cast(Any, None),  # every template is answered: nothing is read from a server
            readers=cast(Any, None),
            deadline=0.0,
        )
    )
    assembled = assemble_input(CallInput.of(call, gathered, at, terminology=terminology))
    run_id = str(uuid.uuid4())
    ctx = runner.context(
        run_id=run_id, now=at, text=assembled.hydration.text, inputs=assembled.hydration.inputs
    )
    outcome = run_workflow(call.ontology, call.workflow.iri, assembled.world, ctx)
    rendered = render(
        call,
        outcome,
        assembled.world,
        violations=assembled.violations,
        notices=[],
        resources=[r for v in gathered.data.values() for r in resources_of(v)],
        run_url=f"urn:uuid:{run_id}",
        zone=UTC,
    )
    return Answered(call=call, outcome=outcome, response=rendered.response)


__all__ = [
    "COLUMNS",
    "POPULATION_HOOKS",
    "Answered",
    "PatientDecider",
    "ServiceRefused",
    "answer_in_process",
    "comparable",
]
