"""Client JWT verification (CDS Hooks 2.0 "Trusting CDS Clients") with the spec's ES384 key."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey

from app.cds.auth import ClientAuthenticator, MemoryJtiLedger, TrustedIssuer
from app.cds.errors import Unauthorized

SPEC = json.loads(
    (
        Path(__file__).parents[1] / "data/cds/fixtures/jwt-es384-example-expired-spec.json"
    ).read_text()
)
ISS = SPEC["payload"]["iss"]
AUD = "https://cds.example.org/cds-services/horismos-triage"
KEY = ECKey.import_key(SPEC["private_jwk"])


def _auth() -> ClientAuthenticator:
    return ClientAuthenticator(
        issuers=[TrustedIssuer(iss=ISS, jwks=SPEC["jwks"])], remember_jti=MemoryJtiLedger()
    )


def _token(
    *, header: dict[str, Any] | None = None, key: Any = KEY, alg: str = "ES384", **claims: Any
) -> str:
    now = int(time.time())
    payload = {"iss": ISS, "aud": AUD, "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    payload.update(claims)
    payload = {k: v for k, v in payload.items() if v is not None}
    head = {"alg": alg, "typ": "JWT", "kid": "example-kid", **(header or {})}
    return jwt.encode(head, payload, key, algorithms=[alg])


def _verify(auth: ClientAuthenticator, token: str | None, aud: str = AUD) -> Any:
    header = None if token is None else f"Bearer {token}"
    return anyio.run(auth.verify, header, aud)


def test_freshly_signed_es384_token_is_accepted() -> None:
    who = _verify(_auth(), _token())
    assert who.iss == ISS
    assert who.claims["aud"] == AUD


def test_the_spec_example_token_verifies_through_its_jku_but_is_expired() -> None:
    jku = SPEC["header"]["jku"]
    fetched: list[str] = []

    def serve_jwks(request: httpx.Request) -> httpx.Response:
        fetched.append(str(request.url))
        return httpx.Response(200, json=SPEC["jwks"])

    async def verify() -> Any:
        async with httpx.AsyncClient(transport=httpx.MockTransport(serve_jwks)) as http:
            auth = ClientAuthenticator(
                issuers=[TrustedIssuer(iss=ISS, allowed_jku=(jku,))],
                remember_jti=MemoryJtiLedger(),
                http=http,
            )
            return await auth.verify(f"Bearer {SPEC['compact_jwt']}", SPEC["payload"]["aud"])

    with pytest.raises(Unauthorized, match="expired"):
        anyio.run(verify)
    assert fetched == [jku]


def _record_fetches(fetched: list[str]) -> httpx.MockTransport:
    def serve_jwks(request: httpx.Request) -> httpx.Response:
        fetched.append(str(request.url))
        return httpx.Response(200, json=SPEC["jwks"])

    return httpx.MockTransport(serve_jwks)


def test_a_jku_not_allowed_is_never_fetched_and_the_configured_keys_decide() -> None:
    fetched: list[str] = []

    async def verify(token: str, issuer: TrustedIssuer) -> Any:
        async with httpx.AsyncClient(transport=_record_fetches(fetched)) as http:
            auth = ClientAuthenticator(issuers=[issuer], remember_jti=MemoryJtiLedger(), http=http)
            return await auth.verify(f"Bearer {token}", AUD)

    listed = TrustedIssuer(iss=ISS, jwks=SPEC["jwks"], allowed_jku=("https://ehr.example/jwks",))
    signed_by_the_issuer = _token(header={"jku": "https://evil.example/jwks"})
    assert anyio.run(verify, signed_by_the_issuer, listed).iss == ISS
    with pytest.raises(Unauthorized, match="no other keys configured"):
        anyio.run(
            verify, _token(header={"jku": "https://evil.example/jwks"}), TrustedIssuer(iss=ISS)
        )
    assert fetched == []


def _unsigned(claims: dict[str, Any]) -> str:
    import base64

    def enc(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{enc({'alg': 'none', 'typ': 'JWT', 'kid': 'example-kid'})}.{enc(claims)}."


@pytest.mark.parametrize(
    ("case", "make", "reason"),
    [
        ("expired", lambda: _token(exp=int(time.time()) - 3600), "expired"),
        ("wrong aud", lambda: _token(aud="https://elsewhere.example/cds-services/x"), "aud"),
        (
            "alg none",
            lambda: _unsigned({"iss": ISS, "aud": AUD, "jti": "x", "exp": 2**31, "iat": 1}),
            "alg 'none' refused",
        ),
        ("HS256", lambda: _token(alg="HS256", key=OctKey.generate_key(256)), "alg 'HS256'"),
        ("unknown kid", lambda: _token(header={"kid": "rotated-away"}), "kid"),
        ("untrusted iss", lambda: _token(iss="https://evil.example/"), "not trusted"),
        (
            "jku not allowed, another key",
            lambda: _token(
                header={"jku": "https://evil.example/jwks", "kid": "evil"},
                key=ECKey.generate_key("P-384"),
            ),
            "kid 'evil'",
        ),
        ("iat in the future", lambda: _token(iat=int(time.time()) + 3600), "future"),
        ("missing jti", lambda: _token(jti=None), "jti"),
    ],
)
def test_bad_tokens_are_refused_with_401(case: str, make: Any, reason: str) -> None:
    token = make()
    with pytest.raises(Unauthorized, match=reason) as info:
        _verify(_auth(), token)
    assert info.value.status_code == 401
    assert info.value.outcome()["issue"][0]["expression"] == ["Authorization"]


def test_replayed_jti_is_refused() -> None:
    auth = _auth()
    token = _token()
    _verify(auth, token)
    with pytest.raises(Unauthorized, match="replay"):
        _verify(auth, token)


def test_missing_bearer_is_refused_when_issuers_are_configured() -> None:
    with pytest.raises(Unauthorized, match="Bearer"):
        _verify(_auth(), None)


def test_open_mode_accepts_anonymous_calls_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    auth = ClientAuthenticator(issuers=[], remember_jti=MemoryJtiLedger())
    auth.warn_if_open()
    assert _verify(auth, None) is None
    assert "open mode" in caplog.text
