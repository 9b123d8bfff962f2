"""The run page: a stored run's decision, proof and trace as one self-contained HTML document.

What a clinician sees after following a card's link (docs/runtime.md, "The run page").
Everything on the page comes from what was stored when the run finished — the outcome document
(``GET /runs/{id}``), the run row, the effects the commit adapter recorded and the FHIR source
versions the run read; nothing is recomputed. The page has no script and no external asset
(inline CSS only) and every value is passed through ``html.escape``: free text, FHIR ids and
generated narration may hold markup.

The proof is rendered from the stored proof JSON as nested lists that carry the same lines as
``Proof.render()`` (``proof_text`` returns them as text, which tests compare); a base fact also
shows its provenance and the FHIR resource version it was read from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any

from sqlalchemy.orm import Session

from app.api.run_inputs import inputs_section
from app.runtime.host import stored_outcome
from app.store import repo

__all__ = [
    "PAGE_HEADERS",
    "RunPage",
    "link_refused_page",
    "load_run_page",
    "not_found_page",
    "prefers_html",
    "proof_text",
    "render_run_page",
]


#: Sent with every page: nothing but the inline style may load or run, the page holds patient
#: data so no cache keeps it, and the content type is not second-guessed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Vary": "Accept",
}


# --- content negotiation ------------------------------------------------------------------


def _quality(params: Iterable[str]) -> float:
    for param in params:
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value)))
            except ValueError:
                return 0.0
    return 1.0


def _accept_q(accept: str, media: str) -> float:
    """The quality ``accept`` gives ``media``: the most specific matching range wins (RFC 9110
    §12.5.1); 0 when nothing matches."""
    kind = media.split("/", 1)[0]
    best: tuple[int, float] = (-1, 0.0)
    for item in accept.split(","):
        parts = item.split(";")
        rng = parts[0].strip().lower()
        if rng == media:
            rank = 2
        elif rng == f"{kind}/*":
            rank = 1
        elif rng == "*/*":
            rank = 0
        else:
            continue
        if rank > best[0]:
            best = (rank, _quality(parts[1:]))
    return best[1]


def prefers_html(accept: str | None) -> bool:
    """True when ``Accept`` ranks ``text/html`` above ``application/json``.

    A browser following a link sends ``text/html,…,*/*;q=0.8``: HTML. An API client sending
    ``application/json``, ``*/*`` or no ``Accept`` at all gets JSON, as before the page existed;
    a tie goes to JSON.
    """
    if not accept:
        return False
    html_q = _accept_q(accept, "text/html")
    return html_q > 0 and html_q > _accept_q(accept, "application/json")


# --- what the page shows --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunPage:
    """Everything the page shows, as stored."""

    document: Mapping[str, Any]  # the outcome JSON ``GET /runs/{id}`` returns
    created_at: datetime | None = None
    service_id: str | None = None
    hook: str | None = None
    ontology_digest: str | None = None
    effects: Sequence[Mapping[str, Any]] = ()


def load_run_page(session: Session, run_id: str) -> RunPage:
    """The stored run ``run_id``; raises ``NotFound`` like ``GET /runs/{id}``."""
    document = stored_outcome(session, run_id)
    row = repo.get_run(session, run_id)
    return RunPage(
        document=document,
        created_at=row.created_at if row is not None else None,
        service_id=row.service_id if row is not None else None,
        hook=row.hook if row is not None else None,
        ontology_digest=row.ontology_digest if row is not None else None,
        effects=document.get("effects", ()),
    )


# --- the proof tree -------------------------------------------------------------------------


@dataclass
class _Line:
    """One line of the proof: a fact (``node`` set), an ``also`` derivation, a negative premise or
    an overruled value, with the lines indented beneath it."""

    text: str
    kind: str  # "derived" | "base" | "also" | "absent" | "overruled" | "unassigned"
    node: Mapping[str, Any] | None = None
    children: list[_Line] = field(default_factory=list)


def _tag(node: Mapping[str, Any]) -> str:
    """The bracketed tag ``Proof.render()`` prints after a fact's label."""
    if node.get("provenance") == "rule":
        derivations = node.get("derivations") or []
        return f"[rule {derivations[0].get('ruleName')}]" if derivations else "[rule]"
    text = str(node.get("provenance"))
    source = node.get("source")
    if isinstance(source, Mapping):
        text += f" {source.get('resourceType')}/{source.get('id')}"
        if source.get("versionId") is not None:
            text += f" v{source.get('versionId')}"
    confidence = node.get("confidence")
    if isinstance(confidence, int | float):
        text += f", confidence {confidence:g}"
    return f"[{text}]"


