"""The change page: one change to a deployment as a reviewer reads it, in one HTML document.

``GET /changes/{id}`` serves it to browsers (``Accept`` ranking ``text/html`` first, as for the
run page): where the change is in its lifecycle and who moved it there, what the policy checked,
the files it changes, the replay's report — every decision that changes with both proofs side by
side, and how many stay — and, once approved, how often it agreed with the active version on live
hook calls (shadow mode). Self-contained (inline style, no script), every value escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from app.api.pages import show_text
from app.api.run_proof import proof_text
from app.changes.envelope import ChangeView

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;
  background:#f5f6f8;margin:0}
main{max-width:1200px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:1.35em;margin:0 0 2px}h2{font-size:1.08em;margin:28px 0 8px;
  border-bottom:1px solid #d5d9e0;padding-bottom:4px}
.sub{color:#5b6472;margin:0 0 16px}
.card{background:#fff;border:1px solid #d5d9e0;border-radius:6px;padding:14px 18px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dt{color:#5b6472}dd{margin:0}
code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:.9em}
pre{white-space:pre-wrap;background:#fff;border:1px solid #d5d9e0;padding:10px;margin:6px 0}
.status{display:inline-block;border-radius:3px;padding:0 6px;font-weight:600}
.status.active,.status.approved{background:#eef6ea;color:#2f6b1f}
.status.refused{background:#fbeaea;color:#9b1c1c}
.status.proposed,.status.replayed{background:#eef3fc;color:#1f4e9c}
.status.superseded{background:#eceff3;color:#5b6472}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #d5d9e0}
th,td{text-align:left;vertical-align:top;padding:5px 8px;border-bottom:1px solid #e6e9ee}
th{background:#eceff3;font-weight:600;font-size:.9em}
td{font-size:.92em}
.ok{color:#2f6b1f}.no{color:#9b1c1c}.muted{color:#6b7480;font-size:.88em}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.pair h3{font-size:.95em;margin:8px 0 2px}
"""


def _e(value: Any) -> str:
    """Any value as escaped text, as every page shows it (``app.api.pages.show_text``)."""
    return escape(show_text(value))


def _decision(side: Mapping[str, Any] | None) -> str:
    if not side:
        return "no decision"
    decision = side.get("decision")
    said = (
        f"{decision.get('property')} = {decision.get('value')}"
        if isinstance(decision, Mapping)
        else "no decision"
    )
    return f"{said} (ended at {side.get('terminal')})"


def _proof(side: Mapping[str, Any] | None) -> str:
    proof = side.get("proof") if side else None
    return proof_text(proof) if isinstance(proof, Mapping) else "no proof: nothing was decided"


def _changed(items: list[Mapping[str, Any]], caption: str) -> str:
    if not items:
        return f'<p class="muted">{escape(caption)}</p>'
    blocks = []
    for item in items:
        before, after = item.get("before"), item.get("after")
        blocks.append(
            f'<div class="card"><p>Run <code>{_e(item.get("runId"))}</code>: '
            f"<b>{_e(_decision(before))}</b> → <b>{_e(_decision(after))}</b></p>"
            '<div class="pair">'
            f"<div><h3>Before (the active version)</h3><pre>{_e(_proof(before))}</pre></div>"
            f"<div><h3>After (this change)</h3><pre>{_e(_proof(after))}</pre></div>"
            "</div></div>"
        )
    return "".join(blocks)


def _impact(change: ChangeView) -> str:
    """The last population impact run on the change (``horismos change impact``), if any."""
    found = [e for e in change.events if e.state == "impact" and e.detail]
    if not found:
        return (
            '<h2>Impact on a population</h2><p class="muted">Not run: <code>horismos change '
            "impact CHANGE_ID --ndjson EXPORT --out DIR</code> decides every patient of a "
            "Bulk Data export under both versions.</p>"
        )
    detail = found[-1].detail or {}
    rows = "".join(
        f"<tr><td><code>{_e(sid)}</code></td><td>{_e(s.get('compared'))}</td>"
        f"<td><b>{_e(len(s.get('changed') or []))}</b></td>"
        f"<td>{_e(', '.join(s.get('changed') or []) or '—')}</td></tr>"
        for sid, s in (detail.get("services") or {}).items()
    )
    return (
        "<h2>Impact on a population</h2>"
        f"<p>Every patient of <code>{_e(detail.get('export'))}</code> decided at "
        f"{_e(detail.get('at'))} under the active version and under this change (the full "
        f"report, with both answers and proofs: <code>{_e(detail.get('report'))}</code>).</p>"
        "<table><tr><th>service</th><th>patients</th><th>changed</th><th>whose answer "
        f"changes</th></tr>{rows}</table>"
    )


