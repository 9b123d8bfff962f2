"""A FHIR Bulk Data (``$export``) client that writes the folder a population run reads.

It follows the Bulk Data Access IG (v2): the kick-off (``GET [base]/Group/[id]/$export`` or
``[base]/Patient/$export`` with ``Prefer: respond-async``; ``202`` and ``Content-Location``),
polling the status URL (``202`` while in progress, waiting what ``Retry-After`` says, at most
``max_wait`` seconds in all), the manifest (``200``), and each output file downloaded, with the
access token when the manifest requires one, into ``OUT/<Type>.<n>.ndjson``.

Authorisation is SMART Backend Services: a client assertion (a JWT signed with the client's
private key, ``RS384`` or ``ES384``; ``iss`` and ``sub`` the client id, ``aud`` the token URL,
five minutes, a ``jti``) exchanged at the token URL for an access token
(``grant_type=client_credentials``).

Resumable: the status URL and the files already downloaded are kept in
``OUT/export-state.json``; run again with the same ``OUT``, it polls the same job and fetches
only the files it lacks (a job the server no longer knows is started again).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from joserfc import jwt
from joserfc.jwk import JWKRegistry

STATE_FILE = "export-state.json"
CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class ExportFailed(RuntimeError):
    """The export could not be completed; the message says at which step and why."""


@dataclass(frozen=True, kw_only=True)
class BackendClient:
    """A SMART Backend Services client: its id, its private key (a JWK with ``kid``) and the
    token URL of the FHIR server's authorisation server."""

    client_id: str
    key: dict[str, Any]
    token_url: str
    scope: str = "system/*.read"

    def assertion(self) -> str:
        key = JWKRegistry.import_key(self.key)
        alg = "ES384" if self.key.get("kty") == "EC" else "RS384"
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.token_url,
            "exp": now + 300,
            "iat": now,
            "jti": str(uuid.uuid4()),
        }
        header = {"alg": alg, "typ": "JWT", "kid": self.key.get("kid", "")}
        return jwt.encode(header, claims, key, algorithms=[alg])

    def token(self, http: httpx.Client) -> str:
        answer = http.post(
            self.token_url,
            data={
                "grant_type": "client_credentials",
                "client_assertion_type": CLIENT_ASSERTION,
                "client_assertion": self.assertion(),
                "scope": self.scope,
            },
        )
        if answer.status_code != 200:
            raise ExportFailed(f"token endpoint answered {answer.status_code}: {answer.text[:300]}")
        token = answer.json().get("access_token")
        if not isinstance(token, str) or not token:
            raise ExportFailed("the token endpoint's answer has no access_token")
        return token


def _state(out: Path) -> dict[str, Any]:
    path = out / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def _save(out: Path, state: dict[str, Any]) -> None:
    (out / STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def bulk_export(
    base: str,
    out: Path,
    *,
    group: str | None = None,
    types: list[str] | None = None,
    client: BackendClient | None = None,
    max_wait: float = 600.0,
    http: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Export ``group``'s patients (every patient without one) from the FHIR server at
    ``base`` into ``out``; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    own = http is None
    http = http or httpx.Client(timeout=60.0, follow_redirects=False)
    try:
        headers = {"Accept": "application/fhir+json"}
        if client is not None:
            headers["Authorization"] = f"Bearer {client.token(http)}"
        state = _state(out)
        manifest = None
        if state.get("status"):
            manifest = _poll(http, state["status"], headers, max_wait, sleep, missing_ok=True)
        if manifest is None:
            state = {"status": _kick_off(http, base, group, types, headers), "files": []}
            _save(out, state)
            manifest = _poll(http, state["status"], headers, max_wait, sleep, missing_ok=False)
        assert manifest is not None
        for i, item in enumerate(manifest.get("output") or []):
            name = f"{item['type']}.{i}.ndjson"
            if name in state["files"]:
                continue  # downloaded before this run was interrupted
            _download(http, item["url"], out / name, headers, manifest)
            state["files"].append(name)
            _save(out, state)
        return dict(manifest)
    except httpx.HTTPError as exc:
        raise ExportFailed(f"the FHIR server could not be reached: {exc}") from None
    finally:
        if own:
            http.close()


def _kick_off(
    http: httpx.Client,
    base: str,
    group: str | None,
    types: list[str] | None,
    headers: dict[str, str],
) -> str:
    url = (
        f"{base.rstrip('/')}/Group/{group}/$export"
        if group
        else f"{base.rstrip('/')}/Patient/$export"
    )
    params = {"_type": ",".join(types)} if types else None
    answer = http.get(url, params=params, headers={**headers, "Prefer": "respond-async"})
    location = answer.headers.get("content-location")
    if answer.status_code != 202 or not location:
        raise ExportFailed(f"kick-off {url} answered {answer.status_code}: {answer.text[:300]}")
    return str(location)


def _poll(
    http: httpx.Client,
    status: str,
    headers: dict[str, str],
    max_wait: float,
    sleep: Callable[[float], None],
    *,
    missing_ok: bool,
) -> dict[str, Any] | None:
    waited = 0.0
    while True:
        answer = http.get(status, headers=headers)
        if answer.status_code == 200:
            manifest: dict[str, Any] = answer.json()
            return manifest
        if answer.status_code == 404 and missing_ok:
            return None  # the server forgot the job: start again
        if answer.status_code != 202:
            raise ExportFailed(
                f"status {status} answered {answer.status_code}: {answer.text[:300]}"
            )
        delay = float(answer.headers.get("retry-after", "1") or 1)
        if waited + delay > max_wait:
            raise ExportFailed(f"the export was not ready within {max_wait:g} s ({status})")
        sleep(delay)  # the server says when to ask again (Retry-After)
        waited += delay


def _download(
    http: httpx.Client, url: str, path: Path, headers: dict[str, str], manifest: dict[str, Any]
) -> None:
    sent = headers if manifest.get("requiresAccessToken") else {}
    partial = path.with_suffix(".part")
    with http.stream("GET", url, headers={**sent, "Accept": "application/fhir+ndjson"}) as answer:
        if answer.status_code != 200:
            raise ExportFailed(f"file {url} answered {answer.status_code}")
        with partial.open("wb") as f:
            for chunk in answer.iter_bytes():
                f.write(chunk)
    partial.replace(path)  # a file is there whole or not at all


__all__ = ["BackendClient", "ExportFailed", "bulk_export"]
