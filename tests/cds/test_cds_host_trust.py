"""The Host header is the caller's to choose: it must not pick the JWT audience the service
accepts, nor the address card links point to (real database, real HTTP through the ASGI app)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import ECKey
from pydantic import ValidationError

from app.settings import Settings
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
SPEC_JWT = json.loads(
    (
        Path(__file__).parents[1] / "data/cds/fixtures/jwt-es384-example-expired-spec.json"
    ).read_text()
)
ISS = SPEC_JWT["payload"]["iss"]
ISSUERS = [{"iss": ISS, "jwks": SPEC_JWT["jwks"]}]
BASE = "https://cds.example.test"
EVIL = "evil.example"
TRIAGE = "/cds-services/horismos-triage"


def _bearer(aud: str) -> str:
    now = int(time.time())
    claims = {"iss": ISS, "aud": aud, "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    key = ECKey.import_key(SPEC_JWT["private_jwk"])
    token = jwt.encode({"alg": "ES384", "kid": "example-kid"}, claims, key, algorithms=["ES384"])
    return f"Bearer {token}"


def triage_body() -> dict[str, Any]:
    pid, eid = fx.new_id(), fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset([]),
            "conditions": fx.searchset([]),
        },
    )


def test_trusted_issuers_without_a_public_base_url_refuse_to_start() -> None:
    with pytest.raises(ValidationError, match="HORISMOS_PUBLIC_BASE_URL"):
        Settings(trusted_issuers=ISSUERS)


@pytest.mark.parametrize("url", ["cds.example.org", "ftp://cds.example.org", "https://x?y=1"])
def test_a_public_base_url_that_is_not_an_absolute_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValidationError, match="HORISMOS_PUBLIC_BASE_URL"):
        Settings(public_base_url=url)


@pytest.fixture
def secured(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE, trusted_issuers=ISSUERS) as c:
        yield c


def test_the_host_header_chooses_neither_the_audience_nor_the_links(secured: TestClient) -> None:
    forged = {"host": EVIL, "x-forwarded-host": EVIL, "x-forwarded-proto": "https"}
    resp = secured.post(
        TRIAGE,
        json=triage_body(),
        headers={**forged, "authorization": _bearer(f"https://{EVIL}{TRIAGE}")},
    )
    assert resp.status_code == 401, resp.text
    ok = secured.post(
        TRIAGE, json=triage_body(), headers={**forged, "authorization": _bearer(BASE + TRIAGE)}
    )
    assert ok.status_code == 200, ok.text
    links = [link["url"] for card in ok.json()["cards"] for link in card.get("links", [])]
    assert links and all(url.startswith(BASE + "/runs/") for url in links)
    assert EVIL not in ok.text


def test_open_mode_without_a_public_base_url_says_links_follow_the_host_header(
    make_app_client: OpenClient, caplog: pytest.LogCaptureFixture
) -> None:
    with make_app_client():
        pass
    assert "HORISMOS_PUBLIC_BASE_URL is not set" in caplog.text