def render_change_page(change: ChangeView) -> str:
    """The page for one change."""
    status = f'<span class="status {_e(change.status)}">{_e(change.status)}</span>'
    facts = [
        ("Deployment", f"{_e(change.deploymentId)} <code>{_e(change.deployment)}</code>"),
        ("Version", f"{_e(change.baseVersion)} → {_e(change.candidateVersion or '—')}"),
        (
            "Digest",
            f"<code>{_e(change.baseDigest[:16])}</code> → "
            f"<code>{_e((change.candidateDigest or '—')[:16])}</code>",
        ),
        (
            "Author",
            f"{_e(change.author)}"
            + (" (drafted by a model)" if change.origin == "drafted" else ""),
        ),
        ("Files", ", ".join(f"<code>{_e(f)}</code>" for f in change.files)),
    ]
    if change.reason:
        facts.append(("Refused because", f'<span class="no">{_e(change.reason)}</span>'))
    parts = [
        f"<h1>Change {_e(change.id)} {status}</h1>",
        f'<p class="sub">{_e(change.rationale) or "No rationale given."}</p>',
        '<div class="card"><dl>'
        + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl></div>",
        "<h2>Lifecycle</h2><table><tr><th>state</th><th>by</th><th>when</th><th>detail</th></tr>"
        + "".join(
            f"<tr><td>{_e(e.state)}</td><td>{_e(e.actor)}</td>"
            f"<td>{_e(e.at.isoformat(timespec='seconds'))}</td><td>{_e(e.detail)}</td></tr>"
            for e in change.events
        )
        + "</table>",
    ]
    checks = (change.policy or {}).get("checks") or []
    parts.append(
        "<h2>Policy</h2><table><tr><th>check</th><th>result</th><th>detail</th></tr>"
        + "".join(
            f"<tr><td>{_e(c.get('check'))}</td>"
            f'<td class="{"ok" if c.get("ok") else "no"}">{"passed" if c.get("ok") else "refused"}'
            f"</td><td>{_e(c.get('detail'))}</td></tr>"
            for c in checks
        )
        + "</table>"
    )
    replay = change.replay
    if replay:
        changed = list(replay.get("changed") or [])
        parts.append(
            f"<h2>Replay of the last {_e(replay.get('last'))} runs</h2>"
            f"<p>{_e(replay.get('replayed'))} run(s) decided again in the sandbox: "
            f"<b>{len(changed)}</b> decision(s) change, <b>{_e(replay.get('same'))}</b> stay"
            + (
                f", {len(replay.get('errors') or [])} could not be replayed"
                if replay.get("errors")
                else ""
            )
            + ".</p>"
            + _changed(changed, "No decision changes.")
        )
    else:
        parts.append('<h2>Replay</h2><p class="muted">Not replayed yet.</p>')
    parts.append(_impact(change))
    shadow = change.shadow
    if shadow:
        parts.append(
            "<h2>Shadow mode: beside the active version on live calls</h2>"
            f"<p>{_e(shadow.get('runs'))} live call(s): agreed on "
            f"<b>{_e(shadow.get('agree'))}</b>, disagreed on <b>{_e(shadow.get('disagree'))}</b>"
            + (f", {_e(shadow.get('errors'))} could not be decided" if shadow.get("errors") else "")
            + ". Its decisions are stored, never returned.</p>"
            + _changed(list(shadow.get("disagreements") or []), "No disagreement so far.")
        )
    elif change.status == "approved":
        parts.append(
            '<h2>Shadow mode</h2><p class="muted">Approved: it decides beside the active '
            "version on every live call from now on; none yet.</p>"
        )
    body = "".join(parts)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="robots" content="noindex">'
        f"<title>Change {escape(change.id)}</title><style>{_CSS}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )


__all__ = ["render_change_page"]
