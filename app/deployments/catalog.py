"""The deployments a process serves, each at its **active** version.

The release — the files on disk — is what a process loads at start. A deployment's active
version lives in the database (``deployment_state``): the change it runs, or none (the release),
and a ``generation`` bumped by every activation and rollback. Every worker and process reads the
same row, so an activation is seen by all of them:

- :meth:`Catalog.refresh` reads every deployment's row and rebuilds the versions whose
  generation moved (a change's version is built from its base version's files with the change's
  files replaced, checked against the digest it was proposed on, then verified);
- a hook call runs on :meth:`Catalog.current` (no database read) and, in the transaction that
  stores its run (or claims it before anything leaves), reads its deployment's generation
  (:meth:`Catalog.check`): if it moved, nothing is stored, the catalog is refreshed and the call
  runs again on the new version. So no run is stored under a version older than the one active
  when it committed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from app.deployments.material import Material, build, release_material
from app.deployments.newborn import NEW, new_material, placeholder, unbuildable
from app.deployments.registry import Deployment, Deployments
from app.store import changes as change_store
from app.store.models import Change
from app.tools.packaged import PackagedTools

log = logging.getLogger("horismos.deployments")


class VersionMoved(Exception):
    """The deployment's active version changed while a hook call ran on the previous one:
    nothing of the run is stored; the call runs again on the new version."""


class ChangeUnbuildable(Exception):
    """A change's version cannot be rebuilt: its base is not the version it was proposed on."""


