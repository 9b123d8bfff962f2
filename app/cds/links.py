"""Signed, expiring, read-only links to a run's record: the card's "Decision record" link.

With trusted issuers configured every run route needs the CDS client's JWT, which a clinician's
browser following a card link does not have. When ``HORISMOS_LINK_SECRET`` is set the card link
carries its own credential instead: ``?exp=<unix seconds>&sig=<base64url HMAC-SHA256>`` over
``"GET /runs/{id}\\n{exp}"``. It opens ``GET /runs/{id}`` for that one run until ``exp`` and
nothing else: not another run, not replay, not resume (``app.cds.auth`` accepts it only on that
route). Signing (the card builder) and checking (the route's dependency) both live here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

__all__ = [
    "DEFAULT_TTL_SECONDS",
    "EXPIRED",
    "INVALID",
    "NOT_CONFIGURED",
    "UNSIGNED",
    "RunLinks",
    "run_link",
]

DEFAULT_TTL_SECONDS = 86_400

#: What the reader of a refused link is told (the OperationOutcome diagnostics and the page).
EXPIRED = "this link has expired; open the decision again from the EHR"
INVALID = "this link is not valid for this decision record; open the decision again from the EHR"
#: A browser opening a record with no credential at all, when card links are not signed.
NOT_CONFIGURED = (
    "this decision record needs authorization: the service accepts only signed CDS clients "
    "(HORISMOS_TRUSTED_ISSUERS is set) and its card links carry no credential of their own "
    "because HORISMOS_LINK_SECRET is not set. To open decision records from cards, the "
    "service's administrator sets HORISMOS_LINK_SECRET to a random value of at least 32 "
    "characters (links then open their one record for HORISMOS_LINK_TTL_SECONDS, a day by "
    "default) and restarts the service; cards answered from then on carry signed links"
)
#: A browser opening a record with no credential when card links are signed: an unsigned address.
UNSIGNED = (
    "this address of the decision record carries no signed link; open the decision again from "
    "the card in the EHR (its link is signed)"
)

_MAX_EXP_DIGITS = 12  # far beyond any real expiry; keeps a hostile value from being parsed


def _message(run_id: str, exp: int) -> bytes:
    return f"GET /runs/{run_id}\n{exp}".encode()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, kw_only=True)
class RunLinks:
    """Signs and checks run-record links with one secret (``HORISMOS_LINK_SECRET``)."""

    secret: bytes
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    clock: Callable[[], float] = time.time

    def __repr__(self) -> str:  # the secret never shows up in logs
        return f"RunLinks(ttl_seconds={self.ttl_seconds})"

    def signature(self, run_id: str, exp: int) -> str:
        mac = hmac.new(self.secret, _message(run_id, exp), hashlib.sha256).digest()
        return _b64(mac)

    def query(self, run_id: str, *, exp: int | None = None) -> str:
        """``exp=…&sig=…`` for ``GET /runs/{run_id}``, valid ``ttl_seconds`` from now unless
        ``exp`` (unix seconds) is given."""
        if exp is None:
            exp = int(self.clock()) + self.ttl_seconds
        return urlencode({"exp": exp, "sig": self.signature(run_id, exp)})

    def refusal(self, run_id: str, exp: str | None, sig: str | None) -> str | None:
        """Why the link does not open this run's record (``EXPIRED`` or ``INVALID``), or None.

        The signature is checked before the expiry, so only an authentic link is told it has
        expired."""
        if not exp or not sig or not exp.isascii() or not exp.isdigit():
            return INVALID
        if len(exp) > _MAX_EXP_DIGITS or not sig.isascii():
            return INVALID
        expected = self.signature(run_id, int(exp))
        if not hmac.compare_digest(expected.encode("ascii"), sig.encode("ascii")):
            return INVALID
        if int(exp) < self.clock():
            return EXPIRED
        return None


def run_link(base_url: str, run_id: str, links: RunLinks | None) -> str:
    """The address of a run's record as a card links to it: signed when ``links`` is set."""
    url = f"{base_url.rstrip('/')}/runs/{run_id}"
    return url if links is None else f"{url}?{links.query(run_id)}"
