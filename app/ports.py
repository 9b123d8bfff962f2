"""The ports: what the core asks of the outside, declared here and implemented in ``adapters``.

The core names these types only; :mod:`app.compose`, the composition root, chooses what
implements each one when the service is built (``adapters.fhir.commit`` writes a hook call's
effects to the EHR, ``adapters.fhir.reconcile`` settles the effects whose answer was lost,
``adapters.terminology.http`` asks a FHIR terminology server). The terminology port itself is
:class:`app.terminology.port.TerminologyPort`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx
from sqlalchemy import Connection, Engine

from app.fhir_reads import FhirReaders
from app.ontology.model import Ontology, ToolDef
from app.settings import Settings
from app.terminology.port import TerminologyPort
from app.tools.call import ToolCall


class CommitHandler(Protocol):
    """The ``fhir`` scheme handler of one hook call: it sends the run's declared writes to the
    EHR and logs each one's fate in the effect log."""

    def __call__(self, call: ToolCall) -> dict[str, Any]: ...

    def notices(self) -> list[str]:
        """A card sentence per write that did not succeed, from what it logged."""
        ...

    def write_pending(self, connection: Connection) -> None:
        """Store the effects of writes that sent nothing, in the transaction that stores a
        claimed run's outcome."""
        ...

    def unsent_effects(self) -> list[dict[str, Any]]:
        """The effects of writes that sent nothing while the run's row does not exist yet,
        as ``effects`` columns without the run: stored with the run's row."""
        ...


class CommitHandlers(Protocol):
    """Builds the commit handler of one hook call, from what the call sent and read."""

    def __call__(
        self,
        *,
        ontology: Ontology,
        fhir_server: str,
        fhir_authorization: Mapping[str, Any] | None,
        sources: Iterable[Any],
        resources: Iterable[Mapping[str, Any]],
        context: Mapping[str, Any],
        ensure_run: Callable[[], None] | None,
        prefetch: Mapping[str, Any],
        run_url: str | None,
        send_before: float | None,
        resumed: bool,
    ) -> CommitHandler: ...

    def may_send(self, tool: ToolDef, fhir_authorization: Mapping[str, Any] | None) -> bool:
        """Whether a write of ``tool`` could leave under ``fhir_authorization`` (False: the
        handler refuses every such write before any request: its scope is not granted)."""
        ...


class Settlement(Protocol):
    """What reconciliation concluded for one effect."""

    @property
    def run_id(self) -> str: ...
    @property
    def effect_id(self) -> str: ...
    @property
    def before(self) -> str: ...
    @property
    def after(self) -> str: ...

    def to_json(self) -> dict[str, str]: ...


class Reconciler(Protocol):
    """Settles effects whose answer was lost by reading their targets again."""

    def pending(self, engine: Engine, *, now: datetime | None = None) -> Sequence[Settlement]:
        """Every effect left ``unknown``, and every ``attempted`` one whose process died."""
        ...

    def run(self, engine: Engine, run_id: str) -> Sequence[Settlement]:
        """One run's unsettled effects (accepted CDS feedback asks for this)."""
        ...


#: Builds the commit handlers of a service over its engine and its blocking HTTP client.
CommitWiring = Callable[[Engine, httpx.Client], CommitHandlers]


@dataclass(frozen=True, kw_only=True)
class Adapters:
    """What implements each port of the service, chosen once when the service is built."""

    #: the reader of each hook call's FHIR server (prefetch the client did not send)
    fhir_readers: FhirReaders
    #: the commit handlers of hook calls (FHIR writes and their effect log)
    commits: CommitWiring
    #: settles effects whose answer was lost (the periodic task, accepted CDS feedback)
    reconciler: Reconciler
    #: the FHIR terminology server ``HORISMOS_TERMINOLOGY_URL`` names, or None (embedded only)
    terminology_server: Callable[[Settings], TerminologyPort | None]
