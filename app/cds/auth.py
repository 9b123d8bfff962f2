"""Client authentication for CDS Hooks: the EHR's signed JWT in ``Authorization: Bearer``.

CDS Hooks 2.0 §"Trusting CDS Clients": the client signs a short-lived JWT with an asymmetric key
it publishes as a JWKS. The service trusts a configured list of issuers; per issuer the keys come
inline, from a JWKS URL, or from the token's ``jku`` header when that URL is on the issuer's
allow-list. ``aud`` must equal the URL that was called, ``exp``/``iat`` are checked with a small
leeway, and every ``jti`` is remembered (through the store, so the refusal holds across workers)
so a replayed token is refused. With no trusted issuer configured the service runs in open mode.
"""

from __future__ import annotations

import base64
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import httpx
from fastapi import Query, Request
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from app import json_input
from app.cds.errors import Issue, Unauthorized
from app.cds.links import INVALID, NOT_CONFIGURED, UNSIGNED, RunLinks, run_link
from app.store import jtis

if TYPE_CHECKING:
    from fastapi import FastAPI
    from sqlalchemy import Engine

    from app.settings import Settings

log = logging.getLogger(__name__)

#: Asymmetric JWS algorithms only: ``none`` and the shared-secret ``HS*`` family are refused.
ALLOWED_ALGORITHMS = (
    "ES256",
    "ES384",
    "ES512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
)
LEEWAY_SECONDS = 30
#: The longest a client JWT may live (``exp`` after ``iat``, and after now): five minutes, as
#: SMART Backend Services requires of its assertions. A longer-lived token is refused.
MAX_TOKEN_LIFETIME_SECONDS = 300
#: The longest ``jti`` remembered (the replay ledger's column holds 500 characters).
MAX_JTI_LENGTH = 255
JWKS_CACHE_SECONDS = 300

#: ``remember(iss, jti, until) -> True`` when first seen, ``False`` for a replay; ``until`` is
#: the last moment (epoch seconds) the token is accepted: its ``exp`` plus the leeway.
JtiLedger = Callable[[str, str, int], Awaitable[bool]]


@dataclass(frozen=True, kw_only=True)
class TrustedIssuer:
    """One entry of ``settings.trusted_issuers``."""

    iss: str
    jwks_url: str | None = None
    jwks: Mapping[str, Any] | None = None
    allowed_jku: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, entry: Mapping[str, Any]) -> TrustedIssuer:
        return cls(
            iss=str(entry["iss"]),
            jwks_url=entry.get("jwks_url"),
            jwks=entry.get("jwks"),
            allowed_jku=tuple(entry.get("allowed_jku") or ()),
        )


@dataclass(frozen=True, kw_only=True)
class ClientIdentity:
    """Who called: the verified issuer and the token's claims."""

    iss: str
    claims: dict[str, Any]


def _refuse(message: str) -> Unauthorized:
    return Unauthorized(
        issues=[Issue(code="login", diagnostics=message, expression="Authorization")]
    )


def _b64json(part: str) -> dict[str, Any]:
    """A JWT header or payload: base64url JSON, bounded like any JSON from outside."""
    raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    value = json_input.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _numeric_date(claims: Mapping[str, Any], name: str) -> float:
    """A JWT NumericDate (RFC 7519 §2): a JSON number, finite; strings and booleans are not."""
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _refuse(f"JWT {name} must be a number of seconds since the epoch")
    return float(value)


