"""Conditional FHIR commits for adapter-mediated tools (``horis:commits``, binding ``fhir:commit``).

A tool that declares ``horis:commits [ horis:resourceType "Encounter" ; horis:element "priority" ;
horis:valueArg "queue" ; horis:codeSystem "…" ; horis:scope "user/Encounter.write" ]`` changes
one element of the resource the run hydrated, and only the version it hydrated:

1. The scope is checked against ``fhirAuthorization.scope`` (:mod:`adapters.fhir.scopes`). A
   missing scope, a target the run never read (no source version) or a value that has no code in
   the declared system mean **no request at all** and the effect is ``refused``.
2. The body is the hydrated resource (or, when the host did not keep it, a GET of the current one)
   with the element set; it is PUT with ``If-Match: W/"<the hydrated versionId>"`` — never the
   version just read — so the server refuses it when the record changed since the decision.
3. Each state write is one statement in its own short transaction (:class:`EffectLog`). A write
   that sends nothing is recorded once, in its final state; one that is sent is recorded
   ``attempted`` before the PUT leaves (so a crash mid-call leaves a row reconciliation can
   settle) and updated once with the answer.

Effect states::

    (none) ─┬─> refused                 no request sent (scope, no source version, no code)
            ├─> failed                  the read before the write failed; nothing was written
            └─> attempted ─┬─> accepted     2xx: the server stored a new version
                           ├─> conflicted   412 (or 409): the record changed since it was read
                           ├─> failed       other 4xx, or the connection was never made
                           └─> unknown      timeout / connection lost after sending / 5xx:
                                            settled later by :mod:`adapters.fhir.reconcile`

(``proposed`` is what the runtime reports when no adapter is registered at all.)

Each effect is reported on its own; there is no aggregate success. The handler returns the tool
result only when every effect is ``accepted``. When every effect was ``refused`` it raises
:class:`CommitRefused` (an ``EffectNotExecuted``: nothing was sent, so the ActionStep records the
refusal and follows ``horis:next`` — the decision stands, unwritten). Otherwise it raises
:class:`CommitFailed` (a ``ToolError``: the ActionStep takes ``horis:onError``, failing closed
because the record changed or the write broke). Either way nothing is asserted into the World,
and the exception's ``effects`` say what happened to each write.
"""

from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import httpx
from sqlalchemy import Connection, Engine, Table, literal_column, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.expression import Executable

from adapters.fhir.scopes import permits
from app.ontology.model import XSD, AdapterCommit, Individual, Ontology, ToolDef, local_name
from app.store import repo, session_scope
from app.store.models import Effect, utcnow
from app.tools.errors import EffectNotExecuted, ToolError
from app.tools.invoker import ToolCall

log = logging.getLogger("horismos.commit")

FHIR_JSON = "application/fhir+json"
EffectState = Literal[
    "proposed", "attempted", "accepted", "conflicted", "failed", "unknown", "refused"
]
#: States after which nothing more happens to an effect.
SETTLED: frozenset[str] = frozenset({"accepted", "conflicted", "failed", "refused"})
#: The share of the tool's ``horis:timeout`` each HTTP request may use: the adapter must decide
#: (and record ``unknown``) before the invoker's own deadline abandons the call.
_REQUEST_SHARE = 0.4


@dataclass(frozen=True, kw_only=True)
class SourceRef:
    """One entry of a run's source-version vector."""

    resource_type: str
    id: str
    version_id: str | None

    @property
    def reference(self) -> str:
        return f"{self.resource_type}/{self.id}"


