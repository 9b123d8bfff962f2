"""Client JWT replay defence: each token id (``jti``) an issuer sent is remembered until its
token expires, so the same token is accepted once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.store.db import dialect_insert
from app.store.models import SeenJti, utcnow


def remember_jti(session: Session, iss: str, jti: str, expires_at: datetime) -> bool:
    """Record a token id; ``False`` when the same issuer's ``jti`` is still remembered.

    A remembered entry whose token has expired no longer blocks: it is renewed in place.
    """
    stmt = dialect_insert(session, SeenJti).values(iss=iss, jti=jti, expires_at=expires_at)
    stmt = stmt.on_conflict_do_update(
        index_elements=["iss", "jti"],
        set_={"expires_at": stmt.excluded.expires_at},
        where=SeenJti.expires_at <= utcnow(),
    ).returning(SeenJti.id)
    return session.execute(stmt).scalar_one_or_none() is not None


def purge_expired_jtis(session: Session, now: datetime | None = None) -> int:
    """Forget token ids whose tokens have expired; returns how many were removed."""
    cutoff = now or utcnow()
    result = session.execute(
        delete(SeenJti)
        .where(SeenJti.expires_at <= cutoff)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0))