@dataclass(kw_only=True)
class ClientAuthenticator:
    """Verifies client JWTs against trusted issuers; ``open_mode`` when there are none."""

    issuers: Sequence[TrustedIssuer]
    remember_jti: JtiLedger
    http: httpx.AsyncClient | None = None
    leeway: int = LEEWAY_SECONDS
    #: the longest a token may live, in seconds (``HORISMOS_MAX_TOKEN_LIFETIME_SECONDS``)
    max_lifetime: int = MAX_TOKEN_LIFETIME_SECONDS
    clock: Callable[[], float] = time.time
    #: signs the card's link to a run's record (``HORISMOS_LINK_SECRET``); None: plain links
    links: RunLinks | None = None
    _jwks_cache: dict[str, tuple[float, KeySet]] = field(default_factory=dict)

    @property
    def open_mode(self) -> bool:
        return not self.issuers

    def warn_if_open(self) -> None:
        """Say at start what is not protected, or what will not work, in this configuration."""
        if self.open_mode:
            log.warning(
                "CDS client authentication is OFF (open mode): no trusted issuers configured; "
                "set HORISMOS_TRUSTED_ISSUERS to require signed client JWTs"
            )
        elif self.links is None:
            log.warning(
                "card links to the decision record will need a client credential: trusted "
                "issuers are configured but HORISMOS_LINK_SECRET is not set, so a browser "
                "following a card's link is refused (401)"
            )

    def run_url(self, base_url: str, run_id: str) -> str:
        """The card's link to a run's record: signed and expiring when a link secret is set."""
        return run_link(base_url, run_id, self.links)

    async def verify(self, authorization: str | None, audience: str) -> ClientIdentity | None:
        """The caller's identity, ``None`` in open mode; raises ``Unauthorized`` otherwise."""
        if self.open_mode:
            return None
        if not authorization or not authorization.lower().startswith("bearer "):
            raise _refuse("a Bearer JWT signed by a trusted CDS client is required")
        token = authorization[7:].strip()
        parts = token.split(".")
        if len(parts) != 3:
            raise _refuse("the bearer token is not a compact JWS")
        try:
            header, payload = _b64json(parts[0]), _b64json(parts[1])
        except ValueError:
            raise _refuse("the bearer token's header or payload is not base64url JSON") from None
        alg = header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            raise _refuse(f"JWT alg {alg!r} refused: only asymmetric algorithms are accepted")
        issuer = next((i for i in self.issuers if i.iss == payload.get("iss")), None)
        if issuer is None:
            raise _refuse(f"JWT issuer {payload.get('iss')!r} is not trusted")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise _refuse("JWT header must name its key with 'kid'")
        keys = await self._keys(issuer, header.get("jku"), kid)
        try:
            key = keys.get_by_kid(kid)
        except (ValueError, KeyError, JoseError):
            raise _refuse(f"no key with kid {kid!r} for issuer {issuer.iss!r}") from None
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except JoseError as exc:
            raise _refuse(f"JWT signature does not verify: {exc.description}") from None
        claims = dict(decoded.claims)
        self._check_claims(claims, audience)
        # remembered for as long as the token is acceptable: its exp plus the leeway
        exp = math.ceil(_numeric_date(claims, "exp")) + self.leeway
        if not await self.remember_jti(issuer.iss, str(claims["jti"]), exp):
            raise _refuse(f"JWT jti {claims['jti']!r} was already used (replay)")
        return ClientIdentity(iss=issuer.iss, claims=claims)

    def _check_claims(self, claims: dict[str, Any], audience: str) -> None:
        now = self.clock()
        for name in ("iss", "aud", "exp", "iat", "jti"):
            if name not in claims:
                raise _refuse(f"JWT claim {name!r} is required")
        aud = claims["aud"]
        auds = aud if isinstance(aud, list) else [aud]
        if audience.rstrip("/") not in [str(a).rstrip("/") for a in auds]:
            raise _refuse(f"JWT aud {aud!r} is not this service's URL {audience!r}")
        jti = claims["jti"]
        if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI_LENGTH:
            raise _refuse(f"JWT jti must be a string of 1 to {MAX_JTI_LENGTH} characters")
        exp, iat = _numeric_date(claims, "exp"), _numeric_date(claims, "iat")
        if exp + self.leeway < now:
            raise _refuse("JWT has expired")
        if iat - self.leeway > now:
            raise _refuse("JWT iat is in the future")
        if exp - iat > self.max_lifetime or exp - now > self.max_lifetime + self.leeway:
            raise _refuse(
                f"JWT lives longer than the {self.max_lifetime} s this service accepts "
                "(exp too far after iat or after now)"
            )

    async def _keys(self, issuer: TrustedIssuer, jku: Any, kid: str) -> KeySet:
        """The keys the token is checked with: its ``jku`` only when the issuer lists it, else
        the issuer's configured keys. A ``jku`` not listed is never fetched (the token would
        name its own keys): it is ignored, and a token signed with a key the issuer's configured
        set does not hold fails its ``kid`` or signature check."""
        if jku is not None and jku in issuer.allowed_jku:
            return await self._fetch(str(jku), kid)
        if issuer.jwks is not None:
            return KeySet.import_key_set(dict(issuer.jwks))  # type: ignore[arg-type]
        if issuer.jwks_url is not None:
            return await self._fetch(issuer.jwks_url, kid)
        if jku is not None:
            raise _refuse(
                f"JWT jku {jku!r} is not on issuer {issuer.iss!r}'s allowed_jku and the issuer "
                "has no other keys configured"
            )
        raise _refuse(f"issuer {issuer.iss!r} has no keys configured")

    async def _fetch(self, url: str, kid: str) -> KeySet:
        cached = self._jwks_cache.get(url)
        now = self.clock()
        if cached and now - cached[0] < JWKS_CACHE_SECONDS and _has_kid(cached[1], kid):
            return cached[1]
        if self.http is None:
            raise _refuse(f"cannot fetch JWKS {url}: no HTTP client")
        try:
            resp = await self.http.get(url, timeout=5.0)
            resp.raise_for_status()
            keys = KeySet.import_key_set(resp.json())
        except (httpx.HTTPError, ValueError, JoseError) as exc:
            raise _refuse(f"cannot fetch the issuer's JWKS from {url}: {exc}") from None
        self._jwks_cache[url] = (now, keys)
        return keys


