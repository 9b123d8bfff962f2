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
3. Every transition is committed to the ``effects`` table at once, ``attempted`` before the PUT
   leaves, so a crash mid-call leaves a trace that reconciliation can settle.

Effect states::

    proposed ─┬─> refused                 no request sent (scope, no source version, no code)
              ├─> failed                  the read before the write failed; nothing was written
              └─> attempted ─┬─> accepted     2xx: the server stored a new version
                             ├─> conflicted   412 (or 409): the record changed since it was read
                             ├─> failed       other 4xx, or the connection was never made
                             └─> unknown      timeout / connection lost after sending / 5xx:
                                              settled later by :mod:`adapters.fhir.reconcile`

Each effect is reported on its own; there is no aggregate success. The handler returns the tool
result only when every effect is ``accepted``; otherwise it raises :class:`CommitFailed` (a
``ToolError``: the ActionStep takes ``horis:onError`` and nothing is asserted into the World),
whose ``effects`` say what happened to each write.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from sqlalchemy import Engine

from adapters.fhir.scopes import permits
from app.ontology.model import XSD, AdapterCommit, Individual, Ontology, ToolDef, local_name
from app.store import repo, session_scope
from app.store.models import EFFECT_STATES
from app.tools.errors import ToolError
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
    access_token: str | None = None
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
    status: int | None = None
    new_version: str | None = None
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "effectId": self.effect_id,
            "tool": self.tool,
            "target": self.target,
            "expectedVersion": self.expected_version,
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


class EffectLog:
    """Persists effect transitions, each in its own transaction (so they survive a crash)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(
        self, *, run_id: str, effect_id: str, tool: str, target: str, expected: str | None
    ) -> None:
        with session_scope(self.engine) as session:
            repo.record_effect(
                session,
                run_id=run_id,
                effect_id=effect_id,
                tool=tool,
                target_reference=target,
                expected_version=expected,
            )

    def set(
        self,
        run_id: str,
        effect_id: str,
        state: EffectState,
        response: dict[str, Any],
        *,
        attempted: bool = False,
    ) -> None:
        stored: Any = state
        if state not in EFFECT_STATES:  # a store without the state: keep the fact in the response
            stored = "failed"
            response = {**response, state: True}
        with session_scope(self.engine) as session:
            repo.set_effect_state(
                session, run_id, effect_id, stored, remote_response=response, attempted=attempted
            )


class FhirCommitAdapter:
    """The ``fhir`` scheme handler of one hook call.

    Register it with ``invoker.register_scheme("fhir", adapter)``.
    """

    def __init__(
        self,
        *,
        ontology: Ontology,
        engine: Engine,
        context: CommitContext,
        http: httpx.Client | None = None,
    ) -> None:
        self.ontology = ontology
        self.log = EffectLog(engine)
        self.context = context
        self._http = http

    def __call__(self, call: ToolCall) -> dict[str, Any]:
        if call.run_id is None:
            raise ToolError(f"{call.tool.name}: a commit needs a persisted run", kind="contract")
        effects = self.commit(call.tool, call.args, run_id=call.run_id, timeout=call.timeout)
        if any(e.state != "accepted" for e in effects):
            raise CommitFailed(effects)
        return self._result(call.tool, effects)

    def commit(
        self, tool: ToolDef, args: Mapping[str, Any], *, run_id: str, timeout: float
    ) -> list[EffectReport]:
        """Attempt every write the tool declares; one report per effect, each persisted."""
        commits = (tool.commits,) if tool.commits is not None else ()
        if not commits:
            raise ToolError(f"{tool.name} declares no horis:commits", kind="contract")
        client = self._http or httpx.Client(follow_redirects=False)
        try:
            return [self._one(client, tool, c, args, run_id, timeout) for c in commits]
        finally:
            if self._http is None:
                client.close()

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
        if not target.version_id:
            return f"{target.reference} was read without a versionId; cannot commit conditionally"
        return target

    def _one(
        self,
        client: httpx.Client,
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
        report = _Report(effect_id, tool.iri, url, expected, commit.element, value)
        self.log.record(
            run_id=run_id, effect_id=effect_id, tool=tool.iri, target=url, expected=expected
        )

        def settle(state: EffectState, response: dict[str, Any], **kw: Any) -> EffectReport:
            done = report.build(state, **kw)
            self.log.set(run_id, effect_id, state, {**response, "change": report.change()})
            log.info("effect %s of run %s: %s", effect_id, run_id, state)
            return done

        if not isinstance(target, SourceRef):
            return settle("refused", {"reason": target}, detail=target)
        if not permits(self.context.scope, commit.scope, commit.operation):
            reason = f"fhirAuthorization.scope does not grant {commit.scope}"
            return settle(
                "refused", {"reason": reason, "granted": self.context.scope}, detail=reason
            )
        if untranslatable is not None:
            return settle("refused", {"reason": untranslatable}, detail=untranslatable)

        headers = {"accept": FHIR_JSON}
        if self.context.access_token:
            headers["authorization"] = f"Bearer {self.context.access_token}"
        budget = httpx.Timeout(max(timeout * _REQUEST_SHARE, 0.1))

        body = self._hydrated(ref, expected)
        if body is None:
            try:
                current = client.get(url, headers=headers, timeout=budget)
            except httpx.HTTPError as exc:
                msg = f"reading {ref} failed: {type(exc).__name__}: {exc}"
                return settle("failed", {"error": msg}, detail=msg)
            if current.status_code != 200:
                msg = f"reading {ref} answered {current.status_code}"
                return settle(
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
        self.log.set(
            run_id,
            effect_id,
            "attempted",
            {"request": request, "change": report.change()},
            attempted=True,
        )
        try:
            response = client.put(
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
    element: str
    value: Any

    def change(self) -> dict[str, Any]:
        return {"element": self.element, "value": self.value}

    def build(self, state: EffectState, **kw: Any) -> EffectReport:
        return EffectReport(
            effect_id=self.effect_id,
            tool=self.tool,
            target=self.target,
            expected_version=self.expected,
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
    """One persisted effect as JSON; a ``failed`` row flagged ``refused`` reads as ``refused``."""
    response = row.remote_response or {}
    state = "refused" if response.get("refused") is True else row.state
    change = response.get("change") or {}
    return {
        "effectId": row.effect_id,
        "tool": row.tool,
        "target": row.target_reference,
        "expectedVersion": row.expected_version,
        "element": change.get("element"),
        "value": change.get("value"),
        "state": state,
        "status": response.get("status"),
        "newVersion": response.get("newVersion"),
        "detail": response.get("reason") or response.get("error"),
        "attempts": row.attempts,
    }


def effect_notice(effect: Mapping[str, Any]) -> str:
    """One plain sentence for a card about what happened to a write (``effect_reports`` item)."""
    target = str(effect.get("target") or "").rsplit("/", 2)
    ref = "/".join(target[-2:]) if len(target) >= 2 else str(effect.get("target"))
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
        return f"Not recorded in the EHR: {what} was not written ({effect.get('detail')})."
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
