"""The claim of a hook call's run: taken only when the run is about to send something outside.

A run that sends nothing outside the process (rules, the World, a write refused before any
request) has nothing a twin could duplicate: its row is inserted once, with its outcome, trace,
proof, source versions and effect log, in one transaction at the end (``HookService``). The
unique ``(service_id, hook_instance)`` key decides which of two concurrent twins stores its
answer; the other one returns the stored answer.

A run that is about to send something (a FHIR write, a tool whose effects the runtime cannot
see, an LLM Bridge call) claims first: :meth:`RunClaim.ensure` commits the row as ``running``
before the first request leaves, so a twin or a retry finds it and waits for the stored answer
instead of sending the same thing again. The loser of that race gets :class:`ClaimLost` before
it sends anything; the service then answers with the winner's stored response.

The wrappers here put :meth:`RunClaim.ensure` in front of every outside call the runtime makes
on the service's behalf; the commit adapter calls it itself, right before a write leaves (a
refused write sends nothing and claims nothing). :func:`take_over_claim` is the claim of a run
whose process died: its lease (``app.cds.leases``) expired and a retry takes the run over.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Engine

from app.bridge.protocol import Bridge, BridgeResult
from app.cds.leases import LeaseKeeper
from app.ontology.model import ToolDef
from app.store.models import utcnow
from app.store.run_rows import RunColumns
from app.store.runs import RunStore
from app.tools.invoker import ToolInvoker, scheme_of

log = logging.getLogger("horismos.leases")


class ClaimLost(Exception):
    """Another call holds this hookInstance: this one must send nothing and answer with the
    other call's stored response."""


class RunClaim:
    """One hook call's run row; :meth:`ensure` claims it (once) before anything leaves.

    With a :class:`~app.cds.leases.LeaseKeeper` the claim is a lease: the row is inserted with
    this claim as ``lease_owner``, renewed while the run works, and every later outside call
    and the final update are fenced (they find out when a retry took the run over after the
    lease expired, and then send and store nothing). :meth:`taken_over` builds the claim of a
    run taken over from a dead process."""

    def __init__(
        self,
        engine: Engine,
        row: Mapping[str, Any],
        *,
        leases: LeaseKeeper | None = None,
        guard: Callable[[Connection], object] | None = None,
    ) -> None:
        #: the ``runs`` columns that identify the run (id, service, hookInstance, digest, …)
        self.row = dict(row)
        self.engine = engine
        self.store = RunStore.of(engine)
        self.leases = leases
        #: this claim's lease owner token (a claim per call: two calls never share one)
        self.owner = uuid.uuid4().hex
        self.claimed = False
        self.lost = False
        #: the run was taken over from a claim whose process died (its effects may have left)
        self.resumed = False
        #: checked in the claim's transaction: raises when the run may not be claimed (the
        #: deployment's version moved: ``app.deployments.catalog.VersionMoved``)
        self.guard = guard
        #: the guard refused the claim: nothing was stored or sent, the call runs again
        self.moved = False
        self._lock = threading.Lock()

    @classmethod
    def taken_over(
        cls, engine: Engine, row: Mapping[str, Any], *, owner: str, leases: LeaseKeeper | None
    ) -> RunClaim:
        """The claim of a run this call has just taken over (``RunStore.take_over``)."""
        claim = cls(engine, row, leases=leases)
        claim.owner = owner
        claim.claimed = True
        claim.resumed = True
        if leases is not None:
            leases.hold(owner, claim.run_id)
        return claim

    @property
    def run_id(self) -> str:
        return str(self.row["id"])

    def _lease_columns(self) -> dict[str, Any]:
        if self.leases is None:
            return {}
        return {"lease_owner": self.owner, "lease_expires_at": self.leases.until()}

    def ensure(self) -> None:
        """Commit the run's row as ``running`` unless done; raise :class:`ClaimLost` when a twin
        holds the hookInstance, or took the run over since. Safe to call from several threads
        of one run."""
        with self._lock:
            if self.claimed and not self.lost:
                if self.leases is None or self.leases.fresh(self.owner):
                    return
                if self.leases.confirm(self.owner):  # the fence: still ours?
                    return
                self.lost = True
            if not self.lost:
                with self.engine.begin() as connection:
                    if self.guard is not None:
                        try:
                            self.guard(connection)
                        except Exception:
                            self.moved = True
                            raise
                    values = {**self.row, "status": "running", **self._lease_columns()}
                    self.claimed = self.store.claim(connection, cast(RunColumns, values))
                self.lost = not self.claimed
                if self.claimed and self.leases is not None:
                    self.leases.hold(self.owner, self.run_id)
            if self.lost:
                raise ClaimLost(
                    f"hookInstance {self.row.get('hook_instance')} is held by another call"
                )

    def record(self, connection: Connection, values: Mapping[str, Any]) -> None:
        """Store the run's final columns in the caller's transaction: an UPDATE of the claimed
        row (fenced by the lease), else the INSERT of the whole row, which is the claim of a
        run that sent nothing. Raises :class:`ClaimLost` when a twin holds the hookInstance or
        took the run over (the caller's transaction must then roll back: nothing of this run
        is stored)."""
        with self._lock:
            if self.claimed and not self.lost:
                owner = self.owner if self.leases is not None else None
                final = {**values, "lease_expires_at": None} if owner else dict(values)
                if not self.store.finish(
                    connection, self.run_id, cast(RunColumns, final), owner=owner
                ):
                    self.lost = True
                    raise ClaimLost(f"run {self.run_id} was taken over by another call")
                return
            row = cast(RunColumns, {**self.row, **values})
            if self.lost or not self.store.claim(connection, row):
                self.lost = True
                raise ClaimLost(
                    f"hookInstance {self.row.get('hook_instance')} is held by another call"
                )

    def release(self) -> None:
        """The run is stored, failed or lost: stop renewing its lease."""
        if self.leases is not None:
            self.leases.release(self.owner)


