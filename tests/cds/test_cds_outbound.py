"""Where the service sends requests, and with which credentials, when a caller chooses the
target: dot segments past the allow-list, credentials in fhirServer, ids that resolve to the base
URL, and what an error tells about the ports it reached (loopback servers only)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.support.rogue_http import Answer, black_hole, rogue_server

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"


def _unread(fhir_server: str, **context: Any) -> dict[str, Any]:
    """A triage call whose data must be read from ``fhir_server``."""
    ctx = {"patientId": fx.new_id(), "encounterId": fx.new_id(), **context}
    return fx.hook_request("encounter-start", ctx, fhir_server=fhir_server)


@pytest.mark.parametrize(
    "path", ["/ok/%2e%2e/err", "/ok/%2E%2E/err", "/ok/.%2e/err", "/ok/%2e/err", "/ok/a%2fb"]
)
def test_encoded_dot_segments_do_not_pass_the_allow_list(
    make_app_client: OpenClient, path: str
) -> None:
    with rogue_server() as fhir, make_app_client(allowed_fhir_servers=[fhir.base + "/ok"]) as c:
        resp = c.post(TRIAGE, json=_unread(fhir.base + path))
        assert resp.status_code == 400, resp.text
        assert resp.json()["issue"][0]["expression"] == ["fhirServer"]
        assert fhir.seen == []  # nothing left the service


def test_credentials_in_fhir_server_are_refused_and_never_sent(
    make_app_client: OpenClient,
) -> None:
    with rogue_server() as fhir, make_app_client() as c:
        server = fhir.base.replace("http://", "http://alice:s3cr3t@") + "/fhir"
        resp = c.post(TRIAGE, json=_unread(server))
        assert resp.status_code == 400, resp.text
        assert resp.json()["issue"][0]["expression"] == ["fhirServer"]
        assert "s3cr3t" not in resp.text
        assert fhir.seen == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("patientId", ".."), ("patientId", "."), ("encounterId", ".."), ("userId", "Practitioner/..")],
)
def test_an_id_that_resolves_to_the_base_url_is_400_and_nothing_is_read(
    make_app_client: OpenClient, field: str, value: str
) -> None:
    with rogue_server() as fhir, make_app_client() as c:
        fhir.on("/fhir", Answer.json({"resourceType": "CapabilityStatement"}))
        resp = c.post(TRIAGE, json=_unread(fhir.base + "/fhir", **{field: value}))
        assert resp.status_code == 400, resp.text
        assert resp.json()["issue"][0]["expression"] == [f"context.{field}"]
        assert fhir.seen == []  # the token never went to the base URL


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_errors_do_not_tell_an_open_port_from_a_closed_one(make_app_client: OpenClient) -> None:
    def diagnostics(server: str) -> list[str]:
        resp = c.post(TRIAGE, json=_unread(server))
        assert resp.status_code == 412, resp.text
        return sorted(
            i["diagnostics"].split(": ", 1)[1] for i in resp.json()["issue"]
        )  # the text after "prefetch key 'x' (query) could not be read"

    with make_app_client(fhir_timeout_seconds=1) as c, black_hole() as hole:
        closed = diagnostics(f"http://127.0.0.1:{_closed_port()}/fhir")
        silent = diagnostics(f"http://127.0.0.1:{hole.port}/fhir")
        assert hole.connections > 0  # the open port was reached
    assert closed == silent
    assert all("could not be reached" in d for d in closed)
