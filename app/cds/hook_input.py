"""What a hook run read, stored with the run so replay can hydrate it again.

A hook run's input World is what hydration made of the FHIR data the call carried or the service
read (prefetch keys → resources and Bundles, after validation) and of the hook context. The
World alone lets replay re-reason over the same facts; storing the FHIR input itself lets replay
**hydrate again** under another version of the deployment — a changed mapping, unit, code or
value set — and see what the change does to real calls.

:class:`HookInput` is that input: the hook, the service, the context, the prefetch data, the
keys whose search was cut off (so they are read as *truncated* again) and the run's time. It is
stored in ``runs.input`` as compact JSON compressed with zlib (a triage call's ~15 KB of FHIR
takes ~2 KB), in the run's own row and statement: no extra round trip.
:func:`rehydrate` turns it into an input World for any ontology that declares the service, by
the same assembly as the live call (:mod:`app.cds.assemble`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.cds.assemble import CallInput, apply_api_facts, assemble_input
from app.data_notes import Unreadable
from app.fast_json import dumps_bytes
from app.ontology.model import Ontology
from app.runtime.replay import RecordedRun
from app.world.facts import Violation
from app.world.inputs import InputStatus
from app.world.world import World

#: Version of the stored form; read back by :meth:`HookInput.from_bytes`.
INPUT_VERSION = 1
#: zlib level: the fastest, since the cost is paid on every hook call's path.
_LEVEL = 1


class InputUnusable(ValueError):
    """Raised when a stored input cannot be read, or no longer fits the ontology (its service
    or its workflow's focus is gone)."""


@dataclass(frozen=True, kw_only=True)
class HookInput:
    """The validated FHIR input of one hook run and the time it ran."""

    service: str
    hook: str
    context: Mapping[str, Any]
    prefetch: Mapping[str, Any]
    now: str
    #: prefetch keys whose search was cut off → why (absent from inputs stored before it)
    truncated: Mapping[str, str] = field(default_factory=dict)
    #: prefetch keys → the resources left out as not valid FHIR (read as *unread* again)
    invalid: Mapping[str, Sequence[Unreadable]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "v": INPUT_VERSION,
            "service": self.service,
            "hook": self.hook,
            "context": self.context,
            "prefetch": self.prefetch,
            "now": self.now,
        }
        if self.truncated:
            out["truncated"] = dict(self.truncated)
        if self.invalid:
            out["invalid"] = {k: [u.to_json() for u in v] for k, v in self.invalid.items()}
        return out

    def to_bytes(self) -> bytes:
        """The stored form: compact JSON, zlib-compressed."""
        return zlib.compress(dumps_bytes(self.to_json()), _LEVEL)

    @classmethod
    def from_bytes(cls, raw: bytes) -> HookInput:
        try:
            data = json.loads(zlib.decompress(raw).decode("utf-8"))
            return cls(
                service=str(data["service"]),
                hook=str(data["hook"]),
                context=dict(data["context"]),
                prefetch=dict(data["prefetch"]),
                now=str(data["now"]),
                truncated={str(k): str(v) for k, v in dict(data.get("truncated") or {}).items()},
                invalid={
                    str(k): [
                        Unreadable(
                            reference=str(u["reference"]),
                            resource_type=str(u["resourceType"]),
                            why=str(u["why"]),
                        )
                        for u in v
                    ]
                    for k, v in dict(data.get("invalid") or {}).items()
                },
            )
        except (zlib.error, ValueError, KeyError, TypeError) as exc:
            raise InputUnusable(f"the stored input cannot be read: {exc}") from None


@dataclass(frozen=True, kw_only=True)
class Rehydrated:
    """An input World built again from a stored input under some ontology."""

    world: World
    text: str | None
    violations: list[Violation]
    #: the input status hydration recorded, as the run would have it now
    inputs: InputStatus = field(default_factory=InputStatus)


def rehydrate(ontology: Ontology, stored: HookInput) -> Rehydrated:
    """Hydrate the stored input again under ``ontology`` (its mappings, units, codes and value
    sets): the World the run would start from if it were called now with that input, read by
    the live call's own :func:`~app.cds.assemble.assemble_input` with no terminology port."""
    try:
        service = ontology.service(stored.service)
    except KeyError:
        raise InputUnusable(f"the ontology declares no CDS service {stored.service!r}") from None
    workflow = ontology.workflow(service.workflow)
    if workflow.focus is None:
        raise InputUnusable(f"{workflow.name} declares no focus")
    assembled = assemble_input(
        CallInput(
            ontology=ontology,
            service=service,
            workflow=workflow,
            context=stored.context,
            data=stored.prefetch,
            now=datetime.fromisoformat(stored.now),
            truncated=stored.truncated,
            invalid=stored.invalid,
            # no port: what the deployment's lists do not settle is not asked again
        )
    )
    return Rehydrated(
        world=assembled.world,
        text=assembled.text,
        violations=assembled.violations,
        inputs=assembled.inputs,
    )


def rehydrated_recording(
    ontology: Ontology, recorded: RecordedRun, stored: HookInput
) -> RecordedRun:
    """``recorded`` with its input World (and text) hydrated again from its stored FHIR input
    under ``ontology``: replaying it shows what a changed mapping, unit or value set does."""
    again = rehydrate(ontology, stored)
    return RecordedRun(
        run_id=recorded.run_id,
        workflow=recorded.workflow,
        input_world=again.world.to_json(),
        text=again.text,
        now=recorded.now,
        outcome=recorded.outcome,
        facts=recorded.facts,
        inputs=again.inputs.to_json(),
    )


__all__ = [
    "INPUT_VERSION",
    "HookInput",
    "InputUnusable",
    "Rehydrated",
    "apply_api_facts",
    "rehydrate",
    "rehydrated_recording",
]
