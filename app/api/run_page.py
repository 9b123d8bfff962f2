"""The run page: a stored run's decision for two readers, as one self-contained HTML document.

What a clinician sees after following a card's link: on top, for the clinician, the patient and
encounter the hook named, the decision and the cards the EHR showed, the actions they suggest,
why (the proof as labelled statements, ``app.clinical_text``), the data used with its dates, what
was missing or refused, and what was written to the EHR (``app/api/run_clinician.py``); below,
for the auditor, the run's versions and digests, its trace (``app/api/run_trace.py``), its
effects, the proof in engine notation (``app/api/run_proof.py``), violations, data quality notes
and the FHIR source versions it read (``app/api/run_auditor.py``). Times are shown in the
configured zone (``HORISMOS_TIMEZONE``), which the page names.

Everything comes from what was stored when the run finished — the outcome document, the run row
(its CDS response and its FHIR input), the effects the commit adapter recorded and the source
versions the run read; nothing is recomputed. Only the names of steps and properties the stored
JSON does not carry come from the deployment, when it is loaded (``names``), else from their
local names. The page has no script and no external asset (inline CSS only). It is the template
``app/api/templates/run.html``, autoescaped: every value is escaped (free text, FHIR ids and
generated narration may hold markup); the few table cells built with a tag (a value in bold, an
id as code) escape their values themselves and are passed as ``Markup``
(``app/api/run_view.py``).

The engine proof carries ``Proof.render()``'s lines (``proof_text`` returns them for tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, tzinfo

from sqlalchemy.orm import Session

from app.api.negotiation import PAGE_HEADERS, prefers_html
from app.api.pages import render
from app.api.run_auditor import auditor_view
from app.api.run_clinician import clinician_view
from app.api.run_proof import proof_text
from app.api.run_view import RunPage
from app.cds.hook_input import HookInput, InputUnusable
from app.ontology.model import Ontology
from app.runtime.host import stored_input, stored_outcome
from app.store import repo

__all__ = [
    "PAGE_HEADERS",
    "RunPage",
    "link_refused_page",
    "load_run_page",
    "names_of",
    "not_found_page",
    "prefers_html",
    "proof_text",
    "render_run_page",
]


def load_run_page(
    session: Session,
    run_id: str,
    *,
    names: Mapping[str, str] | None = None,
    zone: tzinfo = UTC,
) -> RunPage:
    """The stored run ``run_id``; raises ``NotFound`` like ``GET /runs/{id}``."""
    document = stored_outcome(session, run_id)
    row = repo.get_run(session, run_id)
    stored: HookInput | None = None
    raw = stored_input(session, run_id)
    if raw is not None:
        try:
            stored = HookInput.from_bytes(raw)
        except InputUnusable:
            stored = None
    return RunPage(
        document=document,
        created_at=row.created_at if row is not None else None,
        service_id=row.service_id if row is not None else None,
        hook=row.hook if row is not None else None,
        patient=row.patient if row is not None else None,
        deployment=row.deployment if row is not None else None,
        deployment_version=row.deployment_version if row is not None else None,
        ontology_digest=row.ontology_digest if row is not None else None,
        request_digest=row.request_digest if row is not None else None,
        effects=document.get("effects", ()),
        response=row.response if row is not None else None,
        context=stored.context if stored is not None else {},
        prefetch=stored.prefetch if stored is not None else {},
        names=names or {},
        zone=zone,
    )


def names_of(ontology: Ontology) -> dict[str, str]:
    """The labels a page shows for what its stored JSON names without one: steps and tools by
    local name, properties by IRI (each with an ``rdfs:label``)."""
    names: dict[str, str] = {}
    for workflow in ontology.workflows.values():
        names.update({s.name: s.label for s in workflow.steps.values() if s.label})
    names.update({t.name: t.label for t in ontology.tools.values() if t.label})
    names.update({p.iri: p.label for p in ontology.properties.values() if p.label})
    return names


def render_run_page(page: RunPage) -> str:
    """The whole HTML document for one stored run: the clinician's part on top, the auditor's
    below."""
    doc = page.document
    trace = [t for t in doc.get("trace") or [] if isinstance(t, Mapping)]
    run_id = str(doc.get("runId"))
    return render(
        "run.html",
        title=f"Decision record {run_id}",
        run_id=run_id,
        service_id=page.service_id,
        zone=str(page.zone),
        clinician=clinician_view(page, trace),
        auditor=auditor_view(page, trace),
    )


def not_found_page(run_id: str) -> str:
    return render(
        "notice.html",
        title="Run not found",
        heading="Run not found",
        before="No run ",
        code=run_id,
        after=" is recorded by this service.",
    )


def link_refused_page(reason: str) -> str:
    """The 401 page for a card link whose signature is wrong or whose time is up."""
    return render(
        "notice.html",
        title="Link not valid",
        heading="This link cannot open the decision record",
        before=f"{reason}.",
        code=None,
        after="",
    )
