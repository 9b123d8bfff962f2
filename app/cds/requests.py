"""CDS Hooks 2.0 request bodies: the envelope, ``fhirAuthorization`` and each hook's context.

``parse_hook_request`` turns a decoded JSON body into a ``HookRequest`` or raises
``RequestInvalid`` listing every problem with the field it concerns. The pydantic models double
as the OpenAPI description of the request body.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.cds.errors import Issue, RequestInvalid
from app.cds.leniency import OLDER_HOOKS, UnreadOrder, lenient_context, shared_ids
from app.data_notes import DataNote
from app.fhir_urls import path_escapes
from app.ontology.hooks import HOOKS, ContextField


class FhirAuthorization(BaseModel):
    """The OAuth 2.0 access token the CDS client grants for reads against ``fhirServer``."""

    model_config = ConfigDict(extra="allow")

    access_token: str = Field(repr=False)
    token_type: str
    expires_in: int
    scope: str
    subject: str
    patient: str | None = None


class HookRequestBody(BaseModel):
    """The body of ``POST /cds-services/{id}`` (CDS Hooks 2.0 §"HTTP Request")."""

    model_config = ConfigDict(extra="allow")

    hook: str
    hookInstance: str
    fhirServer: str | None = None
    fhirAuthorization: FhirAuthorization | None = None
    context: dict[str, Any]
    prefetch: dict[str, dict[str, Any] | None] | None = None
    extension: dict[str, Any] | None = None


class FeedbackItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    card: str
    outcome: str
    outcomeTimestamp: str
    acceptedSuggestions: list[dict[str, Any]] | None = None
    overrideReason: dict[str, Any] | None = None


class FeedbackBody(BaseModel):
    """The body of ``POST /cds-services/{id}/feedback``."""

    model_config = ConfigDict(extra="allow")

    feedback: list[FeedbackItem] = Field(min_length=1)


@dataclass(frozen=True, kw_only=True)
class HookRequest:
    """A validated hook call."""

    hook: str
    hook_instance: str
    fhir_server: str | None
    authorization: FhirAuthorization | None
    context: dict[str, Any]
    prefetch: dict[str, dict[str, Any] | None]
    extension: dict[str, Any] | None
    #: what was read leniently (app.cds.leniency), recorded with the run as ``dataQuality``
    notes: tuple[DataNote, ...] = ()
    #: draft orders of the context that could not be read and were left out (not checked)
    unread: tuple[UnreadOrder, ...] = ()
    #: the hook the client called (``hook`` is the service's, for an older hook it answers)
    sent_hook: str | None = None


# --- per-hook context ---------------------------------------------------------------------

#: Context fields per hook: the CDS Hooks registry (one table for requests and verification).
HOOK_CONTEXTS: dict[str, tuple[ContextField, ...]] = HOOKS

_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")
_REF = re.compile(r"^([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})$")
#: Ids the FHIR id pattern admits but a URL path resolves away (``Patient/..`` is the base URL).
_DOT_IDS = (".", "..")


def _check_context(hook: str, context: dict[str, Any]) -> list[Issue]:
    fields = HOOK_CONTEXTS.get(hook)
    if fields is None:
        return []  # a hook this validator does not know: the service decides whether it serves it
    issues: list[Issue] = []
    for f in fields:
        where = f"context.{f.name}"
        if f.name not in context or context[f.name] is None:
            if f.required:
                issues.append(
                    Issue(
                        code="required",
                        diagnostics=f"{hook} requires context.{f.name}",
                        expression=where,
                    )
                )
            continue
        issues.extend(_check_field(f, context[f.name], where))
    if hook == "order-select" and not issues:
        issues.extend(_check_selections(context))
    return issues


def _check_field(f: ContextField, value: Any, where: str) -> list[Issue]:
    def bad(msg: str) -> list[Issue]:
        return [Issue(code="invalid", diagnostics=msg, expression=where)]

    if f.kind == "id":
        if not isinstance(value, str) or not _ID.match(value) or value in _DOT_IDS:
            return bad(f"{where} must be a bare FHIR id (no resource type, no '/'), got {value!r}")
    elif f.kind in ("user", "ref"):
        m = _REF.match(value) if isinstance(value, str) else None
        if m is None or m.group(2) in _DOT_IDS:
            return bad(f"{where} must be a relative reference 'Type/id', got {value!r}")
        if f.types and m.group(1) not in f.types:
            return bad(f"{where} must reference one of {', '.join(f.types)}, got {m.group(1)}")
    elif f.kind == "refs":
        if not isinstance(value, list) or not value:
            return bad(f"{where} must be a non-empty array of 'Type/id' references")
        for i, item in enumerate(value):
            m = _REF.match(item) if isinstance(item, str) else None
            if m is None or m.group(2) in _DOT_IDS:
                return [
                    Issue(
                        code="invalid",
                        diagnostics=f"{where}[{i}] must be 'Type/id', got {item!r}",
                        expression=f"{where}[{i}]",
                    )
                ]
    elif f.kind == "bundle":
        return _check_bundle(value, where)
    elif f.kind == "bundle-list" and not isinstance(value, list | dict):
        return bad(f"{where} must be a Bundle or an array of resources")
    return []


def _check_bundle(value: Any, where: str) -> list[Issue]:
    if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
        return [
            Issue(code="invalid", diagnostics=f"{where} must be a FHIR Bundle", expression=where)
        ]
    entries = value.get("entry", [])
    if not isinstance(entries, list):
        return [
            Issue(
                code="structure",
                diagnostics=f"{where}.entry must be an array",
                expression=f"{where}.entry",
            )
        ]
    issues: list[Issue] = []
    for i, entry in enumerate(entries):
        res = entry.get("resource") if isinstance(entry, dict) else None
        at = f"{where}.entry[{i}].resource"
        if not isinstance(res, dict) or not isinstance(res.get("resourceType"), str):
            issues.append(
                Issue(code="structure", diagnostics=f"{at} must be a FHIR resource", expression=at)
            )
        elif (
            not isinstance(res.get("id"), str) or not _ID.match(res["id"]) or res["id"] in _DOT_IDS
        ):
            issues.append(
                Issue(
                    code="required",
                    diagnostics=f"{at}.id is required so the resource can be referenced",
                    expression=f"{at}.id",
                )
            )
    return issues


def _check_selections(context: dict[str, Any]) -> list[Issue]:
    present = {
        f"{e['resource']['resourceType']}/{e['resource']['id']}"
        for e in context["draftOrders"].get("entry", [])
    }
    return [
        Issue(
            code="invalid",
            diagnostics=f"context.selections[{i}] {ref!r} is not one of the draftOrders",
            expression=f"context.selections[{i}]",
        )
        for i, ref in enumerate(context["selections"])
        if ref not in present
    ]


def as_service_hook(req: HookRequest, hook: str) -> HookRequest:
    """``req`` answered as ``hook`` (the service's), or ``RequestInvalid`` naming ``hook``."""
    if req.hook == hook:
        return req
    if req.hook not in OLDER_HOOKS.get(hook, ()):
        raise RequestInvalid.one(
            "not-supported", f"this service answers hook {hook!r}, not {req.hook!r}", "hook"
        )
    issues = _check_context(hook, req.context)
    if issues:
        raise RequestInvalid(issues=issues)
    note = DataNote(
        rule="older-hook",
        field="hook",
        received=req.hook,
        read_as=hook,
        message=(
            f"a {req.hook} call was answered as {hook}, the hook of this service: its draftOrders "
            "are the orders considered"
        ),
    )
    return replace(req, hook=hook, sent_hook=req.hook, notes=(*req.notes, note))


# --- the envelope -------------------------------------------------------------------------


def _expression(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def pydantic_issues(exc: ValidationError) -> list[Issue]:
    """One issue per pydantic error, keeping only the first union branch's complaint per field."""
    issues: list[Issue] = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        where = _expression(loc)
        if where in seen:
            continue
        seen.add(where)
        missing = err["type"] == "missing"
        issues.append(
            Issue(
                code="required" if missing else "invalid",
                diagnostics=f"{where}: {'is required' if missing else err['msg']}",
                expression=where or None,
            )
        )
    return issues


def _valid_base_url(value: str) -> httpx.URL | None:
    """``value`` as an http(s) URL with a host (and a numeric port if any), else None (parsed
    once per distinct address of a usual length: an EHR names the same FHIR server on every
    call; a long one, which a client could vary to fill the cache, is parsed each time)."""
    return _base_url(value) if len(value) <= _CACHED_URL_LENGTH else _base_url.__wrapped__(value)


#: Addresses up to this length are parsed once.
_CACHED_URL_LENGTH = 512


@lru_cache(maxsize=256)
def _base_url(value: str) -> httpx.URL | None:
    if not re.match(r"^https?://[^\s/]+", value) or any(c.isspace() for c in value):
        return None
    try:
        url = httpx.URL(value)
        url.port  # noqa: B018 - a port that is not a number raises here or above
    except (httpx.InvalidURL, ValueError, TypeError):
        return None
    if url.scheme not in ("http", "https") or not url.host or url.query or url.fragment:
        return None
    if url.port is not None and not 0 < url.port < 65536:
        return None
    return url


def fhir_server_allowed(url: httpx.URL, prefixes: Sequence[str]) -> bool:
    """True when ``prefixes`` is empty (open mode) or ``url`` lies under one of them: the same
    scheme, host and port, and a path that is the prefix's path or continues it after a ``/``
    (so ``https://ehr.example/fhir`` does not admit ``https://ehr.example.evil/`` or
    ``https://ehr.example/fhir-other``)."""
    if not prefixes:
        return True
    path = url.path.rstrip("/")
    for prefix in prefixes:
        allowed = _valid_base_url(prefix)
        if (
            allowed is None
            or path_escapes(allowed.path)
            or (
                allowed.scheme,
                allowed.host,
                allowed.port,
            )
            != (
                url.scheme,
                url.host,
                url.port,
            )
        ):
            continue
        root = allowed.path.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return True
    return False


def fhir_base_issues(
    value: str,
    allowed: Sequence[str],
    *,
    name: str = "fhirServer",
    token_in: str = "fhirAuthorization",
) -> list[Issue]:
    """What is wrong with ``value`` as the base URL of a FHIR server the service is to read
    from with a caller's token (``name``: the element that gave it; ``token_in``: where the
    token belongs): not an http(s) base URL, credentials in it, a path a server resolves
    elsewhere, or a server not among ``allowed`` (empty: any)."""
    url = _valid_base_url(value)
    if url is None:
        return [
            Issue(
                code="invalid",
                diagnostics=f"{name} must be an http(s) base URL, got {value!r}",
                expression=name,
            )
        ]
    if url.userinfo:
        # httpx would send them as Basic credentials in place of the EHR's access token
        return [
            Issue(
                code="security",
                diagnostics=f"{name} must not carry credentials (user:password@); the "
                f"access token goes in {token_in}",
                expression=name,
            )
        ]
    if path_escapes(url.raw_path.decode("ascii", "replace").split("?", 1)[0]):
        return [
            Issue(
                code="security",
                diagnostics=f"{name} must not contain '.' or '..' path segments (encoded or "
                "not) or encoded slashes",
                expression=name,
            )
        ]
    if not fhir_server_allowed(url, allowed):
        return [
            Issue(
                code="security",
                diagnostics=f"{name} {value!r} is not one of the FHIR servers this service "
                "is allowed to read from",
                expression=name,
            )
        ]
    return []


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def canonical_uuid(value: str) -> str | None:
    """The UUID in its one canonical spelling (lower case, 8-4-4-4-12), or None.

    Upper case is folded (the same UUID, one hookInstance); braces, ``urn:uuid:`` and digits
    without hyphens, which ``uuid.UUID`` would also read, are refused: the FHIR ``uuid`` type
    the hookInstance is defined as spells it one way only."""
    return value.lower() if _UUID.match(value) else None


def parse_hook_request(body: Any, *, allowed_fhir_servers: Sequence[str] = ()) -> HookRequest:
    """Validate a decoded hook call against CDS Hooks 2.0; raise ``RequestInvalid`` otherwise.

    ``allowed_fhir_servers``: URL prefixes ``fhirServer`` must lie under (empty: any server)."""
    if not isinstance(body, dict):
        raise RequestInvalid.one("structure", "the request body must be a JSON object")
    try:
        model = HookRequestBody.model_validate(body)
    except ValidationError as exc:
        raise RequestInvalid(issues=pydantic_issues(exc)) from None
    issues: list[Issue] = []
    hook_instance = canonical_uuid(model.hookInstance)
    if hook_instance is None:
        shown = model.hookInstance if len(model.hookInstance) <= 64 else model.hookInstance[:64]
        issues.append(
            Issue(
                code="invalid",
                diagnostics="hookInstance must be a UUID written as 8-4-4-4-12 hexadecimal "
                f"digits, got {shown!r}",
                expression="hookInstance",
            )
        )
    if model.fhirAuthorization is not None and not model.fhirServer:
        issues.append(
            Issue(
                code="required",
                diagnostics="fhirServer is required when fhirAuthorization is given",
                expression="fhirServer",
            )
        )
    if model.fhirServer is not None:
        issues.extend(fhir_base_issues(model.fhirServer, allowed_fhir_servers))
    if model.fhirAuthorization is not None:
        auth = model.fhirAuthorization
        if auth.token_type.lower() != "bearer":
            issues.append(
                Issue(
                    code="invalid",
                    diagnostics="fhirAuthorization.token_type must be 'Bearer'",
                    expression="fhirAuthorization.token_type",
                )
            )
        if not auth.access_token:
            issues.append(
                Issue(
                    code="required",
                    diagnostics="fhirAuthorization.access_token must not be empty",
                    expression="fhirAuthorization.access_token",
                )
            )
        elif not re.fullmatch(r"[\x21-\x7e]+", auth.access_token):
            issues.append(
                Issue(
                    code="invalid",
                    diagnostics="fhirAuthorization.access_token holds a space, a control or a "
                    "non-ASCII character, which an HTTP header cannot carry",
                    expression="fhirAuthorization.access_token",
                )
            )
    context, notes = lenient_context(model.context)
    issues.extend(_check_context(model.hook, context))
    prefetch, shared, versions = shared_ids(dict(model.prefetch or {}))
    issues.extend(shared)
    if issues:
        raise RequestInvalid(issues=issues)
    return HookRequest(
        hook=model.hook,
        hook_instance=str(hook_instance),
        fhir_server=model.fhirServer.rstrip("/") if model.fhirServer else None,
        authorization=model.fhirAuthorization,
        context=context,
        prefetch=prefetch,
        extension=model.extension,
        notes=(*notes, *versions),
    )


def parse_feedback(body: Any) -> FeedbackBody:
    if not isinstance(body, dict):
        raise RequestInvalid.one("structure", "the feedback body must be a JSON object")
    try:
        return FeedbackBody.model_validate(body)
    except ValidationError as exc:
        raise RequestInvalid(issues=pydantic_issues(exc)) from None
