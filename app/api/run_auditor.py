"""The auditor's part of the run page, below the clinician's: the run's versions and digests,
its trace, its effects, the proof in engine notation with its base facts, violations, data
quality notes, the FHIR source versions it read and the terminology that classified its codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from markupsafe import Markup

from app.api.run_proof import proof_lines
from app.api.run_trace import narrations, trace_rows
from app.api.run_view import RunPage, cells, escaped, markup, ran_at
from app.clinical_text import base_facts

__all__ = ["auditor_view"]


def _source_ref(source: Mapping[str, Any]) -> str:
    ref = f"{source.get('resourceType')}/{source.get('id')}"
    version = source.get("versionId")
    return f"{ref} (version {version})" if version is not None else ref


def auditor_view(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the auditor's part of ``run.html`` shows of ``page`` (``trace``: its steps)."""
    doc = page.document
    ran = ran_at(page, trace)
    facts = [
        ("Run", f"<code>{escaped(doc.get('runId'))}</code>"),
        ("Status", escaped(doc.get("status"))),
        ("Terminal step", escaped(doc.get("terminal")) or "—"),
        ("Workflow", f"{escaped(doc.get('workflow'))} version {escaped(doc.get('version'))}"),
        (
            "Ran at",
            escaped(ran.isoformat(timespec="seconds") if isinstance(ran, datetime) else ran),
        ),
    ]
    if page.service_id:
        hook = f" (hook {escaped(page.hook)})" if page.hook else ""
        facts.append(("CDS service", f"{escaped(page.service_id)}{hook}"))
    if page.deployment:
        version = f" version {escaped(page.deployment_version)}" if page.deployment_version else ""
        facts.append(("Deployment", f"<code>{escaped(page.deployment)}</code>{version}"))
    if page.ontology_digest:
        facts.append(("Ontology digest", f"<code>{escaped(page.ontology_digest)}</code>"))
    if page.request_digest:
        facts.append(("Request digest", f"<code>{escaped(page.request_digest)}</code>"))
    effects = [
        [
            *(escaped(e.get(k)) for k in ("tool", "target", "expectedVersion")),
            f'<span class="st {"ok" if e.get("state") == "accepted" else "warn"}">'
            f"{escaped(e.get('state'))}</span>",
            *(escaped(e.get(k)) for k in ("newVersion", "attempts", "detail")),
        ]
        for e in page.effects
    ]
    out: dict[str, Any] = {
        "facts": [(k, Markup(v)) for k, v in facts],
        "trace": trace_rows(trace),
        "effects": cells(effects),
        "proof": None,
        "violations": [
            v
            for v in [*(doc.get("inputViolations") or []), *(doc.get("violations") or [])]
            if isinstance(v, Mapping)
        ],
        "quality": cells(
            [escaped(n.get(k)) for k in ("field", "received", "readAs", "message")]
            for n in doc.get("dataQuality") or []
            if isinstance(n, Mapping)
        ),
        "sources": cells(
            [escaped(s.get(k)) for k in ("resourceType", "id", "versionId", "lastUpdated")]
            for s in doc.get("sources") or []
            if isinstance(s, Mapping)
        ),
        "terminology": _terminology(doc.get("terminology")),
        "narrations": [
            (step, n.get("text")) for step, n in narrations(trace) if not n.get("generated")
        ],
    }
    proof = doc.get("proof")
    if isinstance(proof, Mapping):
        lines = proof_lines(proof)
        out["proof"] = lines
        base = base_facts(lines)
        with_confidence = any(n.get("confidence") is not None for n in base)
        out["base_headers"] = ["Subject", "Property", "Value", "Provenance", "FHIR source"] + (
            ["Confidence"] if with_confidence else []
        )
        out["base"] = cells(
            [
                escaped(n.get("subject")),
                escaped(n.get("property")),
                f"<b>{escaped(n.get('value'))}</b>",
                escaped(n.get("provenance")),
                escaped(_source_ref(n["source"])) if isinstance(n.get("source"), Mapping) else "",
                *([escaped(n.get("confidence"))] if with_confidence else []),
            ]
            for n in base
        )
    return out


def _terminology(used: Any) -> dict[str, Any] | None:
    """Which terminology classified the run's codes, and from which versions."""
    if not isinstance(used, Mapping):
        return None
    packages = ", ".join(str(p) for p in used.get("packages") or []) or "no package"
    return {
        "server": markup(used.get("url")) if used.get("kind") == "server" else None,
        "packages": packages,
        "rows": [
            *(["Value set", markup(v)] for v in used.get("valueSets") or []),
            *(["Concept map", markup(v)] for v in used.get("conceptMaps") or []),
        ],
    }
