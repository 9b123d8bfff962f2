"""Shadow mode: an approved change decides beside the active version on live hook calls.

After a hook call's run is stored (and its answer about to be returned), the service hands the
run's recording and FHIR input to :class:`ShadowRunner` when its deployment has an approved
change in shadow mode. The runner queues it (never on the answer's path: a full queue drops the
work and counts it) and, on its own thread, decides the same input again on the change's version
(hydrated again, recorded Bridge answers and outside effects substituted, pure tools re-run) and
stores what it decided beside the live decision (``shadow_results``). Nothing it decides is
returned or written anywhere else; the change's page shows the agreement so far.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.cds.hook_input import HookInput
from app.changes.compare import decide_again, decision_of, differs
from app.deployments import Deployment
from app.deployments.catalog import Catalog, ChangeUnbuildable
from app.runtime.replay import RecordedRun
from app.store import changes as store
from app.tools.invoker import ToolInvoker

log = logging.getLogger("horismos.changes")

#: Runs waiting for their shadow decision at most; beyond, new ones are not shadowed.
MAX_PENDING = 256


class ShadowRunner:
    """Decides queued hook runs on an approved change, one at a time, off the answer's path."""

    def __init__(
        self, engine: Engine, catalog: Catalog, *, tools: Callable[[], ToolInvoker] = ToolInvoker
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.invoker = tools
        self.dropped = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shadow")
        self._pending: set[Future[None]] = set()
        self._lock = threading.Lock()

    def __call__(
        self, *, change_id: str, deployment: Deployment, recorded: RecordedRun, stored: HookInput
    ) -> None:
        """Queue one run (returns at once)."""
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                self.dropped += 1
                return
            future = self._executor.submit(self._decide, change_id, recorded, stored)
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every queued run is decided; False when the timeout passed first."""
        with self._lock:
            pending = list(self._pending)
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _decide(self, change_id: str, recorded: RecordedRun, stored: HookInput) -> None:
        before = decision_of(recorded.outcome)
        after: dict[str, object] = {}
        try:
            with Session(self.engine) as session:
                version = self.catalog.version(session, change_id)
            assert version.ontology is not None
            after = decide_again(version.ontology, recorded, stored, tools=self.invoker())
        except (ChangeUnbuildable, AssertionError) as exc:
            after = {"error": str(exc)}
        except Exception as exc:  # shadow work must never disturb the service; say what broke
            log.exception("shadow run of %s on change %s failed", recorded.run_id, change_id)
            after = {"error": f"{type(exc).__name__}: {exc}"}
        error = after.get("error")
        values = {
            "change_id": change_id,
            "run_id": recorded.run_id,
            "agree": None if error else not differs(before, after),
            "before": before,
            "after": None if error else after,
            "error": str(error) if error else None,
        }
        try:
            with self.engine.begin() as connection:
                store.add_shadow_result(connection, values)
        except Exception:
            log.exception("the shadow decision of run %s could not be stored", recorded.run_id)


__all__ = ["MAX_PENDING", "ShadowRunner"]
