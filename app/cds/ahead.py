"""Order-sign answered ahead: what an order-sign service would answer is computed when the
order-select call for the same patient and draft orders comes in, and the order-sign call whose
input is the same answers from it.

The EHR calls ``order-select`` as the clinician picks an order and ``order-sign`` when they sign
it, often seconds apart, with the same patient, drafts and chart. An order-sign service declared
``horis:answeredAhead`` is run, after the order-select call has been answered, on the request
that order-sign would send: the order-select call's context without ``selections``, each
prefetch key filled from the order-select call's prefetch where both render the same query,
else read from its ``fhirServer`` with its token. The run is stored like any run, with the key
of its input (:func:`input_key`) in ``runs.ahead_key``, and answers nobody.

The order-sign call computes the same key from what it was sent (after the same validation) and,
when a completed run answered ahead has it, answers from that run: a run of its own under its
own id and hookInstance, with the trace, source versions, outcome and cards of the run it reused
(``runs.reused_run_id``), each card under a fresh uuid and linking to the new run's record. Any
change recomputes: a resource's content or version, a draft order, the context, a prefetch key's
truncation or unread records, the deployment's version or digest, the FHIR server. The answer
is the one computed at order-select time, so it is only reused within
``HORISMOS_ANSWER_AHEAD_SECONDS`` (default 300) of it and on the same day in the service's time
zone; after that the call computes afresh. Only a run that decided is reused (one left
undecided, by its deadline or anything else, is computed afresh at order-sign). A run answered
ahead acts on nothing outside, and its verdicts on time change only from one UTC day to the
next (verification: only ``horis:pure`` tools, no language model, no wait, no ``horis:maxAge``
and no window of a part of a day).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from app import __version__
from app.cds.prefetch import Gathered, Unrenderable, render
from app.cds.requests import HookRequest
from app.deployments import Deployments
from app.digest import canonical_digest
from app.fhir_json import resources_of
from app.ontology.hooks import HOOKS
from app.ontology.model import CdsServiceDef
from app.store import ahead as ahead_store
from app.store.db import describe_error
from app.store.models import utcnow
from app.store.run_rows import CardIssue, RunColumns
from app.store.runs import RunStore

log = logging.getLogger("horismos.cds")

#: The response extension that names the run (``runId``) and the run it reused (``reusedRun``).
EXTENSION_KEY = "dev.horismos.run"

#: ``runs.ahead_key`` of a run computed ahead that did not decide: still a run computed ahead
#: (shown to nobody, not counted), never reused.
NOT_REUSED = "undecided"

#: Changes when what the key covers changes: keys of an older version never match.
KEY_VERSION = 1

#: The context fields of order-select that order-sign does not have (``selections``), from
#: the CDS Hooks registry.
_SELECT_ONLY = frozenset(f.name for f in HOOKS["order-select"]) - {
    f.name for f in HOOKS["order-sign"]
}


def input_key(
    *,
    service: CdsServiceDef,
    deployment: tuple[str, str, str | None],
    req: HookRequest,
    gathered: Gathered,
) -> str:
    """The key of a call's input: equal keys, equal answers at the same time. ``deployment`` is
    (IRI, version, digest). Covers the hook context as read (draft orders included) and what was
    noted reading it, the FHIR server, and per prefetch key the content of each resource in the
    order received (its ``meta.versionId`` and ``lastUpdated`` with it: the source-version vector
    and more), its truncation and the records left out as unread."""
    data = {
        key: None if value is None else [canonical_digest(r) for r in resources_of(value)]
        for key, value in sorted(gathered.data.items())
    }
    return canonical_digest(
        {
            "v": KEY_VERSION,
            "build": __version__,  # the release that computed it
            "service": service.id,
            "deployment": list(deployment),
            "hook": req.hook,
            "fhirServer": req.fhir_server,
            "context": req.context,
            "notes": [n.to_json() for n in req.notes],
            "data": data,
            "truncated": dict(sorted(gathered.truncated.items())),
            "invalid": {k: [u.to_json() for u in v] for k, v in sorted(gathered.invalid.items())},
        }
    )


def sign_request(
    body: Mapping[str, Any],
    *,
    select: CdsServiceDef,
    sign: CdsServiceDef,
) -> dict[str, Any]:
    """The order-sign request ``sign`` would be sent for the order-select call ``body`` (as the
    client sent it) to ``select``: its context without ``selections``, and each of ``sign``'s
    prefetch keys that renders the same query as one of ``select``'s the client filled, with
    that key's data as sent. The other keys are read from ``fhirServer``, as for any call."""
    context = {k: v for k, v in dict(body.get("context") or {}).items() if k not in _SELECT_ONLY}
    given = body.get("prefetch")
    sent: dict[str, Any] = given if isinstance(given, dict) else {}
    queries: dict[str, str] = {}
    for t in select.prefetch:
        if t.key in sent:
            try:
                queries.setdefault(render(t.query, context), t.key)
            except Unrenderable:
                continue
    prefetch: dict[str, Any] = {}
    for t in sign.prefetch:
        try:
            query = render(t.query, context)
        except Unrenderable:
            continue
        if query in queries:
            prefetch[t.key] = sent[queries[query]]
    out: dict[str, Any] = {
        "hook": "order-sign",
        "hookInstance": str(uuid.uuid4()),
        "context": context,
        "prefetch": prefetch,
    }
    for name in ("fhirServer", "fhirAuthorization"):
        if body.get(name) is not None:
            out[name] = body[name]
    return out


