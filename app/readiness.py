"""The database part of ``/readyz``: answered within a fixed budget, one probe at a time.

A database that accepts connections and never answers would hold a probe until the connect
timeout; an orchestrator probing every few seconds, or many callers at once, would pile up
threads on it and starve the rest of the service. So:

- at most one probe runs at a time, on its own thread (not the request thread pool); every
  ``/readyz`` arriving meanwhile waits for that same probe;
- a caller waits at most :data:`BUDGET_SECONDS`; a probe still running then is reported as
  ``unreachable: no answer within …`` and keeps running for the next caller to pick up.

``/healthz`` does none of this: it answers from the event loop and never touches the database.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine

from app.store.migrate import current_revision, head_revision

#: The longest ``/readyz`` waits for the database probe (it must answer within 2 s).
BUDGET_SECONDS = 1.5


def database_state(engine: Engine) -> str:
    """``ok``, or what is wrong with the database in a few words."""
    try:
        current = current_revision(engine)  # connects: an unreachable database raises here
    except Exception as exc:  # any driver failure means "not ready"; say which
        return f"unreachable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    head = head_revision()
    if current != head:
        return f"not migrated: at {current or 'no revision'}, needs {head} (horismos db upgrade)"
    return "ok"


class DatabaseProbe:
    """Runs :func:`database_state` on one dedicated thread, shared by concurrent callers."""

    def __init__(self, engine: Engine, *, budget: float = BUDGET_SECONDS) -> None:
        self.engine = engine
        self.budget = budget
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="readyz")
        self._running: asyncio.Future[str] | None = None

    async def state(self) -> str:
        """The database's state, or ``unreachable: no answer within …`` after the budget."""
        if self._running is None or self._running.done():
            loop = asyncio.get_running_loop()
            self._running = loop.run_in_executor(self._executor, database_state, self.engine)
        try:
            return await asyncio.wait_for(asyncio.shield(self._running), self.budget)
        except TimeoutError:
            return f"unreachable: no answer within {self.budget:g} s"

    def close(self) -> None:
        """Stop taking probes; a probe still running finishes on its own (never waited for)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