def _has_kid(keys: KeySet, kid: str) -> bool:
    try:
        keys.get_by_kid(kid)
    except (ValueError, KeyError, JoseError):
        return False
    return True


class MemoryJtiLedger:
    """A process-local jti ledger for tests and one-process tools (the service uses the store)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    async def __call__(self, iss: str, jti: str, exp: int) -> bool:
        if (iss, jti) in self._seen:
            return False
        self._seen.add((iss, jti))
        return True


# --- the shared FastAPI dependency -------------------------------------------------------


def store_jti_ledger(engine: Engine) -> JtiLedger:
    """A jti ledger in the database (``app.store.jtis.remember_jti``): refusals hold across
    workers."""
    from datetime import UTC, datetime

    from starlette.concurrency import run_in_threadpool

    from app.store import session_scope

    async def remember(iss: str, jti: str, until: int) -> bool:
        def write() -> bool:
            with session_scope(engine) as session:
                return jtis.remember_jti(session, iss, jti, datetime.fromtimestamp(until, UTC))

        return await run_in_threadpool(write)

    return remember


def build_authenticator(
    settings: Settings, *, engine: Engine, http: httpx.AsyncClient | None
) -> ClientAuthenticator:
    """The service's one authenticator, from ``settings.trusted_issuers``: the CDS routes and
    the run routes share it."""
    secret = settings.link_secret
    return ClientAuthenticator(
        issuers=[TrustedIssuer.from_config(i.model_dump()) for i in settings.trusted_issuers],
        remember_jti=store_jti_ledger(engine),
        max_lifetime=settings.max_token_lifetime_seconds,
        http=http,
        links=None
        if secret is None
        else RunLinks(
            secret=secret.get_secret_value().encode(), ttl_seconds=settings.link_ttl_seconds
        ),
    )


def client_authenticator(app: FastAPI) -> ClientAuthenticator:
    """The app's one authenticator (built when the service starts, ``app.container``)."""
    running = app.state.container.running
    if running is None:
        raise RuntimeError("the service has not started: its lifespan builds the authenticator")
    auth: ClientAuthenticator = running.authenticator
    return auth


