"""Client JWTs signed with the CDS Hooks specification's example ES384 key (its issuer and
JWKS are what a test configures as a trusted issuer), for routes that ask for one."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

SPEC = json.loads(
    (
        Path(__file__).resolve().parents[1]
        / "data/cds/fixtures/jwt-es384-example-expired-spec.json"
    ).read_text()
)
KEY = ECKey.import_key(SPEC["private_jwk"])
#: what a test passes as ``trusted_issuers``
ISSUERS = [{"iss": SPEC["payload"]["iss"], "jwks": SPEC["jwks"]}]


def bearer(audience: str, sub: str, scope: str | None = None) -> dict[str, str]:
    """An ``Authorization`` header for a call to ``audience`` (the URL called) as ``sub``."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": SPEC["payload"]["iss"],
        "aud": audience,
        "iat": now,
        "exp": now + 120,
        "jti": str(uuid.uuid4()),
        "sub": sub,
    }
    if scope:
        claims["scope"] = scope
    head = {"alg": "ES384", "typ": "JWT", "kid": "example-kid"}
    return {"Authorization": "Bearer " + jwt.encode(head, claims, KEY, algorithms=["ES384"])}