def _body(derivation: Mapping[str, Any]) -> list[_Line]:
    lines = [_fact(p) for p in derivation.get("premises") or []]
    lines.extend(_Line(str(a.get("label")), "absent") for a in derivation.get("absent") or [])
    return lines


def _fact(node: Mapping[str, Any]) -> _Line:
    derivations = list(node.get("derivations") or [])
    line = _Line(
        f"{node.get('label')}  {_tag(node)}", "derived" if derivations else "base", node=node
    )
    if derivations:
        line.children.extend(_body(derivations[0]))
    for d in derivations[1:]:
        also = _Line(f"also [rule {d.get('ruleName')}]", "also")
        if d.get("expanded"):
            also.children.extend(_body(d))
        line.children.append(also)
    for o in node.get("overruled") or []:
        rules = ", ".join(f"rule {r}" for r in o.get("rules") or [])
        line.children.append(_Line(f"overrules {o.get('label')}  [{rules}]", "overruled"))
    return line


def _proof_lines(proof: Mapping[str, Any]) -> list[_Line]:
    values = proof.get("values") or []
    if not values:
        return [_Line(f"{proof.get('property')} was not assigned", "unassigned")]
    return [_fact(v) for v in values]


def proof_text(proof: Mapping[str, Any]) -> str:
    """The stored proof JSON as the indented text ``Proof.render()`` produced for it."""
    out: list[str] = []

    def walk(lines: Sequence[_Line], depth: int) -> None:
        for line in lines:
            out.append("  " * depth + line.text)
            walk(line.children, depth + 1)

    walk(_proof_lines(proof), 0)
    return "\n".join(out)


# --- HTML -----------------------------------------------------------------------------------


def _e(value: Any) -> str:
    """Any value as escaped text: strings as they are, everything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return escape(str(value))
    return escape(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def _source_ref(source: Mapping[str, Any]) -> str:
    ref = f"{source.get('resourceType')}/{source.get('id')}"
    version = source.get("versionId")
    return f"{ref} (version {version})" if version is not None else ref


def _proof_html(lines: Sequence[_Line]) -> str:
    items: list[str] = []
    for line in lines:
        node = line.node
        if node is not None:
            # the tag names the provenance and, for a base fact, the FHIR resource version
            tag_css = "tag" if line.kind == "derived" else "tag src"
            body = (
                f'<span class="fact">{_e(node.get("label"))}</span>  '
                f'<span class="{tag_css}">{_e(_tag(node))}</span>'
            )
        else:
            body = f"<span>{_e(line.text)}</span>"
        children = f"<ul>{_proof_html(line.children)}</ul>" if line.children else ""
        items.append(f'<li class="{line.kind}">{body}{children}</li>')
    return "".join(items)


def _base_facts(lines: Sequence[_Line]) -> list[Mapping[str, Any]]:
    """Base-fact nodes in tree order, each once (``Proof.base_facts``, from the JSON)."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Mapping[str, Any]] = []

    def walk(items: Sequence[_Line]) -> None:
        for line in items:
            node = line.node
            if line.kind == "base" and node is not None and node.get("provenance") != "rule":
                key = (str(node.get("subject")), str(node.get("propertyIri")), _e(node["value"]))
                if key not in seen:
                    seen.add(key)
                    out.append(node)
            walk(line.children)

    walk(lines)
    return out


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table; the cells are HTML already escaped by the caller."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _call_html(call: Mapping[str, Any]) -> str:
    kind = call.get("type")
    if kind == "tool":
        what = f"tool {_e(call.get('tool'))}"
        if call.get("attempt") is not None:
            what += f" (attempt {_e(call.get('attempt'))})"
    else:
        what = f"Bridge {_e(call.get('op'))}"
        if call.get("model"):
            what += f" ({_e(call.get('model'))})"
    error = call.get("error")
    if call.get("status"):
        status = str(call.get("status"))
    elif isinstance(error, Mapping):
        status = f"error: {error.get('kind', 'error')}"
    else:
        status = "ok"
    detail = ""
    if isinstance(error, Mapping) and error.get("message"):
        detail = f'<div class="muted">{_e(error.get("message"))}</div>'
    elif call.get("confidence") is not None:
        detail = f'<div class="muted">confidence {_e(call.get("confidence"))}</div>'
    css = "ok" if status == "ok" else "warn"
    return f'<div class="call">{what} <span class="st {css}">{_e(status)}</span>{detail}</div>'


