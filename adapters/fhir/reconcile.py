"""Settling effects whose fate is not known, by re-reading their target.

An effect is left ``unknown`` when the write was sent but no answer came back (timeout, connection
lost, 5xx), and stays ``attempted`` when the process died mid-call. Reconciliation re-reads the
target resource and decides, for an update or a patch:

- the write landed (``accepted``) when the version that followed the expected one — from
  ``_history`` when the server serves it, else the current resource — differs from the expected
  version and carries the value we wrote;
- it did not (``failed``) when the server still holds the expected version, or a later version
  without our value, or the resource is gone (404/410);
- it stays as it is when the server cannot be reached or will not say (5xx, 401/403).

A create is settled by searching for the identifier it carried (``Type?identifier=system|value``):
``accepted`` when the server holds a resource with it (the newest, if a server without
``If-None-Exist`` made several), ``failed`` when it holds none.

The same check settles the effects of a run whose card suggestion the clinician accepted (CDS
feedback, :func:`reconcile_run`): a ``proposed`` or ``refused`` write that the EHR then made
itself is ``accepted``. ``horismos reconcile`` and the service's periodic task call
:func:`reconcile_pending`. Reads carry no Authorization header unless a token is given: the hook's
access token is not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import Engine

from adapters.fhir.writes import FHIR_JSON
from app.store import session_scope
from app.store.effects import EffectLog, EffectState, effect_json, effect_reports, list_effects

log = logging.getLogger("horismos.reconcile")

#: An ``attempted`` effect older than this is treated as ``unknown`` (its process died).
STALE_ATTEMPT = timedelta(minutes=5)
#: States :func:`reconcile_run` settles after accepted CDS feedback.
FEEDBACK_STATES: tuple[EffectState, ...] = ("proposed", "attempted", "unknown", "refused")


@dataclass(frozen=True, kw_only=True)
class Settlement:
    """What reconciliation concluded for one effect."""

    run_id: str
    effect_id: str
    target: str
    before: str
    after: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {
            "runId": self.run_id,
            "effectId": self.effect_id,
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "detail": self.detail,
        }


def same_value(current: Any, wanted: Any) -> bool:
    """Whether an element read back from the server carries the value we wrote (codings compare
    by system and code; displays and extra codings on the server do not matter)."""
    if isinstance(wanted, Mapping) and "coding" in wanted:
        if not isinstance(current, Mapping):
            return False
        have = {(c.get("system"), c.get("code")) for c in current.get("coding", []) or []}
        return all((c.get("system"), c.get("code")) in have for c in wanted["coding"])
    return bool(current == wanted)


def _versions_oldest_first(bundle: Any) -> list[dict[str, Any]]:
    entries = bundle.get("entry", []) if isinstance(bundle, dict) else []
    versions = [e["resource"] for e in entries if isinstance(e, dict) and "resource" in e]
    return sorted(versions, key=lambda r: str((r.get("meta") or {}).get("lastUpdated", "")))


def _version(resource: dict[str, Any]) -> str | None:
    version = (resource.get("meta") or {}).get("versionId")
    return str(version) if version else None


def judge(
    client: httpx.Client, effect: dict[str, Any], *, token: str | None = None, timeout: float = 5.0
) -> tuple[EffectState | None, str, dict[str, Any]]:
    """Decide one effect from the server's current record.

    Returns ``(state, why, evidence)``; ``state`` is None when the server could not tell.
    """
    if effect.get("operation") == "create":
        return _judge_create(client, effect, token=token, timeout=timeout)
    url = str(effect["target"])
    expected = effect.get("expectedVersion")
    element, value = effect.get("element"), effect.get("value")
    headers = {"accept": FHIR_JSON}
    if token:
        headers["authorization"] = f"Bearer {token}"
    try:
        response = client.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        return None, f"{url} unreachable: {type(exc).__name__}", {}
    if response.status_code in (404, 410):
        return "failed", f"{url} no longer exists", {"status": response.status_code}
    if response.status_code != 200:
        return None, f"{url} answered {response.status_code}", {"status": response.status_code}
    current = response.json()
    evidence: dict[str, Any] = {"currentVersion": _version(current)}
    if element is None:
        return None, "the effect does not record what it changed", evidence
    successor = _successor(client, url, expected, headers, timeout)
    candidate = successor if successor is not None else current
    version = _version(candidate)
    if version == expected:
        return "failed", f"the server still holds version {expected}", evidence
    if same_value(candidate.get(element), value):
        evidence["newVersion"] = version
        return "accepted", f"version {version} carries the change", evidence
    return "failed", f"version {version} does not carry the change", evidence


def _judge_create(
    client: httpx.Client, effect: dict[str, Any], *, token: str | None, timeout: float
) -> tuple[EffectState | None, str, dict[str, Any]]:
    """Whether the server holds the resource a create sent, by the identifier it carried."""
    url = str(effect["target"])
    identifier = effect.get("identifier")
    if not identifier:
        return None, "the effect does not record the identifier it created", {}
    headers = {"accept": FHIR_JSON}
    if token:
        headers["authorization"] = f"Bearer {token}"
    try:
        response = client.get(
            url, params={"identifier": identifier}, headers=headers, timeout=timeout
        )
    except httpx.HTTPError as exc:
        return None, f"{url} unreachable: {type(exc).__name__}", {}
    if response.status_code != 200:
        return None, f"{url} answered {response.status_code}", {"status": response.status_code}
    found = _versions_oldest_first(response.json())
    if not found:
        return "failed", f"the server holds no {url.rsplit('/', 1)[-1]} with {identifier}", {}
    newest = found[-1]
    created = f"{newest.get('resourceType')}/{newest.get('id')}"
    evidence = {"created": created, "newVersion": _version(newest), "found": len(found)}
    return "accepted", f"{created} carries {identifier}", evidence


def _successor(
    client: httpx.Client, url: str, expected: Any, headers: dict[str, str], timeout: float
) -> dict[str, Any] | None:
    """The version right after ``expected`` from ``_history``, when the server can tell."""
    if not expected:
        return None
    try:
        response = client.get(f"{url}/_history", headers=headers, timeout=timeout)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    versions = _versions_oldest_first(response.json())
    ids = [_version(v) for v in versions]
    if expected not in ids:
        return None
    index = ids.index(expected)
    return versions[index + 1] if index + 1 < len(versions) else versions[index]


def _settle(
    engine: Engine,
    rows: Iterable[tuple[str, dict[str, Any]]],
    *,
    http: httpx.Client | None,
    token: str | None,
) -> list[Settlement]:
    client = http or httpx.Client(follow_redirects=False)
    effects = EffectLog(engine)
    settled: list[Settlement] = []
    try:
        for run_id, effect in rows:
            state, why, evidence = judge(client, effect, token=token)
            after = state or effect["state"]
            if state is not None:
                response = {"reconciled": why, "change": _change_of(effect), **evidence}
                effects.set(run_id, effect["effectId"], state, response)
            log.info(
                "reconciled %s of run %s: %s -> %s (%s)",
                effect["effectId"],
                run_id,
                effect["state"],
                after,
                why,
            )
            settled.append(
                Settlement(
                    run_id=run_id,
                    effect_id=effect["effectId"],
                    target=str(effect["target"]),
                    before=effect["state"],
                    after=after,
                    detail=why,
                )
            )
    finally:
        if http is None:
            client.close()
    return settled


def _change_of(effect: dict[str, Any]) -> dict[str, Any]:
    """The ``change`` an effect recorded, as the effect log keeps it."""
    operation = effect.get("operation") or "update"
    change: dict[str, Any] = {"operation": operation}
    if effect.get("resourceType"):
        change["resourceType"] = effect["resourceType"]
    if operation == "create":
        change.update(identifier=effect.get("identifier"), recipients=effect.get("recipients"))
    else:
        change.update(element=effect["element"], value=effect["value"])
    return change


def reconcile_pending(
    engine: Engine,
    *,
    http: httpx.Client | None = None,
    token: str | None = None,
    now: datetime | None = None,
    stale_attempt: timedelta = STALE_ATTEMPT,
) -> list[Settlement]:
    """Settle every ``unknown`` effect, and every ``attempted`` one older than ``stale_attempt``."""
    cutoff = (now or datetime.now(UTC)) - stale_attempt
    with session_scope(engine) as session:
        rows = [
            (row.run_id, effect_json(row))
            for row in list_effects(session, state=("unknown", "attempted"))
            if row.state == "unknown" or row.updated_at <= cutoff
        ]
    return _settle(engine, rows, http=http, token=token)


def reconcile_run(
    engine: Engine,
    run_id: str,
    *,
    http: httpx.Client | None = None,
    token: str | None = None,
    states: Sequence[EffectState] = FEEDBACK_STATES,
) -> list[Settlement]:
    """Settle a run's unsettled effects — what CDS feedback accepting a suggestion calls."""
    with session_scope(engine) as session:
        rows = [
            (row.run_id, effect)
            for row in list_effects(session, run_id=run_id)
            if (effect := effect_json(row))["state"] in states and _may_have_happened(effect)
        ]
    return _settle(engine, rows, http=http, token=token)


