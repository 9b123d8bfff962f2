"""The Turtle of authored plans' compiled conditions, kept under their deployment IRI for the
runs recorded on them: written once (the IRI is a digest of the text), read back by replay."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.models import CompiledPlan


def keep_compiled_plan(engine: Engine, iri: str, text: str) -> None:
    """Keep ``text`` under ``iri`` unless it is kept already (by another call, at the same
    time too: the IRI names the text, so the first one written is the same)."""
    with Session(engine) as session:
        if session.get(CompiledPlan, iri) is not None:
            return
        session.add(CompiledPlan(iri=iri, text=text))
        try:
            session.commit()
        except IntegrityError:  # written meanwhile: the same text
            session.rollback()


def compiled_plan_text(session: Session, iri: str) -> str | None:
    """The Turtle kept under ``iri``, or None."""
    found: str | None = session.scalar(select(CompiledPlan.text).where(CompiledPlan.iri == iri))
    return found


__all__ = ["compiled_plan_text", "keep_compiled_plan"]