class Catalog:
    """The release and the active version of each deployment; shared by a process's calls."""

    def __init__(
        self,
        release: Deployments,
        packaged: PackagedTools,
        *,
        vet: Callable[[Deployment], Deployment] | None = None,
    ) -> None:
        self.release = release
        self.packaged = packaged
        #: further checks of a version built from a change (the host's MCP tools)
        self.vet = vet or (lambda deployment: deployment)
        self._current = release
        self._lock = threading.Lock()
        self._versions: dict[str, Deployment] = {}
        self._shadows: dict[str, str | None] = {}
        self._asked = float("-inf")

    def may_refresh(self, every: float = 1.0) -> bool:
        """Whether an unknown service id may read the active versions again now: once per
        ``every`` seconds at most (a refresh is a database read, and unknown ids cost nothing
        to send)."""
        now = time.monotonic()
        with self._lock:
            if now - self._asked < every:
                return False
            self._asked = now
            return True

    def current(self) -> Deployments:
        """The deployments at the versions this process last saw active."""
        return self._current

    def shadow_of(self, deployment_iri: str) -> str | None:
        """The approved change running beside the deployment, as last seen."""
        return self._shadows.get(deployment_iri)

    def check(self, connection: Connection, deployment: Deployment) -> str | None:
        """In the caller's transaction: raise :class:`VersionMoved` when ``deployment`` is no
        longer the active version; else the change in shadow mode, if any."""
        generation, shadow = change_store.deployment_generation(connection, deployment.iri)
        self.verify(deployment, generation)
        return shadow

    @staticmethod
    def verify(deployment: Deployment, generation: int) -> None:
        """Raise :class:`VersionMoved` when ``generation`` (the deployment's, as the store
        read it) is not the one ``deployment`` runs at."""
        if generation != deployment.generation:
            raise VersionMoved(
                f"deployment {deployment.id} moved from generation {deployment.generation} "
                f"to {generation}"
            )

    # --- refresh ------------------------------------------------------------------------

    def refresh(self, engine: Engine) -> Deployments:
        """Read every deployment's active version and serve it; returns the deployments."""
        with engine.connect() as connection:
            states = change_store.active_states(connection)
        with self._lock:
            items: list[Deployment] = []
            for release in self.release:
                state = states.get(release.iri)
                generation = state.generation if state else 0
                current = self._current.find(release.id)
                if current is not None and current.generation == generation:
                    items.append(current)
                    continue
                items.append(self._active(engine, release, state))
            # deployments changes created (a PlanDefinition activated as a service): served
            # while a change of theirs is active
            released = {d.iri for d in self.release}
            for iri, state in sorted(states.items()):
                if iri in released or state.active_change_id is None:
                    continue
                current = self._current.find(iri)
                if current is not None and current.generation == state.generation:
                    items.append(current)
                    continue
                try:
                    with Session(engine) as session:
                        version = self.version(session, state.active_change_id)
                except ChangeUnbuildable as exc:
                    # named as refused, so that /readyz says it and a rollback can reach it
                    log.error("deployment %s: its active change cannot be built (%s)", iri, exc)
                    version = unbuildable(iri, state.active_change_id, str(exc))
                items.append(replace(version, generation=state.generation))
            self._shadows = {iri: s.shadow_change_id for iri, s in states.items()}
            self._current = Deployments(items)
        return self._current

    def _active(
        self, engine: Engine, release: Deployment, state: change_store.ActiveState | None
    ) -> Deployment:
        generation = state.generation if state else 0
        if state is None or state.active_change_id is None:
            return replace(release, generation=generation)
        try:
            with Session(engine) as session:
                version = self.version(session, state.active_change_id)
        except ChangeUnbuildable as exc:
            log.error(
                "deployment %s: the active change %s cannot be built (%s); serving its files",
                release.id,
                state.active_change_id,
                exc,
            )
            return replace(release, generation=generation)
        return replace(version, generation=generation)

    # --- versions built from changes ----------------------------------------------------

    def version(self, session: Session, change_id: str) -> Deployment:
        """The deployment version a change makes (built once per process)."""
        found = self._versions.get(change_id)
        if found is not None:
            return found
        change = change_store.get_change(session, change_id)
        if change is None:
            raise ChangeUnbuildable(f"no change {change_id}")
        release = self.release.find(change.deployment)
        if release is None and self._created(session, change):
            release = placeholder(change.deployment_id, change.deployment)
        if release is None:
            raise ChangeUnbuildable(f"deployment {change.deployment} is not loaded")
        built = replace(
            self.vet(build(self.material(session, change), self.packaged, like=release)),
            change_id=change.id,
        )
        if built.digest != change.candidate_digest:
            raise ChangeUnbuildable(
                f"change {change.id} builds to digest {built.digest}, not its recorded "
                f"{change.candidate_digest}"
            )
        self._versions[change_id] = built
        return built

    @staticmethod
    def _created(session: Session, change: Change) -> bool:
        """Whether ``change`` belongs to a deployment a change created (its first change's
        base is :data:`NEW`), not one of the release."""
        seen: set[str] = set()
        while change.base_change_id is not None and change.id not in seen:
            seen.add(change.id)
            base = change_store.get_change(session, change.base_change_id)
            if base is None:
                return False
            change = base
        return change.base_digest == NEW

    def material(self, session: Session, change: Change) -> Material:
        """A change's files: its base version's with the change's replaced (a change that
        created its deployment: its files are all it has)."""
        if change.base_change_id is None and change.base_digest == NEW:
            return new_material(dict(change.files))
        return self.base_material(session, change).with_files(dict(change.files))

    def base_material(self, session: Session, change: Change) -> Material:
        """The files of the version a change was proposed on, checked against its digest."""
        if change.base_change_id is None:
            release = self.release.find(change.deployment)
            if release is None:
                raise ChangeUnbuildable(f"deployment {change.deployment} is not loaded")
            if release.digest != change.base_digest:
                raise ChangeUnbuildable(
                    f"change {change.id} was proposed on digest {change.base_digest}; the "
                    f"files on disk are now {release.digest}"
                )
            return release_material(release)
        base = change_store.get_change(session, change.base_change_id)
        if base is None:
            raise ChangeUnbuildable(f"the base change {change.base_change_id} is gone")
        return self.material(session, base)

    def active_material(self, session: Session, deployment: Deployment) -> Material:
        """The files of a deployment's version as served now."""
        if deployment.change_id is None:
            return release_material(self.release.find(deployment.id) or deployment)
        change = change_store.get_change(session, deployment.change_id)
        if change is None:
            raise ChangeUnbuildable(f"no change {deployment.change_id}")
        return self.material(session, change)


__all__ = ["Catalog", "ChangeUnbuildable", "VersionMoved"]