def _may_have_happened(effect: dict[str, Any]) -> bool:
    """A create that was never sent cannot have happened, whatever the clinician did: the EHR
    would have made its own resource, without the identifier the search looks for."""
    return effect.get("operation") != "create" or effect["state"] not in ("proposed", "refused")


def earlier_effects(
    effects: EffectLog,
    run_id: str,
    *,
    client: Callable[[], httpx.Client],
    fhir_server: str,
    token: str | None,
) -> dict[str, dict[str, Any]]:
    """The effects a run taken over from a dead process had logged, by effect id, for the
    commit adapter to consult before it sends anything: every ``attempted`` or ``unknown`` write
    on this call's ``fhirServer`` is first judged against the server with this call's token and
    its row updated (``accepted``: it landed; ``failed``: it did not). One the server will not
    tell about stays ``unknown``, and so is not sent again either."""
    found = effect_reports(effects.engine, run_id)
    for effect in found:
        if effect["state"] not in ("attempted", "unknown"):
            continue
        if not str(effect["target"]).startswith(fhir_server + "/"):
            continue  # the token only goes to this call's fhirServer
        state, why, evidence = judge(client(), effect, token=token)
        if state is None:
            state, why = "unknown", f"sent before the service restarted; {why}"
        change = {
            k: effect.get(k)
            for k in ("resourceType", "element", "value", "operation", "identifier")
        }
        effects.set(
            run_id, effect["effectId"], state, {"reconciled": why, "change": change, **evidence}
        )
        effect.update(state=state, detail=why)
        effect.update({k: evidence[k] for k in ("newVersion", "created") if k in evidence})
        log.info("effect %s of taken-over run %s: %s (%s)", effect["effectId"], run_id, state, why)
    return {e["effectId"]: e for e in found}


def reconcile_cli(
    *, url: str | None, run_id: str | None, as_json: bool, out: Callable[[str], None]
) -> int:
    """``horismos reconcile``: one line per effect examined; 1 when any is still unknown."""
    import json

    from app.settings import get_settings
    from app.store import make_engine

    engine = make_engine(url or get_settings().database_url)
    try:
        settled = reconcile_pending(engine) if run_id is None else reconcile_run(engine, run_id)
    finally:
        engine.dispose()
    for s in settled:
        if as_json:
            out(json.dumps(s.to_json(), sort_keys=True))
        else:
            out(f"{s.run_id} {s.effect_id}: {s.before} -> {s.after} ({s.detail})")
    if not as_json:
        out(f"{len(settled)} effect(s) examined")
    return 1 if any(s.after in ("unknown", "attempted") for s in settled) else 0
