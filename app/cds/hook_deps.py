"""What a hook call needs from the running service (``app.cds.service.HookService``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, tzinfo

import httpx
from sqlalchemy import Engine

from app.cds.auth import ClientAuthenticator
from app.cds.leases import LeaseKeeper
from app.deployments.catalog import Catalog
from app.fhir_reads import FhirReaders
from app.ports import CommitHandlers
from app.runtime.runner import Runner
from app.terminology import Terminology
from app.terminology.choice import TerminologyChoice


@dataclass(kw_only=True)
class HookDeps:
    """What a hook call needs from the running service."""

    #: the deployments at their active versions, each serving its own services (or refused)
    catalog: Catalog
    engine: Engine
    http: httpx.AsyncClient
    #: builds the reader of one call's FHIR server (``app.fhir_reads.FhirReaders``)
    fhir_readers: FhirReaders
    authenticator: ClientAuthenticator
    #: builds the run's context (clock, timer, Bridges, tools) and its record
    runner: Runner
    fhir_timeout: float
    #: URL prefixes ``fhirServer`` must lie under (empty: any server, open mode)
    allowed_fhir_servers: tuple[str, ...] = ()
    #: the most one prefetch key's FHIR answer (all its pages) may take in, in bytes, and the
    #: most pages it follows; a search reaching either is truncated
    max_fhir_response_bytes: int = 20_000_000
    max_fhir_pages: int = 10
    #: builds the ``fhir`` scheme handler of one call's writes (``app.ports.CommitHandlers``):
    #: it claims the run through ``ensure_run`` before a request leaves, says in ``notices()``
    #: what became of each write and stores the writes that sent nothing in the run's own
    #: transaction (``write_pending``); None: writes are not sent, and the cards say so
    commit_handlers: CommitHandlers | None = None
    #: runs an approved change beside the active version after the answer is stored, called
    #: with ``change_id``, ``deployment``, ``recorded`` and ``stored`` (never on the answer's
    #: path: it queues the work); None: no shadow mode
    shadow: Callable[..., None] | None = None
    #: keeps the leases of claimed runs; None: claims carry no lease and are never taken over
    leases: LeaseKeeper | None = None
    #: the longest one hook call may take, in seconds; None: no end-to-end deadline
    deadline: float | None = None
    #: the time zone cards show dates in
    zone: tzinfo = UTC
    #: resolves code-system aliases in what the EHR sends (None: the installed terminology)
    terminology: Terminology | None = None
    #: the terminology port a deployment's runs ask (None: codes are read from the lists alone)
    terminologies: TerminologyChoice | None = None
    #: how long an order-sign answer computed ahead at order-select may answer the order-sign
    #: call (``app.cds.ahead``), in seconds; 0: nothing is computed ahead
    answer_ahead_seconds: float = 0.0


__all__ = ["HookDeps"]