def take_over_claim(
    engine: Engine, keeper: LeaseKeeper, run_id: str, template: Mapping[str, Any]
) -> RunClaim | None:
    """Take the abandoned run ``run_id`` for a new claim (the columns of ``template``, under
    that run's id); None when another call took it first."""
    owner = uuid.uuid4().hex
    with engine.begin() as connection:
        taken = RunStore.of(engine).take_over(
            connection, run_id, owner=owner, until=keeper.until(), now=utcnow()
        )
    if not taken:
        return None
    log.warning("run %s was abandoned by its process; this call takes it over", run_id)
    return RunClaim.taken_over(engine, {**template, "id": run_id}, owner=owner, leases=keeper)


class ClaimFirstTools:
    """A ``ToolPort`` that claims the run before a tool call that may act outside.

    Adapter-mediated tools (a registered scheme handler such as the FHIR commit adapter) claim
    through the handler, right before a request leaves; an adapter scheme with no handler sends
    nothing; a ``horis:pure`` tool (in-process, writes nothing) acts on nothing outside. Every
    other binding (``python:``, ``http:``, ``mcp:`` …) may do anything, so the claim comes
    first."""

    def __init__(self, tools: ToolInvoker, claim: RunClaim) -> None:
        self.tools = tools
        self.claim = claim

    def invoke(
        self,
        tool: ToolDef,
        args: dict[str, Any],
        *,
        timeout: float,
        now: datetime | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        scheme = scheme_of(tool)
        if not tool.pure and scheme != "fhir" and not self.tools.has_scheme(scheme):
            self.claim.ensure()
        return self.tools.invoke(tool, args, timeout=timeout, now=now, run_id=run_id)


class ClaimFirstBridge:
    """A Bridge that claims the run before each call to the model (text leaves the process)."""

    def __init__(self, bridge: Bridge, claim: RunClaim) -> None:
        self.bridge = bridge
        self.claim = claim

    @property
    def model(self) -> str:
        return self.bridge.model

    def extract(
        self,
        text: str,
        schema: Mapping[str, Any],
        *,
        feedback: Sequence[Mapping[str, Any]] = (),
    ) -> BridgeResult[dict[str, Any]]:
        self.claim.ensure()
        return self.bridge.extract(text, schema, feedback=feedback)

    def narrate(
        self, proof_text: str, audience: str | None, style: str | None
    ) -> BridgeResult[str]:
        self.claim.ensure()
        return self.bridge.narrate(proof_text, audience, style)

    def rank(
        self, candidates: Sequence[str], criterion: str, *, text: str | None = None
    ) -> BridgeResult[list[str]]:
        self.claim.ensure()
        return self.bridge.rank(candidates, criterion, text=text)


def claim_first_bridge(bridge: Bridge | None, claim: RunClaim) -> Bridge | None:
    return None if bridge is None else ClaimFirstBridge(bridge, claim)


__all__ = [
    "ClaimFirstBridge",
    "ClaimFirstTools",
    "ClaimLost",
    "RunClaim",
    "claim_first_bridge",
    "take_over_claim",
]
