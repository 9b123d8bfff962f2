"""The lifecycle of a change to a deployment: propose → replay → approve → activate (→ rollback).

Each step is a function of :class:`ChangeControl` that the CLI (``horismos change …``) and the
API (``/changes``) both call; each refuses with a reason (:class:`ChangeRefused`) when the
change is not in a state that allows it, and every state a change enters is stored with who
moved it there and when (``change_events``):

- ``proposed`` — the envelope passed the deterministic policy (:mod:`app.changes.policy`);
  ``refused`` when it did not (stored too, with the reason);
- ``replayed`` — the last N runs of the deployment were decided again on the candidate in a
  resource-limited subprocess (:mod:`app.changes.sandbox`);
- ``approved`` — a symbolic authorization: a reviewer who holds the approver role, never the
  author, after policy and replay; the change then runs in shadow mode beside the active
  version on live hooks (:mod:`app.changes.shadow`);
- ``active`` — the deployment's active version for new hook calls, in every worker
  (``deployment_state``, bumped generation); the change it replaced is ``superseded``;
- a rollback makes the active change ``superseded`` and its predecessor active again.

A model may author a change (:meth:`ChangeControl.draft`), never apply one: its envelope takes
the same path and needs the same human approval.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.bridge.protocol import Bridge, BridgeError
from app.changes import policy
from app.changes.envelope import DRAFT_SCHEMA, ChangeEnvelope, ChangeEventView, ChangeView
from app.changes.new_deployment import NEW, check_new, empty_replay
from app.changes.sandbox import Limits, SandboxFailed, encode_input, job_of, run_job
from app.deployments import Deployment
from app.deployments.catalog import Catalog, ChangeUnbuildable
from app.errors import ClientError
from app.store import changes as store
from app.store import repo
from app.store.models import Change, DeploymentState, new_id, utcnow

#: The JWT scope that holds the approver role over HTTP (approve, activate, rollback).
APPROVE_SCOPE = "horismos/changes.approve"
#: How many of a deployment's last runs a replay decides again unless told otherwise.
DEFAULT_LAST = 50
MAX_LAST = 1000


class ChangeRefused(ClientError):
    """A step of a change's lifecycle was refused; ``change`` is the change as stored now
    (None when there is no such change)."""

    def __init__(
        self, status: int, step: str, reason: str, change: ChangeView | None = None
    ) -> None:
        super().__init__(status, "refused", step, reason)
        self.step = step
        self.change = change

    def extensions(self) -> dict[str, Any]:
        if self.change is None:
            return {}
        return {"change": self.change.model_dump(mode="json")}

    def to_json(self, change_id: str | None = None) -> dict[str, Any]:
        """One JSON object for the CLI: the change (or its id), ``status`` and ``reason``."""
        if self.change is not None:
            return {**self.change.model_dump(mode="json"), "reason": self.message}
        return {"id": change_id, "status": "unknown", "reason": self.message}


@dataclass(kw_only=True)
class ChangeControl:
    """Every step of a change, against one database and the process's deployments."""

    engine: Engine
    catalog: Catalog
    #: names that hold the approver role (``HORISMOS_CHANGE_APPROVERS``)
    approvers: Collection[str] = field(default_factory=frozenset)
    limits: Limits = field(default_factory=Limits)

    # --- reading --------------------------------------------------------------------------

    def view(self, change_id: str) -> ChangeView:
        with Session(self.engine) as session:
            change = store.get_change(session, change_id)
            if change is None:
                raise ChangeRefused(404, "id", f"no change {change_id}")
            return self._view(session, change)

    def views(self, deployment: str | None = None) -> list[ChangeView]:
        with Session(self.engine) as session:
            iri = None
            if deployment is not None:
                found = self.catalog.release.find(deployment)
                iri = found.iri if found is not None else deployment
            return [self._view(session, c) for c in store.list_changes(session, deployment=iri)]

    def _view(self, session: Session, change: Change, reason: str | None = None) -> ChangeView:
        events = store.list_events(session, change.id)
        last_refusal = next(
            (e.detail.get("reason") for e in reversed(events) if e.detail and "reason" in e.detail),
            None,
        )
        replay = change.replay
        return ChangeView(
            id=change.id,
            status=change.status,
            deployment=change.deployment,
            deploymentId=change.deployment_id,
            baseDigest=change.base_digest,
            baseVersion=change.base_version,
            candidateDigest=change.candidate_digest,
            candidateVersion=change.candidate_version,
            author=change.author,
            rationale=change.rationale,
            origin=change.origin,
            files=sorted(change.files),
            reason=reason or last_refusal,
            policy=change.policy,
            replay=replay,
            changed=list(replay.get("changed", [])) if replay else None,
            replaces=change.replaces,
            shadow=self._shadow(session, change.id),
            events=[
                ChangeEventView(state=e.state, actor=e.actor, at=e.at, detail=e.detail)
                for e in events
            ],
            createdAt=change.created_at,
            updatedAt=change.updated_at,
        )

    @staticmethod
    def _shadow(session: Session, change_id: str) -> dict[str, Any] | None:
        results = store.shadow_results(session, change_id)
        if not results:
            return None
        disagree = [r for r in results if r.agree is False]
        return {
            "runs": len(results),
            "agree": sum(1 for r in results if r.agree),
            "disagree": len(disagree),
            "errors": sum(1 for r in results if r.error),
            "disagreements": [
                {"runId": r.run_id, "before": r.before, "after": r.after} for r in disagree[-20:]
            ],
        }

    def _refuse(
        self, session: Session, change: Change, status: int, step: str, reason: str, actor: str
    ) -> ChangeRefused:
        """Record the refused step on the change (it stays as it was) and build the error."""
        store.add_event(
            session, change.id, change.status, actor, {"refused": step, "reason": reason}
        )
        session.commit()
        return ChangeRefused(status, step, reason, self._view(session, change, reason))

    def _load(self, session: Session, change_id: str) -> Change:
        change = store.get_change(session, change_id, for_update=True)
        if change is None:
            raise ChangeRefused(404, "id", f"no change {change_id}")
        return change

    def _active(self, session: Session, deployment_iri: str) -> Deployment | None:
        """The deployment's active version, read in ``session`` (SQLite has one connection
        per process: a step never opens a second one while it holds the first)."""
        release = self.catalog.release.find(deployment_iri)
        if release is None:  # a deployment a change created: served while one is active
            created = session.get(DeploymentState, deployment_iri)
            if created is None or created.active_change_id is None:
                return None
            try:
                return self.catalog.version(session, created.active_change_id)
            except ChangeUnbuildable:
                return None
        state = session.get(DeploymentState, release.iri)
        if state is None or state.active_change_id is None:
            return release
        try:
            return self.catalog.version(session, state.active_change_id)
        except ChangeUnbuildable:
            return release

    # --- propose --------------------------------------------------------------------------

    def propose(self, envelope: ChangeEnvelope, *, origin: str = "human") -> ChangeView:
        """Check the envelope and store the change, ``proposed`` or ``refused`` (then raise)."""
        deployments = self.catalog.refresh(self.engine)
        target = deployments.find(envelope.deployment)
        creates = envelope.baseDigest == NEW
        with Session(self.engine) as session:
            material = None
            if target is not None:
                try:
                    material = self.catalog.active_material(session, target)
                except ChangeUnbuildable as exc:
                    raise ChangeRefused(409, "deployment", str(exc)) from None
            if creates:
                created_id = PurePosixPath(envelope.files[0].path).stem
                verdict = check_new(envelope, created_id, deployments, self.catalog.packaged)
            else:
                verdict = policy.check(envelope, deployments, material, self.catalog.packaged)
            candidate = verdict.candidate
            change = Change(
                id=new_id(),
                deployment=target.iri if target is not None else envelope.deployment,
                deployment_id=target.id
                if target is not None
                else (created_id if creates else envelope.deployment),
                base_digest=envelope.baseDigest,
                base_version=target.version if target is not None else None,
                base_change_id=target.change_id if target is not None else None,
                files={f.path: f.content for f in envelope.files},
                candidate_digest=candidate.digest if candidate else None,
                candidate_version=candidate.version if candidate else None,
                author=envelope.author,
                rationale=envelope.rationale,
                origin=origin,
                status="proposed" if verdict.passed else "refused",
                policy=verdict.to_json(),
                created_at=utcnow(),
                updated_at=utcnow(),
            )
            session.add(change)
            detail = {"reason": verdict.reason} if verdict.reason else None
            store.add_event(session, change.id, change.status, envelope.author, detail)
            session.commit()
            view = self._view(session, change)
        if not verdict.passed:
            raise ChangeRefused(422, "policy", verdict.reason or "refused", view)
        return view

    # --- replay ---------------------------------------------------------------------------

    def replay(self, change_id: str, *, last: int = DEFAULT_LAST, actor: str) -> ChangeView:
        """Decide the deployment's last ``last`` runs again on the candidate, in the sandbox;
        the report lists every decision that changes with both proofs, and counts the rest."""
        if not 1 <= last <= MAX_LAST:
            raise ChangeRefused(400, "last", f"--last must be between 1 and {MAX_LAST}")
        with Session(self.engine) as session:
            change = self._load(session, change_id)
            if change.status not in ("proposed", "replayed"):
                raise self._refuse(
                    session,
                    change,
                    409,
                    "replay",
                    f"change {change.id} is {change.status}: a change is replayed after its "
                    "policy check and before its approval",
                    actor,
                )
            active = self._active(session, change.deployment)
            if change.base_digest == NEW and active is None:
                # a deployment it creates: no active version to replay its runs on
                report = empty_replay(change.candidate_digest)
                return self._replayed(session, change, report, last, actor)
            if active is None or active.digest != change.base_digest:
                raise self._refuse(session, change, 409, "base", _moved(change, active), actor)
            base = self.catalog.active_material(session, active)
            candidate = base.with_files(dict(change.files))
            runs = [
                {
                    "runId": run.id,
                    "recording": _recording(session, run),
                    "input": encode_input(run.input),
                }
                for run in store.runs_to_replay(session, change.deployment, last=last)
            ]
            session.rollback()  # no lock held while the sandbox runs
        try:
            report = run_job(job_of(base.to_json(), candidate.to_json(), runs), self.limits)
        except SandboxFailed as exc:
            report = {"error": str(exc)}
        with Session(self.engine) as session:
            change = self._load(session, change_id)
            if "error" in report:
                raise self._refuse(session, change, 422, "replay", str(report["error"]), actor)
            if report.get("candidateDigest") != change.candidate_digest:
                raise self._refuse(
                    session,
                    change,
                    422,
                    "replay",
                    "the sandbox built another candidate than the policy checked",
                    actor,
                )
            return self._replayed(session, change, report, last, actor)

    def _replayed(
        self, session: Session, change: Change, report: dict[str, Any], last: int, actor: str
    ) -> ChangeView:
        """Store the replay's report on ``change``, now ``replayed``."""
        report = {**report, "last": last, "at": utcnow().isoformat()}
        change.replay = report
        change.status = "replayed"
        change.updated_at = utcnow()
        store.add_event(
            session,
            change.id,
            "replayed",
            actor,
            {
                "replayed": report["replayed"],
                "changed": len(report["changed"]),
                "same": report["same"],
                "errors": len(report["errors"]),
            },
        )
        session.commit()
        return self._view(session, change)

    # --- approve, activate, rollback ------------------------------------------------------

    def approve(self, change_id: str, *, reviewer: str, by_scope: bool = False) -> ChangeView:
        """A symbolic authorization by a reviewer who holds the approver role (a name in the
        approvers, or over HTTP a JWT with :data:`APPROVE_SCOPE`), never the author, of a change
        that passed its policy check and its replay. It then runs in shadow mode."""
        with Session(self.engine) as session:
            change = self._load(session, change_id)
            if change.status != "replayed":
                raise self._refuse(
                    session,
                    change,
                    409,
                    "approve",
                    f"change {change.id} is {change.status}: a change is approved only after "
                    "its policy check and its replay passed",
                    reviewer,
                )
            if reviewer == change.author:
                raise self._refuse(
                    session,
                    change,
                    403,
                    "approve",
                    f"{reviewer} wrote change {change.id}: its author cannot approve it",
                    reviewer,
                )
            if not by_scope and reviewer not in self.approvers:
                raise self._refuse(
                    session,
                    change,
                    403,
                    "approve",
                    f"{reviewer} does not hold the approver role (HORISMOS_CHANGE_APPROVERS"
                    f" or the {APPROVE_SCOPE} scope)",
                    reviewer,
                )
            active = self._active(session, change.deployment)
            if not _on_base(change, active.digest if active is not None else None):
                raise self._refuse(session, change, 409, "base", _moved(change, active), reviewer)
            change.status = "approved"
            change.updated_at = utcnow()
            store.add_event(session, change.id, "approved", reviewer)
            store.set_shadow(session, change.deployment, change.id)
            session.commit()
            view = self._view(session, change)
        self.catalog.refresh(self.engine)
        return view

    def activate(self, change_id: str, *, actor: str) -> ChangeView:
        """Make an approved change the deployment's active version for every new hook call, in
        every worker: one transaction bumps the deployment's generation."""
        with Session(self.engine) as session:
            change = self._load(session, change_id)
            if change.status != "approved":
                raise self._refuse(
                    session,
                    change,
                    409,
                    "activate",
                    f"change {change.id} is {change.status}: only an approved change is activated",
                    actor,
                )
            state = store.lock_state(session, change.deployment)
            active = self._active_digest(session, change.deployment, state.active_change_id)
            if not _on_base(change, active):
                raise self._refuse(
                    session, change, 409, "base", _moved(change, None, active), actor
                )
            try:
                self.catalog.version(session, change.id)
            except ChangeUnbuildable as exc:
                raise self._refuse(session, change, 409, "activate", str(exc), actor) from None
            previous = state.active_change_id
            if previous is not None:
                before = store.get_change(session, previous, for_update=True)
                if before is not None:
                    before.status = "superseded"
                    before.updated_at = utcnow()
                    store.add_event(session, before.id, "superseded", actor, {"by": change.id})
            state.generation += 1
            state.active_change_id = change.id
            if state.shadow_change_id == change.id:
                state.shadow_change_id = None
            state.updated_at = utcnow()
            change.replaces = previous
            change.status = "active"
            change.updated_at = utcnow()
            store.add_event(
                session,
                change.id,
                "active",
                actor,
                {"generation": state.generation, "version": change.candidate_version},
            )
            session.commit()
            view = self._view(session, change)
        self.catalog.refresh(self.engine)
        return view

    def rollback(self, deployment: str, *, actor: str) -> ChangeView:
        """Return a deployment to the version before its active change (a previous change, or
        its release files); the rolled-back change is ``superseded``."""
        release = self.catalog.release.find(deployment)
        # a deployment a change created (none in the release): rolling its first change back
        # withdraws it
        target = release or self.catalog.refresh(self.engine).find(deployment)
        if target is None:
            raise ChangeRefused(404, "deployment", f"no deployment {deployment!r}")
        with Session(self.engine) as session:
            state = store.lock_state(session, target.iri)
            if state.active_change_id is None:
                session.rollback()
                raise ChangeRefused(
                    409,
                    "rollback",
                    f"deployment {target.id} runs its release files ({target.version}): "
                    "there is no change to roll back",
                )
            change = self._load(session, state.active_change_id)
            previous = change.replaces
            change.status = "superseded"
            change.updated_at = utcnow()
            store.add_event(
                session,
                change.id,
                "superseded",
                actor,
                {
                    "rolledBack": True,
                    "restores": previous
                    or (f"release {release.version}" if release else "none: withdrawn"),
                },
            )
            if previous is not None:
                restored = store.get_change(session, previous, for_update=True)
                if restored is not None:
                    restored.status = "active"
                    restored.updated_at = utcnow()
                    store.add_event(
                        session, restored.id, "active", actor, {"rollbackOf": change.id}
                    )
            state.generation += 1
            state.active_change_id = previous
            state.updated_at = utcnow()
            session.commit()
            view = self._view(session, change)
        self.catalog.refresh(self.engine)
        return view

    def _active_digest(self, session: Session, iri: str, active_change: str | None) -> str | None:
        if active_change is None:
            release = self.catalog.release.find(iri)
            return release.digest if release is not None else None
        found = store.get_change(session, active_change)
        return found.candidate_digest if found is not None else None

    # --- a model drafts, humans decide ----------------------------------------------------

    def draft(self, service_id: str, *, bridge: Bridge | None) -> ChangeView:
        """Ask the Bridge for an envelope that answers clinicians' override reasons on the
        service's cards; it then goes through the same policy (and later replay and human
        approval) as any proposal. Its author is the model."""
        if bridge is None:
            raise ChangeRefused(409, "bridge", "no Bridge is configured (HORISMOS_BRIDGE_MODEL)")
        target = self.catalog.refresh(self.engine).for_service(service_id)
        if target is None:
            raise ChangeRefused(404, "service", f"no CDS service {service_id!r} is declared")
        with Session(self.engine) as session:
            reasons = store.override_reasons(session, service_id)
            if not reasons:
                raise ChangeRefused(
                    409,
                    "feedback",
                    f"no feedback on {service_id}'s cards gives an override reason to draft from",
                )
            material = self.catalog.active_material(session, target)
        text = _draft_prompt(target, {p: material.files[p] for p in material.own}, reasons)
        try:
            answer = bridge.extract(text, DRAFT_SCHEMA)
        except BridgeError as exc:
            raise ChangeRefused(409, "bridge", f"the Bridge did not draft: {exc.message}") from None
        output = answer.output
        try:
            envelope = ChangeEnvelope(
                deployment=target.iri,
                baseDigest=target.digest or "",
                files=output.get("files"),
                author=f"model {bridge.model}",
                rationale=f"{output.get('rationale', '')}\n\n(drafted from {len(reasons)} "
                "override reason(s) in clinicians' feedback)",
            )
        except ValidationError as exc:
            raise ChangeRefused(
                422, "draft", f"the model's envelope is not valid: {exc.errors()[0]['msg']}"
            ) from None
        return self.propose(envelope, origin="drafted")


