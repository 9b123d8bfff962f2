"""The three conditional FHIR writes the commit adapter sends, and how their answers are read.

===========  ==================================================  ============================
operation    request                                             guard
===========  ==================================================  ============================
update       ``PUT Type/id`` with the whole resource              ``If-Match: W/"<read>"``
patch        ``PATCH Type/id``, JSON Patch: ``test`` of           ``If-Match: W/"<read>"``
             ``/meta/versionId``, ``add`` of the one element      and the ``test``
create       ``POST Type`` with the rendered resource             ``If-None-Exist:
                                                                  identifier=<system>|<value>``
===========  ==================================================  ============================

Each returns an :class:`Answer`: the state the effect takes and what the server said. Nothing
here touches the effect log; the adapter records ``attempted`` before calling and the answer
after.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.store.models import EffectState

FHIR_JSON = "application/fhir+json"
JSON_PATCH = "application/json-patch+json"
#: The identifier system of created resources: the value is a ``urn:uuid:`` (RFC 3986 URI).
IDENTIFIER_SYSTEM = "urn:ietf:rfc:3986"


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What became of one sent write."""

    state: EffectState
    response: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    new_version: str | None = None
    detail: str | None = None
    created: str | None = None  # "Type/id" of a created (or found) resource


def etag_version(etag: str | None) -> str | None:
    if not etag:
        return None
    text = etag[2:] if etag.startswith("W/") else etag
    return text.strip('"') or None


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def body_version(response: httpx.Response) -> str | None:
    body = _json(response)
    version = body.get("meta", {}).get("versionId") if isinstance(body, dict) else None
    return str(version) if version else None


def outcome(response: httpx.Response) -> Any:
    """What to keep of an answer: a resource's type, id and meta, or the OperationOutcome."""
    body = _json(response)
    if body is None:
        return response.text[:2000]
    if isinstance(body, dict) and body.get("resourceType") != "OperationOutcome":
        return {k: body[k] for k in ("resourceType", "id", "meta") if k in body}
    return body


def json_pointer(element: str) -> str:
    """``/element`` (RFC 6901: ``~`` and ``/`` escaped)."""
    return "/" + element.replace("~", "~0").replace("/", "~1")


def patch_document(element: str, value: Any, expected: str) -> list[dict[str, Any]]:
    """Change ``element`` only, and only if the resource is still at version ``expected``
    (``add`` sets a member whether or not it exists)."""
    return [
        {"op": "test", "path": "/meta/versionId", "value": expected},
        {"op": "add", "path": json_pointer(element), "value": value},
    ]


def send(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Any,
    timeout: httpx.Timeout,
    request: dict[str, Any],
    ref: str,
    expected: str | None,
) -> Answer:
    """Send one write and classify the answer (or its absence)."""
    try:
        response = client.request(method, url, json=body, headers=dict(headers), timeout=timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        msg = f"no connection to {url}: {type(exc).__name__}"
        return Answer(state="failed", response={"request": request, "error": msg}, detail=msg)
    except httpx.HTTPError as exc:
        msg = f"no answer after sending: {type(exc).__name__}"
        return Answer(state="unknown", response={"request": request, "error": msg}, detail=msg)
    status = response.status_code
    answer: dict[str, Any] = {"request": request, "status": status, "body": outcome(response)}
    if 200 <= status < 300:
        version = etag_version(response.headers.get("etag")) or body_version(response)
        answer["newVersion"] = version
        created = _created(response, method)
        if created is not None:
            answer["created"] = created
            answer["found"] = status == 200  # If-None-Exist matched: it was there already
        return Answer(
            state="accepted", response=answer, status=status, new_version=version, created=created
        )
    if method == "POST" and status == 412:
        msg = "the server holds several resources with this identifier; nothing was created"
        return Answer(state="failed", response=answer, status=status, detail=msg)
    if status in (409, 412):
        msg = f"{ref} changed since version {expected} was read"
        return Answer(state="conflicted", response=answer, status=status, detail=msg)
    if method == "PATCH" and status in (400, 422) and expected is not None:
        # a server that does not honour If-Match still runs the patch's ``test`` of the
        # version, and answers its failure as a bad request: the version it holds now says
        # whether the record changed (a conflict) or the patch itself was refused
        current = _current_version(client, url, headers, timeout)
        if current is not None and current != expected:
            msg = (
                f"{ref} changed since version {expected} was read (the server holds version "
                f"{current}; the patch's test of the version failed)"
            )
            answer["currentVersion"] = current
            return Answer(state="conflicted", response=answer, status=status, detail=msg)
    if status >= 500:
        msg = f"the server answered {status}; whether it stored the change is unknown"
        return Answer(state="unknown", response=answer, status=status, detail=msg)
    return Answer(
        state="failed",
        response=answer,
        status=status,
        detail=f"the server refused the write ({status}{_says(response)})",
    )


def _current_version(
    client: httpx.Client, url: str, headers: Mapping[str, str], timeout: httpx.Timeout
) -> str | None:
    """The version the server holds of ``url`` now, or None when it cannot be read."""
    read = {k: v for k, v in headers.items() if k.lower() in ("authorization", "accept")}
    try:
        response = client.get(url, headers=read, timeout=timeout)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return etag_version(response.headers.get("etag")) or body_version(response)


def _created(response: httpx.Response, method: str) -> str | None:
    if method != "POST":
        return None
    body = _json(response)
    if isinstance(body, dict) and body.get("resourceType") and body.get("id"):
        return f"{body['resourceType']}/{body['id']}"
    location = response.headers.get("location") or ""
    parts = location.split("/_history/")[0].rstrip("/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def _says(response: httpx.Response) -> str:
    """The first issue text of an OperationOutcome, for the reader of the effect."""
    body = _json(response)
    if not isinstance(body, dict) or body.get("resourceType") != "OperationOutcome":
        return ""
    for issue in body.get("issue") or []:
        text = (issue.get("details") or {}).get("text") or issue.get("diagnostics")
        if text:
            return f": {text}"
    return ""
