"""Conditional FHIR commits for adapter-mediated tools (``horis:commits``, binding ``fhir:commit``).

Three operations (``horis:operation``), each conditional so that it never overwrites what the
decision did not see and never happens twice:

- ``horis:Update`` changes one element of the resource the run hydrated and PUTs the whole
  resource (the hydrated body, or a GET of the current one when the host did not keep it) with
  ``If-Match: W/"<the hydrated versionId>"`` — never the version just read.
- ``horis:Patch`` changes that element only: a JSON Patch (``test`` of ``/meta/versionId``, then
  ``add`` of the element) with the same ``If-Match``. No body is read or sent back, so elements
  the hook did not prefetch are never touched.
- ``horis:Create`` POSTs the resource ``horis:template`` renders, with an identifier derived from
  the run and ``If-None-Exist`` on it (:mod:`adapters.fhir.create`): however often it is sent, the
  server holds one.

For every operation:

1. The scope is checked against ``fhirAuthorization.scope`` (:mod:`adapters.fhir.scopes`). A
   missing scope, a target the run never read (no source version), a value that has no code in
   the declared system, or a rendered resource that is not valid FHIR mean **no request at all**
   and the effect is ``refused``.
2. Each state write is one statement in its own short transaction (:class:`EffectLog`). A write
   that sends nothing is recorded once, in its final state; one that is sent is recorded
   ``attempted`` before the request leaves (so a crash mid-call leaves a row reconciliation can
   settle) and updated once with the answer (:mod:`adapters.fhir.writes`).

Effect states::

    (none) ─┬─> refused                 no request sent (scope, no source version, no code,
            │                           invalid resource)
            ├─> failed                  the read before an update failed; nothing was written
            └─> attempted ─┬─> accepted     2xx: the server stored a new version (or, for a
                           │                create, already held the resource)
                           ├─> conflicted   412 (or 409): the record changed since it was read;
                           │                a PATCH answered 400/422 (its version ``test``
                           │                failed) when the server now holds another version
                           ├─> failed       other 4xx, or the connection was never made
                           └─> unknown      timeout / connection lost after sending / 5xx:
                                            settled later by :mod:`adapters.fhir.reconcile`

(``proposed`` is what the runtime reports when no adapter is registered at all.)

Each effect is reported on its own; there is no aggregate success. The handler returns the tool
result only when every effect is ``accepted``. When every effect was ``refused`` it raises
:class:`CommitRefused` (an ``EffectNotExecuted``: nothing was sent, so the ActionStep records the
refusal and follows ``horis:next`` — the decision stands, unwritten). Otherwise it raises
:class:`CommitFailed` (a ``ToolError``: the ActionStep takes ``horis:onError``, failing closed
because the record changed or the write broke; retryable only when every unsettled write is a
create whose answer was lost, which the identifier makes safe to send again). Either way nothing
is asserted into the World, and the exception's ``effects`` say what happened to each write.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import Connection, Engine

from adapters.fhir.commit_context import CommitContext, SourceRef
from adapters.fhir.commit_reports import (
    CommitFailed,
    CommitRefused,
    EffectReport,
    PlannedWrite,
    WriteRecorder,
)
from adapters.fhir.create import NotBuilt, identifier_for, invalid, render_resource, search_token
from adapters.fhir.reconcile import earlier_effects
from adapters.fhir.scopes import may_write, permits
from adapters.fhir.writes import FHIR_JSON, JSON_PATCH, outcome, patch_document, send
from app.cds.write_notices import effect_notice, unsuccessful
from app.ontology.model import XSD, AdapterCommit, Individual, Ontology, ToolDef, local_name
from app.store.effects import (
    SENT_STATES,
    SETTLED,
    EffectLog,
)
from app.tools.call import ToolCall
from app.tools.errors import ToolError

__all__ = [
    "FHIR_JSON",
    "SETTLED",
    "CommitContext",
    "CommitFailed",
    "CommitRefused",
    "EffectReport",
    "FhirCommitAdapter",
    "SourceRef",
    "element_value",
]

log = logging.getLogger("horismos.commit")
#: The share of the tool's ``horis:timeout`` each HTTP request may use: the adapter must decide
#: (and record ``unknown``) before the invoker's own deadline abandons the call.
_REQUEST_SHARE = 0.4


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
        send_before: float | None = None,
        resumed: bool = False,
    ) -> None:
        self.ontology = ontology
        self.log = EffectLog(engine, ensure_run=ensure_run)
        self.context = context
        self._http = http
        #: past this moment (``time.monotonic()``) no write is sent: the hook call's deadline
        self.send_before = send_before
        #: the run was taken over from a dead process: its effect log decides before any write
        self.resumed = resumed
        self._earlier_effects: dict[str, dict[str, Any]] | None = None

    def write_pending(self, connection: Connection) -> None:
        """Store the effects still waiting for the run's row in the run's own transaction."""
        self.log.write_pending(connection)

    def unsent_effects(self) -> list[dict[str, Any]]:
        """The effects still waiting for the run's row, stored with it."""
        return self.log.pending()

    def may_send(self, tool: ToolDef) -> bool:
        """Whether a call of ``tool`` could send a request in this hook call: False when every
        write it declares is refused before any request (its scope is not granted), so the
        invoker needs no tool thread for it."""
        commit = tool.commits
        return commit is None or may_write(self.context.scope, commit)

    def __call__(self, call: ToolCall) -> dict[str, Any]:
        if call.run_id is None:
            raise ToolError(f"{call.tool.name}: a commit needs a persisted run", kind="contract")
        effects = self.commit(
            call.tool, call.args, run_id=call.run_id, timeout=call.timeout, now=call.now
        )
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
        """A card sentence per write the run attempted that did not succeed (a write the EHR
        accepted needs no sentence: the run page lists every effect), from what the adapter
        committed, so the card needs no second read of the effect log."""
        return [effect_notice(e) for e in self.effects() if unsuccessful(e)]

    def commit(
        self,
        tool: ToolDef,
        args: Mapping[str, Any],
        *,
        run_id: str,
        timeout: float,
        now: datetime | None = None,
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
            return [self._one(_Write(client, tool, c, args, run_id, timeout, now)) for c in commits]
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

    def _headers(self) -> dict[str, str]:
        headers = {"accept": FHIR_JSON}
        if self.context.access_token:
            headers["authorization"] = f"Bearer {self.context.access_token}"
        return headers

    def _one(self, w: _Write) -> EffectReport:
        if w.commit.operation == "create":
            return self._create(w)
        return self._change(w)

    def _create(self, w: _Write) -> EffectReport:
        """POST the rendered resource, once, whatever happens to the answer."""
        commit = w.commit
        url = f"{self.context.fhir_server}/{commit.resource_type}"
        effect_id = f"{w.tool.name}:{commit.resource_type}.create"
        identifier = identifier_for(w.run_id, effect_id)
        unbuilt: str | None = None
        try:
            body = render_resource(
                self.ontology,
                commit,
                w.args,
                run_id=w.run_id,
                run_url=self.context.run_url,
                now=w.now,
                context=self.context.hook_context,
                prefetch=self.context.prefetch,
                resources=self.context.resources,
                identifier=identifier,
            )
        except NotBuilt as exc:
            body, unbuilt = {"resourceType": commit.resource_type}, str(exc)
        report = PlannedWrite(
            effect_id=effect_id,
            tool=w.tool.iri,
            target=url,
            expected=None,
            resource_type=commit.resource_type,
            element="",
            value=None,
            operation="create",
            identifier=search_token(identifier),
            recipients=_references(body.get("recipient")),
        )
        recorder = WriteRecorder(self.log, report, w.run_id)
        if not permits(self.context.scope, commit.scope, "create"):
            reason = f"fhirAuthorization.scope does not grant {commit.scope}"
            return recorder.unsent(
                "refused", {"reason": reason, "granted": self.context.scope}, detail=reason
            )
        problem = unbuilt or invalid(body)
        if problem is not None:
            return recorder.unsent("refused", {"reason": problem}, detail=problem)
        if_none_exist = f"identifier={search_token(identifier)}"
        request = {"method": "POST", "url": url, "ifNoneExist": if_none_exist, "sent": body}
        held = self._hold_back(recorder, w)
        if held is not None:
            return held
        recorder.attempt(request)
        answer = send(
            w.client(),
            "POST",
            url,
            headers={**self._headers(), "content-type": FHIR_JSON, "if-none-exist": if_none_exist},
            body=body,
            timeout=w.budget,
            request=request,
            ref=commit.resource_type,
            expected=None,
        )
        return recorder.settle(answer)

    def _change(self, w: _Write) -> EffectReport:
        """Set one element of the hydrated resource, against the version the run read."""
        commit = w.commit
        target = self._target(commit)
        ref = target.reference if isinstance(target, SourceRef) else commit.resource_type
        url = f"{self.context.fhir_server}/{ref}"
        expected = target.version_id if isinstance(target, SourceRef) else None
        raw = w.args.get(commit.value_arg)
        try:
            value, untranslatable = element_value(self.ontology, commit, raw), None
        except LookupError as exc:
            value, untranslatable = raw, str(exc)
        report = PlannedWrite(
            effect_id=f"{w.tool.name}:{ref}.{commit.element}",
            tool=w.tool.iri,
            target=url,
            expected=expected,
            resource_type=commit.resource_type,
            element=commit.element,
            value=value,
            operation=commit.operation,
        )
        recorder = WriteRecorder(self.log, report, w.run_id)
        if not isinstance(target, SourceRef) or expected is None:
            why = target if isinstance(target, str) else f"{ref} has no version"
            return recorder.unsent("refused", {"reason": why}, detail=why)
        if not permits(self.context.scope, commit.scope, "update"):
            reason = f"fhirAuthorization.scope does not grant {commit.scope}"
            return recorder.unsent(
                "refused", {"reason": reason, "granted": self.context.scope}, detail=reason
            )
        if untranslatable is not None:
            return recorder.unsent("refused", {"reason": untranslatable}, detail=untranslatable)
        headers = self._headers()
        if_match = f'W/"{expected}"'
        if commit.operation == "patch":
            document = patch_document(commit.element, value, expected)
            request = {"method": "PATCH", "url": url, "ifMatch": if_match, "patch": document}
            held = self._hold_back(recorder, w)
            if held is not None:
                return held
            recorder.attempt(request)
            answer = send(
                w.client(),
                "PATCH",
                url,
                headers={**headers, "content-type": JSON_PATCH, "if-match": if_match},
                body=document,
                timeout=w.budget,
                request=request,
                ref=ref,
                expected=expected,
            )
            return recorder.settle(answer)
        body = self._hydrated(ref, expected)
        if body is None:
            try:
                current = w.client().get(url, headers=headers, timeout=w.budget)
            except httpx.HTTPError as exc:
                msg = f"reading {ref} failed: {type(exc).__name__}: {exc}"
                return recorder.unsent("failed", {"error": msg}, detail=msg)
            if current.status_code != 200:
                msg = f"reading {ref} answered {current.status_code}"
                return recorder.unsent(
                    "failed",
                    {"status": current.status_code, "body": outcome(current)},
                    detail=msg,
                    status=current.status_code,
                )
            body = current.json()
        body = copy.deepcopy(dict(body))
        body[commit.element] = value
        meta = body.get("meta")
        if isinstance(meta, dict):
            meta.pop("versionId", None)
            meta.pop("lastUpdated", None)
        request = {"method": "PUT", "url": url, "ifMatch": if_match}
        held = self._hold_back(recorder, w)
        if held is not None:
            return held
        recorder.attempt(request)
        answer = send(
            w.client(),
            "PUT",
            url,
            headers={**headers, "content-type": FHIR_JSON, "if-match": if_match},
            body=body,
            timeout=w.budget,
            request=request,
            ref=ref,
            expected=expected,
        )
        return recorder.settle(answer)

    # -- before a request leaves ------------------------------------------------------------

    def _hold_back(self, recorder: WriteRecorder, w: _Write) -> EffectReport | None:
        """The report of a write that must not be sent now, or None to send it: one a run taken
        over from a dead process had already sent (its logged fate stands: a second request
        could double the write), or any write once the hook call's deadline has passed."""
        if self.resumed:
            earlier = self._earlier(w.client, w.run_id).get(recorder.row.effect_id)
            if earlier is not None and earlier["state"] in SENT_STATES:
                recorder.effects.adopt(recorder.row, earlier)
                log.info("effect %s was sent before the takeover; not again", earlier["effectId"])
                return recorder.report.build(
                    earlier["state"],
                    status=earlier.get("status"),
                    new_version=earlier.get("newVersion"),
                    detail=earlier.get("detail"),
                    created=earlier.get("created"),
                )
        if self.send_before is not None and time.monotonic() > self.send_before:
            reason = (
                "the hook call passed its deadline before the write was sent, so nothing was "
                "written (the EHR had stopped waiting for this decision)"
            )
            return recorder.unsent("refused", {"reason": reason}, detail=reason)
        return None

    def _earlier(
        self, client: Callable[[], httpx.Client], run_id: str
    ) -> dict[str, dict[str, Any]]:
        """The effects the taken-over run had logged, reconciled once (``reconcile.earlier``)."""
        if self._earlier_effects is None:
            self._earlier_effects = earlier_effects(
                self.log,
                run_id,
                client=client,
                fhir_server=self.context.fhir_server,
                token=self.context.access_token,
            )
        return self._earlier_effects

    def _hydrated(self, ref: str, expected: str | None) -> Mapping[str, Any] | None:
        body = self.context.resources.get(ref)
        if body is None or (body.get("meta") or {}).get("versionId") != expected:
            return None
        return body

    def _result(self, tool: ToolDef, effects: Sequence[EffectReport]) -> dict[str, Any]:
        """The tool result: every string-typed declared effect gets the versioned reference of
        what was committed (``Encounter/e1/_history/<v>``, ``Communication/c9/_history/<v>``);
        ``horis:now`` is the runtime's."""
        written = [
            (e.created or e.target.removeprefix(self.context.fhir_server + "/"))
            + f"/_history/{e.new_version}"
            for e in effects
        ]
        result: dict[str, Any] = {}
        for decl in tool.effects:
            if decl.type == f"{XSD}string" and not decl.now:
                result[local_name(decl.property)] = (
                    written[0] if len(written) == 1 else " ".join(written)
                )
        return result


@dataclass(frozen=True)
class _Write:
    """One declared write of one call."""

    client: Callable[[], httpx.Client]
    tool: ToolDef
    commit: AdapterCommit
    args: Mapping[str, Any]
    run_id: str
    timeout: float
    now: datetime | None

    @property
    def budget(self) -> httpx.Timeout:
        return httpx.Timeout(max(self.timeout * _REQUEST_SHARE, 0.1))


def _references(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(i["reference"]) for i in items if isinstance(i, Mapping) and i.get("reference")]
