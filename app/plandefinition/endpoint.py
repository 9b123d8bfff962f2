"""``dataEndpoint``: the FHIR server an ``$apply`` call names for the records it did not send.

An authored PlanDefinition's conditions and an ActivityDefinition's dynamic values read the
call's own resources — ``%subject``, ``%encounter``, ``%practitioner``, ``%organization`` — and
nothing else, so those are what the service reads there: each reference the call gives that its
``data`` Bundle does not hold, by ``GET {address}/{Type}/{id}``, with the token of the
endpoint's ``Authorization: Bearer`` header. What ``data`` holds is never read again (the
caller's copy stands).

The endpoint is held to the rules of a hook call's ``fhirServer``: an http(s) base URL without
credentials or path tricks, on ``HORISMOS_ALLOWED_FHIR_SERVERS`` when that list is set; no
redirect is followed, and the token goes to that origin only. A resource the server does not
have (404, 410) is simply not there — an expression that needs it is refused later, naming it;
any other failure stops the call with a 412 naming ``dataEndpoint`` and the resource, as a hook
call whose data cannot be obtained does. Only the ``Authorization`` header is sent: an endpoint
asking for any other is refused (422) rather than read without it.

A served service's ``$apply`` reads its whole chart there instead, the endpoint named as its
hook request's ``fhirServer`` (``app.plandefinition.apply``); :func:`data_endpoint` checks the
endpoint for both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from app.cds.requests import fhir_base_issues
from app.fhir_reads import MAX_RESPONSE_BYTES, FhirError, FhirReaders, FhirRefused
from app.plandefinition.refusals import ApplyRefused

#: the one connection type a FHIR read goes over
REST = "hl7-fhir-rest"
#: ``Authorization: Bearer <token>``, the token as RFC 6750 has it (what an HTTP header carries)
_BEARER = re.compile(r"\s*authorization\s*:\s*bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*", re.IGNORECASE)
#: Reads ``refs`` (``Type/id``) from a call's ``dataEndpoint`` (given its parameters), from the
#: worker thread that applies a definition, once the call is known to apply one.
Fetch = Callable[[Mapping[str, Any], Sequence[str]], dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class DataEndpoint:
    """Where to read, and with which token."""

    address: str
    token: str | None


def data_endpoint(given: Mapping[str, Any], allowed: Sequence[str]) -> DataEndpoint | None:
    """The call's ``dataEndpoint`` (None when it names none), or the refusal naming what is
    wrong with it."""
    endpoint = given.get("dataEndpoint")
    if endpoint is None:
        return None
    if not isinstance(endpoint, dict) or endpoint.get("resourceType") != "Endpoint":
        raise ApplyRefused(
            400, "value", "dataEndpoint must be an Endpoint resource", "dataEndpoint"
        )
    connection = endpoint.get("connectionType")
    code = connection.get("code") if isinstance(connection, dict) else None
    if connection is not None and code != REST:
        raise ApplyRefused(
            422,
            "not-supported",
            f"dataEndpoint's connectionType is {code!r}: only {REST} is read",
            "dataEndpoint.connectionType",
        )
    address = endpoint.get("address")
    if not isinstance(address, str):
        raise ApplyRefused(400, "required", "dataEndpoint needs an address", "dataEndpoint.address")
    issues = fhir_base_issues(
        address, allowed, name="dataEndpoint.address", token_in="dataEndpoint.header"
    )
    if issues:
        status = 403 if issues[0].code == "security" else 400
        raise ApplyRefused(status, issues[0].code, issues[0].diagnostics, "dataEndpoint.address")
    token = None
    headers = endpoint.get("header") or []
    if not isinstance(headers, list):
        raise ApplyRefused(400, "structure", "header must be a list", "dataEndpoint.header")
    for i, header in enumerate(headers):
        bearer = _BEARER.fullmatch(header) if isinstance(header, str) else None
        if bearer is None:
            raise ApplyRefused(
                422,
                "not-supported",
                "only an 'Authorization: Bearer <token>' header (an RFC 6750 token) is sent to "
                "dataEndpoint; reading without the others could read what the caller did not "
                "mean",
                f"dataEndpoint.header[{i}]",
            )
        token = bearer.group(1)
    return DataEndpoint(address=address, token=token)


async def read_endpoint(
    given: Mapping[str, Any],
    refs: Sequence[str],
    *,
    allowed: Sequence[str],
    http: httpx.AsyncClient,
    readers: FhirReaders,
) -> dict[str, dict[str, Any]]:
    """The resources ``refs`` (the call's own, which its ``data`` does not hold) read from its
    ``dataEndpoint``, by ``Type/id`` (empty when it names none)."""
    endpoint = data_endpoint(given, allowed)
    if endpoint is None:
        return {}
    client = readers(
        http, endpoint.address, endpoint.token, max_bytes=MAX_RESPONSE_BYTES, max_pages=1
    )
    found: dict[str, dict[str, Any]] = {}
    for ref in dict.fromkeys(refs):
        try:
            read = await client.read(ref)
        except FhirRefused as exc:
            if exc.status in (404, 410):
                continue
            raise ApplyRefused(
                412,
                "forbidden" if exc.status in (401, 403) else "processing",
                f"{ref} could not be read from dataEndpoint: {exc.message}",
                "dataEndpoint",
            ) from None
        except FhirError as exc:
            raise ApplyRefused(
                412,
                "transient",
                f"{ref} could not be read from dataEndpoint ({exc.message}); try again",
                "dataEndpoint",
            ) from None
        body = read.body
        if body is None:
            raise ApplyRefused(
                412,
                "too-costly",
                f"{ref} at dataEndpoint is larger than a read may be",
                "dataEndpoint",
            )
        if not isinstance(body, dict) or f"{body.get('resourceType')}/{body.get('id')}" != ref:
            raise ApplyRefused(
                412,
                "processing",
                f"dataEndpoint answered {ref} with something else",
                "dataEndpoint",
            )
        found[ref] = body
    return found


__all__ = ["DataEndpoint", "Fetch", "data_endpoint", "read_endpoint"]
