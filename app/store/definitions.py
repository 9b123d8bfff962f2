"""Definitions written over FHIR (``PUT /fhir/{type}/{id}``): every write a new row, the next
version of its id, none overwritten; read back by id (the latest version) and by canonical url
(``url|version`` for one business version, the bare url when one definition holds it)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.models import StoredDefinition

#: How many times a write retries when another took the same next version at the same time.
_RETRIES = 5


class VersionTaken(Exception):
    """Other writes of the same id kept taking the next version: the caller may try again."""


def store_definition(
    engine: Engine, resource: Mapping[str, Any], *, author: str | None
) -> dict[str, Any]:
    """Store ``resource`` (valid, with its id) as the next version of its id; the resource as
    stored, its ``meta.versionId`` and ``meta.lastUpdated`` set."""
    kind, ident = str(resource["resourceType"]), str(resource["id"])
    for _attempt in range(_RETRIES):
        now = datetime.now(UTC)
        try:
            with Session(engine) as session, session.begin():
                latest = session.scalar(
                    select(func.max(StoredDefinition.version_id)).where(
                        StoredDefinition.resource_type == kind,
                        StoredDefinition.logical_id == ident,
                    )
                )
                version_id = (latest or 0) + 1
                meta = {
                    **dict(resource.get("meta") or {}),
                    "versionId": str(version_id),
                    "lastUpdated": now.isoformat(),
                }
                content = {**dict(resource), "meta": meta}
                session.add(
                    StoredDefinition(
                        resource_type=kind,
                        logical_id=ident,
                        version_id=version_id,
                        url=resource.get("url"),
                        version=resource.get("version"),
                        content=content,
                        author=author,
                        stored_at=now,
                    )
                )
        except IntegrityError:  # another write took this version first: read the next one
            continue
        return content
    raise VersionTaken(f"{kind}/{ident}")


def _latest_per_id(session: Session, *where: Any) -> list[dict[str, Any]]:
    newest = (
        select(
            StoredDefinition.resource_type,
            StoredDefinition.logical_id,
            func.max(StoredDefinition.version_id).label("version_id"),
        )
        .where(*where)
        .group_by(StoredDefinition.resource_type, StoredDefinition.logical_id)
        .subquery()
    )
    rows = session.scalars(
        select(StoredDefinition)
        .join(
            newest,
            (StoredDefinition.resource_type == newest.c.resource_type)
            & (StoredDefinition.logical_id == newest.c.logical_id)
            & (StoredDefinition.version_id == newest.c.version_id),
        )
        .order_by(StoredDefinition.id)
    )
    return [dict(row.content) for row in rows]


def stored_by_id(engine: Engine, resource_type: str, ident: str) -> dict[str, Any] | None:
    with Session(engine) as session:
        found = _latest_per_id(
            session,
            StoredDefinition.resource_type == resource_type,
            StoredDefinition.logical_id == ident,
        )
    return found[0] if found else None


def stored_author(engine: Engine, resource_type: str, ident: str) -> str | None:
    """Who wrote the latest version of ``resource_type/ident`` (None: not written, or written
    in open mode, where nobody is named)."""
    with Session(engine) as session:
        return session.scalar(
            select(StoredDefinition.author)
            .where(
                StoredDefinition.resource_type == resource_type,
                StoredDefinition.logical_id == ident,
            )
            .order_by(StoredDefinition.version_id.desc())
            .limit(1)
        )


def stored_with_url(engine: Engine, url: str) -> list[dict[str, Any]]:
    """The latest version of every stored id, kept when that version has ``url`` (an id whose
    latest write moved to another url no longer answers to this one)."""
    with Session(engine) as session:
        ids = (
            select(StoredDefinition.resource_type, StoredDefinition.logical_id)
            .where(StoredDefinition.url == url)
            .distinct()
            .subquery()
        )
        latest = _latest_per_id(
            session,
            tuple_(StoredDefinition.resource_type, StoredDefinition.logical_id).in_(
                select(ids.c.resource_type, ids.c.logical_id)
            ),
        )
    return [row for row in latest if row.get("url") == url]


def stored_of_type(engine: Engine, resource_type: str) -> list[dict[str, Any]]:
    with Session(engine) as session:
        return _latest_per_id(session, StoredDefinition.resource_type == resource_type)


def stored_version(engine: Engine, url: str, version: str) -> list[dict[str, Any]]:
    """The latest write of each stored id that holds ``url`` at business version ``version``."""
    with Session(engine) as session:
        return _latest_per_id(
            session, StoredDefinition.url == url, StoredDefinition.version == version
        )


__all__ = [
    "VersionTaken",
    "store_definition",
    "stored_by_id",
    "stored_of_type",
    "stored_version",
    "stored_with_url",
]