@dataclass(frozen=True, kw_only=True)
class CommitContext:
    """What one hook call gives the adapter: where to write, under which grant, from what."""

    fhir_server: str
    access_token: str | None = field(default=None, repr=False)
    scope: str | None = None
    sources: tuple[SourceRef, ...] = ()
    #: Hydrated resource bodies by ``Type/id``; without one the adapter GETs the current body.
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The resource id the hook's context names per type (``encounterId`` → ``Encounter``).
    context_ids: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_hook(
        cls,
        *,
        fhir_server: str,
        fhir_authorization: Mapping[str, Any] | None,
        sources: Iterable[Any],
        resources: Iterable[Mapping[str, Any]] = (),
        context: Mapping[str, Any] | None = None,
    ) -> CommitContext:
        """Build from a CDS request: ``sources`` are dicts or objects with ``resource_type``,
        ``id`` (or ``resource_id``) and ``version_id``; ``context`` is the hook context, whose
        ``<type>Id`` keys (``encounterId``, ``patientId``) name the context resources."""
        auth = fhir_authorization or {}
        refs = tuple(_source_ref(s) for s in sources)
        bodies = {
            f"{r['resourceType']}/{r['id']}": r
            for r in resources
            if isinstance(r, Mapping) and "resourceType" in r and "id" in r
        }
        ids = {
            key[:-2][:1].upper() + key[:-2][1:]: str(value)
            for key, value in (context or {}).items()
            if key.endswith("Id") and isinstance(value, str) and "/" not in value
        }
        return cls(
            fhir_server=fhir_server.rstrip("/"),
            access_token=auth.get("access_token"),
            scope=auth.get("scope"),
            sources=refs,
            resources=bodies,
            context_ids=ids,
        )


def _source_ref(source: Any) -> SourceRef:
    def get(name: str) -> Any:
        return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)

    return SourceRef(
        resource_type=str(get("resource_type")),
        id=str(get("id") or get("resource_id")),
        version_id=get("version_id"),
    )


@dataclass(frozen=True, kw_only=True)
class EffectReport:
    """What happened to one write."""

    effect_id: str
    tool: str
    target: str  # absolute URL of the resource
    expected_version: str | None
    element: str
    value: Any
    state: EffectState
    resource_type: str | None = None
    status: int | None = None
    new_version: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "effectId": self.effect_id,
            "tool": self.tool,
            "target": self.target,
            "expectedVersion": self.expected_version,
            "resourceType": self.resource_type,
            "element": self.element,
            "value": self.value,
            "state": self.state,
            "status": self.status,
            "newVersion": self.new_version,
            "detail": self.detail,
        }


class CommitFailed(ToolError):
    """Raised by the handler when any effect is not ``accepted``; carries every effect's fate."""

    def __init__(self, effects: Sequence[EffectReport]) -> None:
        parts = [
            f"{e.effect_id}: {e.state}" + (f" ({e.detail})" if e.detail else "") for e in effects
        ]
        super().__init__("commit not accepted: " + "; ".join(parts), retryable=False)
        self.effects = tuple(effects)

    @property
    def conflicted(self) -> bool:
        """Whether the record changed since the decision was computed."""
        return any(e.state == "conflicted" for e in self.effects)

    def to_json(self) -> dict[str, object]:
        body = super().to_json()
        body["effects"] = [e.to_json() for e in self.effects]
        return body


class CommitRefused(EffectNotExecuted):
    """Raised by the handler when every write was ``refused``: no request left, so the ActionStep
    follows ``horis:next`` with the decision unwritten (``effect: "refused"`` in its trace entry,
    the message as its reason); carries every effect's fate."""

    def __init__(self, effects: Sequence[EffectReport]) -> None:
        reasons = [f"{e.resource_type}.{e.element} was not written: {e.detail}" for e in effects]
        super().__init__("; ".join(reasons), effect="refused")
        self.effects = tuple(effects)

    def to_json(self) -> dict[str, object]:
        body = super().to_json()
        body["effects"] = [e.to_json() for e in self.effects]
        return body


def element_value(ontology: Ontology, commit: AdapterCommit, value: Any) -> Any:
    """The FHIR value for ``commit.element``: a CodeableConcept when a code system is declared
    (from the enumeration individual's ``horis:code`` in that system), else the value itself.

    Raises ``LookupError`` when the individual has no code in the system.
    """
    if commit.code_system is None:
        return value
    individual = _individual(ontology, str(value))
    codes = [] if individual is None else list(individual.codes)
    for code in codes:
        system, _, local = code.partition("|")
        if system == commit.code_system:
            coding = {"system": system, "code": local}
            if individual is not None and individual.label:
                coding["display"] = individual.label
            return {"coding": [coding]}
    raise LookupError(f"{value} has no horis:code in {commit.code_system}")


