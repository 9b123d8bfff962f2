"""The composition root: the one module of ``app`` that names an adapter.

The core declares what it asks of the outside (:mod:`app.ports`,
:class:`app.terminology.port.TerminologyPort`); this module says what implements each port in
this service and builds them once, as one typed :class:`app.ports.Adapters`. The app factory
(:func:`app.main.create_app`) puts it on the app for the routes' lifespans to wire in, and the
command line (:mod:`app.cli`) takes its commands' adapters from here. Nothing else in ``app``
imports ``adapters`` or this module (``tests/foundation/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import Engine

from adapters.fhir.client import FhirClient
from adapters.fhir.commit import CommitContext, FhirCommitAdapter
from adapters.fhir.reconcile import reconcile_cli, reconcile_pending, reconcile_run
from adapters.fhir.scopes import may_write
from adapters.terminology.http import HttpTerminology
from adapters.terminology.server import terminology_app
from app.ontology.model import Ontology, ToolDef
from app.ports import Adapters, CommitHandler, Settlement
from app.settings import Settings
from app.terminology.port import TerminologyPort

#: what the entry points take from here: the service's adapters, and the adapters behind
#: ``horismos reconcile`` and ``horismos terminology serve``
__all__ = ["adapters", "reconcile_cli", "terminology_app"]


@dataclass(frozen=True)
class _FhirCommits:
    """Builds one hook call's :class:`FhirCommitAdapter` over the service's engine and client."""

    engine: Engine
    http: httpx.Client

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
    ) -> CommitHandler:
        return FhirCommitAdapter(
            ontology=ontology,
            engine=self.engine,
            context=CommitContext.from_hook(
                fhir_server=fhir_server,
                fhir_authorization=fhir_authorization,
                sources=sources,
                resources=resources,
                context=context,
                prefetch=prefetch,
                run_url=run_url,
            ),
            http=self.http,
            ensure_run=ensure_run,
            send_before=send_before,
            resumed=resumed,
        )

    def may_send(self, tool: ToolDef, fhir_authorization: Mapping[str, Any] | None) -> bool:
        commit = tool.commits
        if commit is None:
            return True  # the adapter says why it refuses: not known here, so it may send
        granted = (fhir_authorization or {}).get("scope")
        return may_write(granted if isinstance(granted, str) else None, commit)


class _FhirReconciler:
    """Reconciliation against the FHIR server each effect was written to."""

    def pending(self, engine: Engine, *, now: datetime | None = None) -> Sequence[Settlement]:
        return reconcile_pending(engine, now=now)

    def run(self, engine: Engine, run_id: str) -> Sequence[Settlement]:
        return reconcile_run(engine, run_id)


def _terminology_server(settings: Settings) -> TerminologyPort | None:
    if not settings.terminology_url:
        return None
    token = settings.terminology_token
    return HttpTerminology(
        settings.terminology_url,
        token=token.get_secret_value() if token is not None else None,
        timeout=settings.terminology_timeout_seconds,
    )


def adapters() -> Adapters:
    """This service's adapters: FHIR over HTTP for reads, writes and reconciliation, and for a
    terminology server."""
    return Adapters(
        fhir_readers=FhirClient,
        commits=_FhirCommits,
        reconciler=_FhirReconciler(),
        terminology_server=_terminology_server,
    )