def called_url(request: Request) -> tuple[str, str]:
    """(the URL that was called, the service's base URL) as the client sees them: the JWT's
    ``aud``. ``public_base_url`` + path when set (behind a proxy), else the request URL."""
    settings: Settings = request.app.state.container.settings
    base_setting = settings.public_base_url
    if base_setting:
        base = str(base_setting).rstrip("/")
        return base + request.url.path, base
    return str(request.url.replace(query=None)), str(request.base_url).rstrip("/")


#: OpenAPI ``responses`` entry for routes guarded by ``require_client``.
CLIENT_JWT_RESPONSE: dict[int | str, dict[str, Any]] = {
    401: {"description": "Trusted issuers are configured and the client JWT is missing or invalid"}
}


async def require_client(request: Request) -> ClientIdentity | None:
    """FastAPI dependency: the verified CDS client (401 otherwise); ``None`` in open mode.

    The CDS routes and the run routes (``/workflows/{id}/runs``, ``/runs/{id}``, replay,
    resume) use this same verifier, so one configuration protects both."""
    auth = client_authenticator(request.app)
    audience, _base = called_url(request)
    return await auth.verify(request.headers.get("authorization"), audience)


#: OpenAPI ``responses`` entry for ``GET /runs/{id}`` (``require_client_or_run_link``).
CLIENT_JWT_OR_LINK_RESPONSE: dict[int | str, dict[str, Any]] = {
    401: {
        "description": "Trusted issuers are configured and neither a valid client JWT nor a "
        "valid, unexpired signed link (`exp`, `sig`) for this run was presented (a short "
        "page when HTML was asked for)",
        "content": {"text/html": {"schema": {"type": "string"}}},
    }
}


@dataclass(frozen=True, kw_only=True)
class RunRecordAccess:
    """Who may read a run's record: a verified client, a signed link, or anyone (open mode).

    ``refused`` holds the reason a signed link was refused, so the route can tell a browser in
    a page rather than in JSON; ``challenge`` the 401 a caller that is not a browser gets
    instead (the client JWT's, when neither a JWT nor a link was presented)."""

    client: ClientIdentity | None = None
    by_link: bool = False
    refused: str | None = None
    challenge: Unauthorized | None = None


async def require_client_or_run_link(
    request: Request,
    exp: Annotated[str | None, Query(description="Signed card link: expiry, unix seconds")] = None,
    sig: Annotated[
        str | None,
        Query(description="Signed card link: base64url HMAC-SHA256 of `GET /runs/{id}\\n{exp}`"),
    ] = None,
) -> RunRecordAccess:
    """FastAPI dependency of ``GET /runs/{run_id}`` only: the client JWT as everywhere, or a
    signed link (``app.cds.links``) for exactly this run. A request with an ``Authorization``
    header is judged by its JWT alone; in open mode everything is accepted as before."""
    auth = client_authenticator(request.app)
    if auth.open_mode:
        return RunRecordAccess()
    has_link = exp is not None or sig is not None
    if not request.headers.get("authorization") and not has_link:
        # a browser following a card link: a page says what is missing, not a JWT's 401 JSON
        try:
            return RunRecordAccess(client=await require_client(request))
        except Unauthorized as exc:
            reason = NOT_CONFIGURED if auth.links is None else UNSIGNED
            return RunRecordAccess(refused=reason, challenge=exc)
    if request.headers.get("authorization") or not has_link:
        return RunRecordAccess(client=await require_client(request))
    run_id = request.path_params.get("run_id")
    if auth.links is None or request.method != "GET" or not isinstance(run_id, str):
        return RunRecordAccess(refused=INVALID)
    refused = auth.links.refusal(run_id, exp, sig)
    return RunRecordAccess(by_link=refused is None, refused=refused)


def refuse_link(reason: str) -> Unauthorized:
    """The 401 for a refused signed link (an OperationOutcome naming the query)."""
    return Unauthorized(issues=[Issue(code="login", diagnostics=reason, expression="sig")])
