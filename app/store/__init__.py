"""Persistence: SQLAlchemy models, engines and sessions, repository functions, migrations."""

from app.statuses import RunStatus
from app.store.db import make_engine, make_sessionmaker, normalize_url, session_scope
from app.store.models import (
    Base,
    Effect,
    EffectState,
    Feedback,
    IssuedCard,
    Run,
    SeenJti,
    SourceVersion,
    TraceEvent,
)

__all__ = [
    "Base",
    "Effect",
    "EffectState",
    "Feedback",
    "IssuedCard",
    "Run",
    "RunStatus",
    "SeenJti",
    "SourceVersion",
    "TraceEvent",
    "make_engine",
    "make_sessionmaker",
    "normalize_url",
    "session_scope",
]