def _individual(ontology: Ontology, value: str) -> Individual | None:
    """The enumeration individual an argument names, by IRI or (as the runtime passes arguments)
    by local name."""
    found = ontology.individuals.get(value)
    if found is not None:
        return found
    named = [i for i in ontology.individuals.values() if i.name == value]
    return named[0] if len(named) == 1 else None


def same_value(current: Any, wanted: Any) -> bool:
    """Whether an element read back from the server carries the value we wrote (codings compare
    by system and code; displays and extra codings on the server do not matter)."""
    if isinstance(wanted, Mapping) and "coding" in wanted:
        if not isinstance(current, Mapping):
            return False
        have = {(c.get("system"), c.get("code")) for c in current.get("coding", []) or []}
        return all((c.get("system"), c.get("code")) in have for c in wanted["coding"])
    return bool(current == wanted)


def _etag_version(etag: str | None) -> str | None:
    if not etag:
        return None
    text = etag[2:] if etag.startswith("W/") else etag
    return text.strip('"') or None


def _body_version(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    version = body.get("meta", {}).get("versionId") if isinstance(body, dict) else None
    return str(version) if version else None


def _outcome(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:2000]
    if isinstance(body, dict) and body.get("resourceType") != "OperationOutcome":
        return {k: body[k] for k in ("resourceType", "id", "meta") if k in body}
    return body


#: States that say a request went out (or may have): a later write that sent nothing must not
#: overwrite them, or an effect that needs reconciling would be lost.
_SENT: tuple[str, ...] = ("attempted", "accepted", "conflicted", "unknown")
_EFFECTS = cast(Table, Effect.__table__)


@dataclass(frozen=True, kw_only=True)
class EffectRow:
    """What identifies one effect in the ``effects`` table."""

    run_id: str
    effect_id: str
    tool: str
    target: str
    expected: str | None


@functools.cache
def _effect_upsert(dialect: str, sent: bool) -> Executable:
    """The upsert of one effect row, built once per backend (values come as parameters).

    A write that was sent counts one more attempt; one that sent nothing never hides an earlier
    sent attempt (the row keeps its state and the statement returns no row)."""
    if dialect not in ("postgresql", "sqlite"):
        raise NotImplementedError(f"no effect log for {dialect}")
    table = _EFFECTS
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    changes: dict[str, Any] = {
        name: insert.excluded[name]
        for name in ("state", "remote_response", "target_reference", "expected_version")
    }
    changes["updated_at"] = insert.excluded.updated_at
    if sent:
        changes["attempts"] = table.c.attempts + 1
    sent_states: list[Any] = [literal_column(f"'{s}'") for s in _SENT]  # this module's constants
    return insert.on_conflict_do_update(
        index_elements=["run_id", "effect_id"],
        set_=changes,
        where=None if sent else table.c.state.not_in(sent_states),
    ).returning(table.c.attempts)


def _effect_params(
    row: EffectRow, state: EffectState, response: dict[str, Any], sent: bool
) -> dict[str, Any]:
    now = utcnow()
    return {
        "run_id": row.run_id,
        "effect_id": row.effect_id,
        "tool": row.tool,
        "target_reference": row.target,
        "expected_version": row.expected,
        "state": state,
        "attempts": 1 if sent else 0,
        "remote_response": response,
        "created_at": now,
        "updated_at": now,
    }


class EffectLog:
    """Persists effects. Every write is one statement in one short transaction, committed at once
    (so it survives a crash) and holding no lock across a network call.

    It also remembers, per effect, the state it last committed (``persisted``), in the shape
    ``effect_reports`` reads back: what the log wrote is what the run's cards report, without a
    second transaction to read it. A write whose statement changed no row (an unsent retry that
    must not hide a sent attempt) leaves the memory as it is, as it leaves the row.

    With ``ensure_run`` the run's row may not exist yet (a hook call claims its run only when
    something is about to leave, :mod:`app.cds.claim`): a write that sends nothing then waits
    for the run's own transaction (:meth:`write_pending`), which stores it together with the
    outcome, or the answer is not given at all; and before a request leaves, ``ensure_run``
    commits the run's row (it raises, and nothing is sent, when another call holds the run),
    then what was waiting is written, then the ``attempted`` row."""

    def __init__(self, engine: Engine, *, ensure_run: Callable[[], None] | None = None) -> None:
        self.engine = engine
        self._ensure_run = ensure_run
        self._run_exists = ensure_run is None
        self._lock = threading.Lock()
        self._persisted: dict[str, dict[str, Any]] = {}  # effect id → effect_json shape
        #: unsent writes waiting for the run's row, by effect id: (row, state, response)
        self._pending: dict[str, tuple[EffectRow, EffectState, dict[str, Any]]] = {}

    def persisted(self) -> list[dict[str, Any]]:
        """Every effect this log committed, in the order first written, as ``effect_reports``
        would read it back (only this log's writes: one hook call's run)."""
        with self._lock:
            return [dict(e) for e in self._persisted.values()]

    def _remember(
        self,
        effect_id: str,
        *,
        state: EffectState,
        response: dict[str, Any],
        row: EffectRow | None = None,
        attempts: int | None = None,
    ) -> None:
        with self._lock:
            known = self._persisted.get(effect_id)
            if row is not None:
                target, expected, tool = row.target, row.expected, row.tool
            elif known is not None:
                target, expected, tool = known["target"], known["expectedVersion"], known["tool"]
            else:  # an effect another log wrote: nothing of it is known here
                return
            if attempts is None:
                attempts = int(known["attempts"]) if known is not None else 0
            self._persisted[effect_id] = _effect_entry(
                effect_id=effect_id,
                tool=tool,
                target=target,
                expected=expected,
                state=state,
                response=response,
                attempts=attempts,
            )

    def _execute(self, statement: Executable) -> int:
        with self.engine.begin() as connection:
            return int(getattr(connection.execute(statement), "rowcount", 0))

    def _upsert(
        self, row: EffectRow, *, state: EffectState, response: dict[str, Any], sent: bool
    ) -> None:
        statement = _effect_upsert(self.engine.dialect.name, sent)
        with self.engine.begin() as connection:
            attempts = connection.execute(
                statement, _effect_params(row, state, response, sent)
            ).scalar_one_or_none()
        if attempts is not None:  # None: the row kept its sent state, and so does the memory
            self._remember(
                row.effect_id, state=state, response=response, row=row, attempts=attempts
            )

    def _claim_run(self) -> None:
        """Make sure the run's row is committed before a request leaves (see the class)."""
        if self._run_exists or self._ensure_run is None:
            return
        self._ensure_run()
        self._run_exists = True
        if self._pending:
            with self.engine.begin() as connection:
                self.write_pending(connection)
            self._pending.clear()

    def write_pending(self, connection: Connection) -> None:
        """Write the unsent effects that wait for the run's row, in the caller's transaction
        (the one that stores the run). Nothing was sent for them, so nothing else can have
        written their rows."""
        statement = _effect_upsert(connection.dialect.name, False)
        for row, state, response in list(self._pending.values()):
            connection.execute(statement, _effect_params(row, state, response, False))

    def attempt(self, row: EffectRow, response: dict[str, Any]) -> None:
        """Record the effect ``attempted`` (one more attempt): call before the request leaves."""
        self._claim_run()
        self._upsert(row, state="attempted", response=response, sent=True)

    def unsent(self, row: EffectRow, state: EffectState, response: dict[str, Any]) -> None:
        """Record an effect for which no write was sent, directly in its final ``state``."""
        if not self._run_exists:  # the run's own transaction will store it (see the class)
            self._pending[row.effect_id] = (row, state, response)
            self._remember(row.effect_id, state=state, response=response, row=row, attempts=0)
            return
        self._upsert(row, state=state, response=response, sent=False)

    def set(
        self, run_id: str, effect_id: str, state: EffectState, response: dict[str, Any]
    ) -> None:
        """Move a recorded effect to ``state`` (the answer to its request, or reconciliation)."""
        table = _EFFECTS
        done = self._execute(
            update(table)
            .where(table.c.run_id == run_id, table.c.effect_id == effect_id)
            .values(state=state, remote_response=response, updated_at=utcnow())
        )
        if done != 1:
            raise LookupError(f"no effect {effect_id} in run {run_id}")
        self._remember(effect_id, state=state, response=response)


class FhirCommitAdapter:
    """The ``fhir`` scheme handler of one hook call.

    Register it with ``invoker.register_scheme("fhir", adapter)``. ``ensure_run`` (a hook
    call's claim, :mod:`app.cds.claim`) is called before any request leaves; until then the
    run's row may not exist, and writes that send nothing wait for :meth:`write_pending`.
    """

    def __init__(
        self,
        *,
        ontology: Ontology,
        engine: Engine,
        context: CommitContext,
        http: httpx.Client | None = None,
        ensure_run: Callable[[], None] | None = None,
    ) -> None:
        self.ontology = ontology
        self.log = EffectLog(engine, ensure_run=ensure_run)
        self.context = context
        self._http = http

    def write_pending(self, connection: Connection) -> None:
        """Store the effects still waiting for the run's row in the run's own transaction."""
        self.log.write_pending(connection)

    def __call__(self, call: ToolCall) -> dict[str, Any]:
        if call.run_id is None:
            raise ToolError(f"{call.tool.name}: a commit needs a persisted run", kind="contract")
        effects = self.commit(call.tool, call.args, run_id=call.run_id, timeout=call.timeout)
        if effects and all(e.state == "refused" for e in effects):
            raise CommitRefused(effects)  # nothing sent: the decision stands, unwritten
        if any(e.state != "accepted" for e in effects):
            raise CommitFailed(effects)
        return self._result(call.tool, effects)

    def effects(self) -> list[dict[str, Any]]:
        """Every effect this adapter committed to the effect log, as ``effect_reports`` reads
        them back: one hook call's run, which no one else writes effects for."""
        return self.log.persisted()

    def notices(self) -> list[str]:
        """A card sentence per write the run attempted (empty when it attempted none), from what
        the adapter committed, so the card needs no second read of the effect log."""
        return [effect_notice(e) for e in self.effects()]

    def commit(
        self, tool: ToolDef, args: Mapping[str, Any], *, run_id: str, timeout: float
    ) -> list[EffectReport]:
        """Attempt every write the tool declares; one report per effect, each persisted."""
        commits = (tool.commits,) if tool.commits is not None else ()
        if not commits:
            raise ToolError(f"{tool.name} declares no horis:commits", kind="contract")
        owned: list[httpx.Client] = []

        def client() -> httpx.Client:
            """The host's client, else one built on first use: building one (TLS context) costs
            more than the rest of a refused write, so a write that sends nothing builds none."""
            if self._http is not None:
                return self._http
            if not owned:
                owned.append(httpx.Client(follow_redirects=False))
            return owned[0]

        try:
            return [self._one(client, tool, c, args, run_id, timeout) for c in commits]
        finally:
            for made in owned:
                made.close()

    # -- one effect -----------------------------------------------------------------------

    def _target(self, commit: AdapterCommit) -> SourceRef | str:
        """The hydrated resource to write, or why there is none."""
        candidates = [s for s in self.context.sources if s.resource_type == commit.resource_type]
        wanted = self.context.context_ids.get(commit.resource_type)
        if wanted is not None:
            candidates = [s for s in candidates if s.id == wanted]
        if not candidates:
            return f"the run read no {commit.resource_type}; there is no version to commit against"
        if len({s.reference for s in candidates}) > 1:
            return f"the run read several {commit.resource_type} resources; the target is ambiguous"
        target = candidates[-1]
        if target.id in (".", ".."):  # a URL path would resolve it to another resource
            return f"{target.reference} is not an id a write can be addressed to"
        if not target.version_id:
            return f"{target.reference} was read without a versionId; cannot commit conditionally"
        return target

    def _one(
        self,
        client: Callable[[], httpx.Client],
        tool: ToolDef,
        commit: AdapterCommit,
        args: Mapping[str, Any],
        run_id: str,
        timeout: float,
    ) -> EffectReport:
        target = self._target(commit)
        ref = target.reference if isinstance(target, SourceRef) else commit.resource_type
        url = f"{self.context.fhir_server}/{ref}"
        expected = target.version_id if isinstance(target, SourceRef) else None
        effect_id = f"{tool.name}:{ref}.{commit.element}"
        raw = args.get(commit.value_arg)
        try:
            value, untranslatable = element_value(self.ontology, commit, raw), None
        except LookupError as exc:
            value, untranslatable = raw, str(exc)
        report = _Report(
            effect_id, tool.iri, url, expected, commit.resource_type, commit.element, value
        )
        row = EffectRow(
            run_id=run_id, effect_id=effect_id, tool=tool.iri, target=url, expected=expected
        )

        def unsent(state: EffectState, response: dict[str, Any], **kw: Any) -> EffectReport:
            """No write left: one row, written once, in its final state."""
            self.log.unsent(row, state, {**response, "change": report.change()})
            log.info("effect %s of run %s: %s (nothing written)", effect_id, run_id, state)
            return report.build(state, **kw)

        def settle(state: EffectState, response: dict[str, Any], **kw: Any) -> EffectReport:
            """The answer to the PUT (or its absence): one update of the ``attempted`` row."""
            self.log.set(run_id, effect_id, state, {**response, "change": report.change()})
            log.info("effect %s of run %s: %s", effect_id, run_id, state)
            return report.build(state, **kw)

        if not isinstance(target, SourceRef):
            return unsent("refused", {"reason": target}, detail=target)
        if not permits(self.context.scope, commit.scope, commit.operation):
            reason = f"fhirAuthorization.scope does not grant {commit.scope}"
            return unsent(
                "refused", {"reason": reason, "granted": self.context.scope}, detail=reason
            )
        if untranslatable is not None:
            return unsent("refused", {"reason": untranslatable}, detail=untranslatable)

        headers = {"accept": FHIR_JSON}
        if self.context.access_token:
            headers["authorization"] = f"Bearer {self.context.access_token}"
        budget = httpx.Timeout(max(timeout * _REQUEST_SHARE, 0.1))

        body = self._hydrated(ref, expected)
        if body is None:
            try:
                current = client().get(url, headers=headers, timeout=budget)
            except httpx.HTTPError as exc:
                msg = f"reading {ref} failed: {type(exc).__name__}: {exc}"
                return unsent("failed", {"error": msg}, detail=msg)
            if current.status_code != 200:
                msg = f"reading {ref} answered {current.status_code}"
                return unsent(
                    "failed",
                    {"status": current.status_code, "body": _outcome(current)},
                    detail=msg,
                    status=current.status_code,
                )
            body = current.json()
        body = copy.deepcopy(dict(body))
        body[commit.element] = report.value
        meta = body.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
            meta.pop("lastUpdated", None)

        if_match = f'W/"{expected}"'
        request = {"method": "PUT", "url": url, "ifMatch": if_match}
        self.log.attempt(row, {"request": request, "change": report.change()})
        try:
            response = client().put(
                url,
                json=body,
                headers={**headers, "content-type": FHIR_JSON, "if-match": if_match},
                timeout=budget,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            msg = f"no connection to {url}: {type(exc).__name__}"
            return settle("failed", {"request": request, "error": msg}, detail=msg)
        except httpx.HTTPError as exc:
            msg = f"no answer after sending: {type(exc).__name__}"
            return settle("unknown", {"request": request, "error": msg}, detail=msg)
        status = response.status_code
        answer = {"request": request, "status": status, "body": _outcome(response)}
        if 200 <= status < 300:
            version = _etag_version(response.headers.get("etag")) or _body_version(response)
            answer["newVersion"] = version
            return settle("accepted", answer, status=status, new_version=version)
        if status in (409, 412):
            msg = f"{ref} changed since version {expected} was read"
            return settle("conflicted", answer, status=status, detail=msg)
        if status >= 500:
            msg = f"the server answered {status}; whether it stored the change is unknown"
            return settle("unknown", answer, status=status, detail=msg)
        return settle(
            "failed", answer, status=status, detail=f"the server refused the write ({status})"
        )

    def _hydrated(self, ref: str, expected: str | None) -> Mapping[str, Any] | None:
        body = self.context.resources.get(ref)
        if body is None or (body.get("meta") or {}).get("versionId") != expected:
            return None
        return body

    def _result(self, tool: ToolDef, effects: Sequence[EffectReport]) -> dict[str, Any]:
        """The tool result: every string-typed declared effect gets the versioned reference of
        what was committed (``Encounter/e1/_history/<v>``); ``horis:now`` is the runtime's."""
        written = [
            e.target.removeprefix(self.context.fhir_server + "/") + f"/_history/{e.new_version}"
            for e in effects
        ]
        result: dict[str, Any] = {}
        for decl in tool.effects:
            if decl.type == f"{XSD}string" and not decl.now:
                result[local_name(decl.property)] = (
                    written[0] if len(written) == 1 else " ".join(written)
                )
        return result


@dataclass
class _Report:
    effect_id: str
    tool: str
    target: str
    expected: str | None
    resource_type: str
    element: str
    value: Any

    def change(self) -> dict[str, Any]:
        return {"resourceType": self.resource_type, "element": self.element, "value": self.value}

    def build(self, state: EffectState, **kw: Any) -> EffectReport:
        return EffectReport(
            effect_id=self.effect_id,
            tool=self.tool,
            target=self.target,
            expected_version=self.expected,
            resource_type=self.resource_type,
            element=self.element,
            value=self.value,
            state=state,
            **kw,
        )


def effect_reports(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """Every effect of a run as persisted (for cards, ``GET /runs/{id}`` and the CLI)."""
    with session_scope(engine) as session:
        rows = repo.list_effects(session, run_id=run_id)
        return [effect_json(row) for row in rows]


def effect_json(row: Any) -> dict[str, Any]:
    """One persisted effect as JSON."""
    return _effect_entry(
        effect_id=row.effect_id,
        tool=row.tool,
        target=row.target_reference,
        expected=row.expected_version,
        state=row.state,
        response=row.remote_response or {},
        attempts=row.attempts,
    )


def _effect_entry(
    *,
    effect_id: str,
    tool: str,
    target: str,
    expected: str | None,
    state: str,
    response: Mapping[str, Any],
    attempts: int,
) -> dict[str, Any]:
    """An effect as JSON from its ``effects`` columns (``remote_response`` as ``response``)."""
    change = response.get("change") or {}
    return {
        "effectId": effect_id,
        "tool": tool,
        "target": target,
        "expectedVersion": expected,
        "resourceType": change.get("resourceType"),
        "element": change.get("element"),
        "value": change.get("value"),
        "state": state,
        "status": response.get("status"),
        "newVersion": response.get("newVersion"),
        "detail": response.get("reason") or response.get("error"),
        "attempts": attempts,
    }


def _reference(effect: Mapping[str, Any]) -> str | None:
    """``Type/id`` of the effect's target, or None when the write had no target resource."""
    target = str(effect.get("target") or "")
    kind = effect.get("resourceType")
    if kind:
        marker = f"/{kind}/"
        return target[target.rindex(marker) + 1 :] if marker in target else None
    parts = target.rsplit("/", 2)
    return "/".join(parts[-2:]) if len(parts) >= 2 else target or None


def effect_notice(effect: Mapping[str, Any]) -> str:
    """One plain sentence for a card about what happened to a write (``effect_reports`` item)."""
    ref = _reference(effect)
    what = f"{effect.get('element')} of {ref}"
    state = effect.get("state")
    if state == "accepted":
        return f"Recorded in the EHR: {what} was updated (version {effect.get('newVersion')})."
    if state == "conflicted":
        return (
            f"Not recorded in the EHR: {ref} changed since the decision was computed "
            f"(it was read at version {effect.get('expectedVersion')}); {what} was left as it is. "
            "Review the current record before acting on this decision."
        )
    if state == "refused":
        kind = effect.get("resourceType") or (ref or "").split("/")[0] or "the record"
        element = f"{kind}.{effect.get('element')}"
        where = f" ({ref})" if ref else ""
        return (
            f"The decision was not written to the EHR. {element}{where} was not written: "
            f"{effect.get('detail')}."
        )
    if state == "unknown":
        return (
            f"Not confirmed: the EHR did not answer the update of {what}; it will be checked again."
        )
    if state == "failed":
        return f"Not recorded in the EHR: the update of {what} failed ({effect.get('detail')})."
    return f"The update of {what} is {state}."


def effect_notices(engine: Engine, run_id: str) -> list[str]:
    """A card sentence per write the run attempted (empty when it attempted none)."""
    return [effect_notice(e) for e in effect_reports(engine, run_id)]