def _violations_html(violations: Iterable[Mapping[str, Any]]) -> str:
    return "".join(
        f'<div class="viol"><b>{_e(v.get("code"))}</b> {_e(v.get("message"))}</div>'
        for v in violations
        if isinstance(v, Mapping)
    )


def _time(at: Any) -> str:
    """A trace timestamp as its time of day (the date is in the header); the full value on hover."""
    text = str(at or "")
    short = text.split("T", 1)[1][:12] if "T" in text else text
    return f'<span class="muted" title="{_e(text)}">{_e(short)}</span>'


def _trace_rows(trace: Sequence[Mapping[str, Any]], prefix: str = "") -> list[list[str]]:
    rows: list[list[str]] = []
    for i, entry in enumerate(trace, 1):
        number = f"{prefix}{i}"
        calls = [c for c in entry.get("calls") or [] if isinstance(c, Mapping)]
        said = {str((c.get("error") or {}).get("message")) for c in calls}
        notes: list[str] = []
        for key in ("skipped", "reason", "effect"):
            if entry.get(key) and str(entry[key]) not in said:
                notes.append(f"{escape(key)}: {_e(entry[key])}")
        if isinstance(entry.get("error"), Mapping):
            notes.append(f"error: {_e(entry['error'].get('message'))}")
        for key in ("goal", "requires"):
            cond = entry.get(key)
            if isinstance(cond, Mapping) and "holds" in cond:
                notes.append(f"{escape(key)} {'holds' if cond['holds'] else 'does not hold'}")
        if entry.get("selected"):
            notes.append(f"selected: {_e(entry['selected'])}")
        edge = _e(entry.get("edge"))
        if entry.get("to"):
            edge += f" → {_e(entry.get('to'))}"
        rows.append(
            [
                escape(number),
                f"<b>{_e(entry.get('step'))}</b>",
                _e(entry.get("kind")),
                edge,
                _violations_html(entry.get("violations") or []),
                "".join(_call_html(c) for c in calls),
                "<br>".join(notes),
                _time(entry.get("at")),
            ]
        )
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            rows.extend(_trace_rows(subflow.get("trace") or [], prefix=f"{number}."))
    return rows