def _on_base(change: Change, active_digest: str | None) -> bool:
    """Whether the deployment is still at the version ``change`` was proposed on (a change
    creating its deployment: that none is active)."""
    if change.base_digest == NEW:
        return active_digest is None
    return active_digest is not None and active_digest == change.base_digest


def _moved(change: Change, active: Deployment | None, digest: str | None = None) -> str:
    now = digest if digest is not None else (active.digest if active is not None else None)
    return (
        f"the deployment moved since change {change.id} was proposed on digest "
        f"{change.base_digest[:12]}: its active version is now {(now or 'none')[:12]}; "
        "propose the change again against it"
    )


def _recording(session: Session, run: store.StoredRun) -> dict[str, Any]:
    """A stored run as replay reads it: its replay material, with its outcome and trace."""
    document = dict(run.outcome)
    material = dict(document.pop("replay", {}))
    if "trace" not in document:
        document["trace"] = [dict(e.payload) for e in repo.list_trace(session, run.id)]
    material["outcome"] = document
    return material


def _overridden(f: Any) -> str:
    """One override as the model reads it: the card (its declaration, else its uuid), the rules
    of its proof and the deployment version it ran on, then the reason and the comment."""
    reason: dict[str, Any] = f.override_reason or {}
    found = reason.get("reason")
    coding: dict[str, Any] = found if isinstance(found, dict) else {}
    about = [f"rules {', '.join(f.rules)}"] if f.rules else ["no decided proof"]
    if f.deployment_version:
        about.append(f"version {f.deployment_version}")
    said = [coding.get("display"), coding.get("code"), reason.get("userComment")]
    card = f'"{f.card_key}"' if f.card_key else f.card_uuid
    return f"- card {card} ({'; '.join(about)}), {f.outcome}: " + "; ".join(
        str(v) for v in said if v
    )


def _draft_prompt(deployment: Deployment, files: dict[str, str], reasons: list[Any]) -> str:
    said = "\n".join(_overridden(f) for f in reasons)
    shown = "\n\n".join(f"--- {path} ---\n{text}" for path, text in files.items())
    return (
        f"Clinicians overrode the cards of deployment {deployment.id} (version "
        f"{deployment.version}) with these reasons:\n{said}\n\n"
        "Propose a change to the deployment's rules that would answer them. Write each file you "
        "change whole, only among the files below, and give it a new owl:versionInfo. Your "
        "proposal will be checked, replayed against real calls and reviewed by a clinician "
        f"before it is used.\n\n{shown}"
    )


__all__ = ["APPROVE_SCOPE", "DEFAULT_LAST", "ChangeControl", "ChangeRefused"]