def still_current(computed: datetime, now: datetime, *, seconds: float, zone: tzinfo) -> bool:
    """Whether an answer computed at ``computed`` may stand for a call at ``now``: within
    ``seconds`` after it, on the same UTC day and the same day in ``zone``."""
    age = (now - computed).total_seconds()
    # a rule's dates (an age, a window of whole days) are judged on the UTC day of the run's
    # time: the same UTC day, the same verdicts (verification refuses finer time checks); and
    # the same day where the service's cards show their dates
    utc_day = computed.astimezone(UTC).date() == now.astimezone(UTC).date()
    same_day = computed.astimezone(zone).date() == now.astimezone(zone).date()
    return 0 <= age <= seconds and utc_day and same_day


def answer_of(
    response: Mapping[str, Any], *, reused: str, run_id: str, run_url: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The response of run ``reused`` as run ``run_id``'s own: every card and suggestion under a
    fresh uuid (feedback names the run that answered), each link to the reused run's record
    now to ``run_url``, the run's id wherever it was named. Also returns old uuid → new."""
    uuids: dict[str, str] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for k, v in value.items():
                if k == "uuid" and isinstance(v, str):
                    out[k] = uuids.setdefault(v, str(uuid.uuid4()))
                elif k == "url" and isinstance(v, str) and reused in v:
                    out[k] = run_url  # a link is signed for its run: built afresh
                else:
                    out[k] = walk(v)
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, str) and reused in value:
            return value.replace(reused, run_id)
        return value

    return walk(response), uuids


def order_sign_services(
    deployments: Deployments, service_id: str
) -> tuple[CdsServiceDef, list[CdsServiceDef]] | None:
    """(the order-select service ``service_id``, every served ``horis:answeredAhead`` order-sign
    service), or None when ``service_id`` is no served order-select service or none is."""
    dep = deployments.for_service(service_id)
    if dep is None or not dep.serving or dep.ontology is None:
        return None
    try:
        select = dep.ontology.service(service_id)
    except KeyError:
        return None
    if select.hook != "order-select":  # every other call: nothing to list
        return None
    signs = [
        s
        for other in deployments
        if other.serving and other.ontology is not None
        for s in other.ontology.services.values()
        if s.answered_ahead
    ]
    return (select, signs) if signs else None


def reuse(
    *,
    engine: Engine,
    check: Callable[[Connection], object],
    service: CdsServiceDef,
    row: Mapping[str, Any],
    key: str,
    now: datetime,
    seconds: float,
    zone: tzinfo,
    run_url: Callable[[str], str],
    ahead: bool,
) -> dict[str, Any] | None:
    """The answer of the run computed ahead with ``key``, stored in one transaction as the call's
    run ``row`` that names it; None when there is none, it is no longer current or the
    hookInstance is taken (the call computes afresh, and a retry is answered as any retry is).
    ``check`` raises ``VersionMoved`` when the deployment's active version moved. With
    ``ahead`` (a run about to be computed ahead), ``{}`` when a current one exists already."""
    since = utcnow() - timedelta(seconds=seconds)
    try:
        source = ahead_store.lookup(engine, service.id, key, since)
        if source is None:
            return None
        found = source["id"]
        computed = datetime.fromisoformat(str(source["now"]))
        current = still_current(computed, now, seconds=seconds, zone=zone)
        if ahead or not current:
            return {} if ahead and current else None
        with engine.begin() as connection:
            check(connection)
            run_id = str(row["id"])
            response, uuids = answer_of(
                source["response"], reused=found, run_id=run_id, run_url=run_url(run_id)
            )
            response["extension"][EXTENSION_KEY]["reusedRun"] = found
            own: RunColumns = {
                "id": run_id,
                "service_id": service.id,
                "hook_instance": row["hook_instance"],
                "request_digest": row["request_digest"],
                "response": response,
            }
            cards = [
                CardIssue(uuid=uuids[old], key=card_key, rules=rules)
                for old, (card_key, rules) in source["cards"].items()
                if old in uuids
            ]
            stored = RunStore.of(engine).reuse(connection, reused=found, columns=own, cards=cards)
            if not stored:
                return None
    except SQLAlchemyError as exc:
        log.warning("no answer computed ahead could be read: %s", describe_error(exc))
        return None
    log.info("run %s answers from run %s, computed ahead", run_id, found)
    return response


__all__ = [
    "EXTENSION_KEY",
    "KEY_VERSION",
    "NOT_REUSED",
    "answer_of",
    "input_key",
    "order_sign_services",
    "reuse",
    "sign_request",
    "still_current",
]