def _narrations(trace: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for entry in trace:
        narration = entry.get("narration")
        if isinstance(narration, Mapping) and narration.get("text"):
            out.append((str(entry.get("step")), narration))
        subflow = entry.get("subflow")
        if isinstance(subflow, Mapping):
            out.extend(_narrations(subflow.get("trace") or []))
    return out


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;
  background:#f5f6f8;margin:0}
main{max-width:1100px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:1.35em;margin:0 0 2px}h2{font-size:1.08em;margin:28px 0 8px;
  border-bottom:1px solid #d5d9e0;padding-bottom:4px}
.sub{color:#5b6472;margin:0 0 16px}
.card{background:#fff;border:1px solid #d5d9e0;border-radius:6px;padding:14px 18px}
.decision{font-size:1.5em;font-weight:600;margin:0 0 10px}
.decision .prop{color:#5b6472;font-weight:400}
.none{color:#8a4b00}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dt{color:#5b6472}dd{margin:0}
code,.mono,.proof{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;
  font-size:.9em}
.proof ul{list-style:none;margin:0;padding-left:22px;border-left:1px dotted #b8bfca}
.proof>ul{padding-left:0;border-left:0}
.proof li{margin:3px 0}
.proof .tag{color:#5b6472}
.proof .tag.src{color:#1f4e9c;background:#eef3fc;border-radius:3px;padding:0 4px}
.proof .derived>.fact{font-weight:600}
.proof .overruled,.proof .overruled .tag{color:#8d96a3}
.proof .absent{color:#5b6472;font-style:italic}
.st{display:inline-block;border-radius:3px;padding:0 5px;margin-left:6px;
  font:12px/1.6 system-ui,sans-serif}
.st.ok{background:#eef6ea;color:#2f6b1f}.st.warn{background:#fdf1dc;color:#8a4b00}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d5d9e0}
th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid #e6e9ee}
th{background:#eceff3;font-weight:600;font-size:.9em}
td{font-size:.92em}
.muted{color:#6b7480;font-size:.88em}
.viol{color:#9b1c1c}
.call+.call{margin-top:4px}
.generated{border:2px dashed #b26a00;background:#fffaf0;border-radius:6px;padding:10px 14px}
.generated .badge{display:inline-block;background:#b26a00;color:#fff;border-radius:3px;
  padding:0 6px;font-size:12px;font-weight:600;letter-spacing:.03em}
.generated p{white-space:pre-wrap;margin:8px 0 4px}
pre{white-space:pre-wrap;background:#fff;border:1px solid #d5d9e0;padding:10px;margin:6px 0}
footer{margin-top:28px;color:#6b7480;font-size:.85em}
@media print{body{background:#fff}.card,table{border-color:#999}}
"""


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="robots" content="noindex">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )


def _when(page: RunPage, trace: Sequence[Mapping[str, Any]]) -> str:
    if page.created_at is not None:
        return page.created_at.isoformat(timespec="seconds")
    first = trace[0].get("at") if trace else None
    return str(first) if first else "unknown"


def render_run_page(page: RunPage) -> str:
    """The whole HTML document for one stored run."""
    doc = page.document
    trace = [t for t in doc.get("trace") or [] if isinstance(t, Mapping)]
    run_id = str(doc.get("runId"))
    decision = doc.get("decision")
    parts: list[str] = [
        "<h1>Decision record</h1>",
        f'<p class="sub">Run <code>{_e(run_id)}</code></p>',
        '<section class="card">',
    ]
    if isinstance(decision, Mapping):
        parts.append(
            f'<p class="decision"><span class="prop">{_e(decision.get("property"))} =</span> '
            f"{_e(decision.get('value'))}</p>"
        )
    else:
        parts.append(
            f'<p class="decision none">No decision — the run {_e(doc.get("status"))}'
            + (f" waiting at {_e(doc.get('waitingAt'))}" if doc.get("waitingAt") else "")
            + "</p>"
        )
    facts = [
        ("Terminal step", _e(doc.get("terminal")) or "—"),
        ("Status", _e(doc.get("status"))),
        ("Workflow", f"{_e(doc.get('workflow'))} version {_e(doc.get('version'))}"),
        ("Ran at", _e(_when(page, trace))),
    ]
    if page.service_id:
        hook = f" (hook {_e(page.hook)})" if page.hook else ""
        facts.append(("CDS service", f"{_e(page.service_id)}{hook}"))
    if page.ontology_digest:
        facts.append(("Ontology digest", f"<code>{_e(page.ontology_digest[:16])}</code>"))
    parts.append("<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in facts) + "</dl>")
    parts.append("</section>")
    parts.append(inputs_section(doc.get("inputs")))

    for step, narration in _narrations(trace):
        if narration.get("generated"):
            parts.append(
                f'<h2>Narration <span class="muted">(step {_e(step)})</span></h2>'
                '<section class="generated"><span class="badge">GENERATED TEXT</span> '
                '<span class="muted">written by a language model from the proof below; '
                "the proof is the record of why, not this text</span>"
                f"<p>{_e(narration.get('text'))}</p></section>"
            )

    parts.append("<h2>Proof</h2>")
    proof = doc.get("proof")
    if isinstance(proof, Mapping):
        lines = _proof_lines(proof)
        parts.append(f'<section class="card proof"><ul>{_proof_html(lines)}</ul></section>')
        base = _base_facts(lines)
        if base:
            rows = [
                [
                    _e(n.get("subject")),
                    _e(n.get("property")),
                    f"<b>{_e(n.get('value'))}</b>",
                    _e(n.get("provenance")),
                    _e(_source_ref(n["source"])) if isinstance(n.get("source"), Mapping) else "",
                    _e(n.get("confidence")),
                ]
                for n in base
            ]
            parts.append('<h2>Base facts <span class="muted">(the proof\'s leaves)</span></h2>')
            parts.append(
                _table(
                    ["Subject", "Property", "Value", "Provenance", "FHIR source", "Confidence"],
                    rows,
                )
            )
    else:
        parts.append('<p class="muted">No proof: a proof is recorded for completed runs.</p>')

    parts.append("<h2>Trace</h2>")
    parts.append(
        _table(
            ["#", "Step", "Kind", "Edge", "Violations", "Tool / Bridge calls", "Notes", "At"],
            _trace_rows(trace),
            css="trace",
        )
    )

    if page.effects:
        parts.append('<h2>Effects <span class="muted">(writes to the EHR)</span></h2>')
        rows = [
            [
                _e(e.get("tool")),
                _e(e.get("target")),
                _e(e.get("expectedVersion")),
                f'<span class="st {"ok" if e.get("state") == "accepted" else "warn"}">'
                f"{_e(e.get('state'))}</span>",
                _e(e.get("newVersion")),
                _e(e.get("attempts")),
                _e(e.get("detail")),
            ]
            for e in page.effects
        ]
        parts.append(
            _table(
                ["Tool", "Target", "Read at version", "State", "New version", "Attempts", "Detail"],
                rows,
            )
        )

    violations = [*(doc.get("inputViolations") or []), *(doc.get("violations") or [])]
    if violations:
        parts.append("<h2>Violations</h2>")
        parts.append(f'<section class="card">{_violations_html(violations)}</section>')

    notes = [n for n in doc.get("dataQuality") or [] if isinstance(n, Mapping)]
    if notes:
        parts.append('<h2>Data quality <span class="muted">(input read leniently)</span></h2>')
        rows = [
            [
                _e(n.get("field")),
                _e(n.get("received")),
                _e(n.get("readAs")),
                _e(n.get("message")),
            ]
            for n in notes
        ]
        parts.append(_table(["Where", "Received", "Read as", "Why"], rows))

    parts.append('<h2>Source versions <span class="muted">(what the run read)</span></h2>')
    sources = [s for s in doc.get("sources") or [] if isinstance(s, Mapping)]
    if sources:
        rows = [
            [
                _e(s.get("resourceType")),
                _e(s.get("id")),
                _e(s.get("versionId")),
                _e(s.get("lastUpdated")),
            ]
            for s in sources
        ]
        parts.append(_table(["Resource type", "Id", "Version", "Last updated"], rows))
    else:
        parts.append('<p class="muted">None: the run read no FHIR resources.</p>')

    for step, narration in _narrations(trace):
        if not narration.get("generated"):
            parts.append(
                f"<details><summary>Narration of step {_e(step)} "
                "(not generated: the proof rendered as text)</summary>"
                f"<pre>{_e(narration.get('text'))}</pre></details>"
            )

    parts.append(
        "<footer>The same record as JSON: this address with <code>Accept: application/json</code>."
        " Replay: <code>POST /runs/" + _e(run_id) + "/replay</code>.</footer>"
    )
    return _page(f"Decision record {run_id}", "".join(parts))


def not_found_page(run_id: str) -> str:
    return _page(
        "Run not found",
        "<h1>Run not found</h1>"
        f'<p class="sub">No run <code>{_e(run_id)}</code> is recorded by this service.</p>',
    )


def link_refused_page(reason: str) -> str:
    """The 401 page for a card link whose signature is wrong or whose time is up."""
    return _page(
        "Link not valid",
        f'<h1>This link cannot open the decision record</h1><p class="sub">{escape(reason)}.</p>',
    )
