"""The process's loaded state, left out of the cyclic garbage collector's full passes."""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("horismos")


def freeze_startup_heap() -> None:
    """Leave what the service started with (the deployments, their compiled rules and shapes,
    the terminology, the modules: most of the process's objects) out of the cyclic garbage
    collector's full passes, once per process.

    A full pass visits every object the collector tracks; on the loaded service that is ~400,000
    objects and 100-200 ms, paid by whichever call's allocations trigger it, and by every call in
    flight beside it. Frozen, the loaded objects are not visited; a call's own garbage is
    collected as before. They are still freed by reference counting when nothing holds them; a
    cycle among them that becomes garbage is kept, which is only the process's start-up state
    (a deployment version built later from a change is not frozen). A second lifespan in the
    same process (tests) neither collects nor freezes again."""
    if gc.get_freeze_count():
        return
    gc.collect()
    gc.freeze()
    log.info("start-up heap frozen: %d objects left out of full collections", gc.get_freeze_count())
