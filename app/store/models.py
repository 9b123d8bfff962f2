"""The tables, defined once for both backends (JSONB on PostgreSQL, JSON on SQLite).

The schema changes only through Alembic migrations (``migrations/versions``); a test runs
``alembic check`` so these models and the migrations cannot drift apart.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from app.statuses import RUN_STATUSES

EffectState = Literal[
    "proposed", "attempted", "accepted", "conflicted", "failed", "unknown", "refused"
]
ChangeStatus = Literal["proposed", "refused", "replayed", "approved", "active", "superseded"]
CHANGE_STATUSES: tuple[str, ...] = get_args(ChangeStatus)
EFFECT_STATES: tuple[str, ...] = get_args(EffectState)

#: JSON documents: JSONB on PostgreSQL (indexable, compact), JSON text elsewhere. A Python
#: ``None`` is stored as SQL NULL, never as the JSON literal ``null``.
JsonDoc = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")

#: JSON kept as written, key order included: ``json`` on PostgreSQL (JSONB would reorder keys),
#: JSON text elsewhere. For a document handed back as it was first sent.
JsonVerbatim = JSON(none_as_null=True)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware timestamps on every backend (SQLite stores them as UTC, returns aware)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value.isoformat()} given; pass a timezone")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class Run(Base):
    """One workflow run: a hook call, an API call, or a CLI run (those have no service)."""

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("service_id", "hook_instance"),
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
        Index(None, "status", "wait_deadline"),
        Index(None, "created_at"),
        Index(None, "patient"),
        Index(None, "updated_at"),
        Index(None, "status", "lease_expires_at"),
        Index(None, "deployment", "created_at"),
        Index(None, "service_id", "ahead_key"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    service_id: Mapped[str | None] = mapped_column(String(200))
    hook: Mapped[str | None] = mapped_column(String(200))
    hook_instance: Mapped[str | None] = mapped_column(String(200))
    #: The patient the run decided about (a hook call's ``context.patientId``): "every
    #: decision about this patient" is ``WHERE patient = …`` on an index.
    patient: Mapped[str | None] = mapped_column(String(200))
    workflow_iri: Mapped[str] = mapped_column(String(1000))
    workflow_version: Mapped[str | None] = mapped_column(String(100))
    #: The deployment the run ran on: its IRI, version and digest (``ontology_digest``).
    deployment: Mapped[str | None] = mapped_column(String(1000))
    deployment_version: Mapped[str | None] = mapped_column(String(100))
    #: What the deployment imports (``owl:imports``), each ``{"iri", "version", "digest"}``.
    deployment_imports: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonDoc)
    ontology_digest: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20), default="running")
    terminal: Mapped[str | None] = mapped_column(String(1000))
    decision: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    request_digest: Mapped[str | None] = mapped_column(String(100))
    #: The CDS response as returned, handed back byte for byte when the EHR retries the
    #: hookInstance (its keys in the order first sent, hence not JSONB).
    response: Mapped[dict[str, Any] | None] = mapped_column(JsonVerbatim)
    #: The run's outcome with its proof and replay material (its trace is in trace_events).
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    #: A hook run's validated FHIR input (``app.cds.hook_input``), zlib-compressed JSON: replay
    #: hydrates it again. Deferred: read only when asked for.
    input: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    #: A hook run's input status (``app.world.inputs``): every property it read, complete or
    #: absent, refused, stale, conflicting, unread, truncated, with the reasons in a clinician's
    #: words.
    inputs: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonDoc)
    #: A suspended run's World (``World.to_json()``) and the WaitStep it waits in.
    world_state: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    position: Mapped[str | None] = mapped_column(String(1000))
    wait_deadline: Mapped[datetime | None] = mapped_column(UtcDateTime)
    #: Who runs a ``running`` run (one claim of one hook call) and until when: the holder
    #: renews the lease while it works; once it has expired (its process died) another call
    #: may take the run over (``app.cds.leases``).
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    #: A run computed at order-select for an order-sign service (``app.cds.ahead``): the key of
    #: its input (service, deployment version, hook context, source-version vector). An
    #: order-sign call with the same key answers from it.
    ahead_key: Mapped[str | None] = mapped_column(String(100))
    #: The run answered ahead that this hook call's answer was taken from.
    reused_run_id: Mapped[str | None] = mapped_column(String(36))
    #: Where the run came from: None for a hook call a CDS client made; ``apply`` for one a
    #: ``$apply`` call made on a served service (no clinician was shown its cards).
    origin: Mapped[str | None] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)

    trace_events: Mapped[list[TraceEvent]] = relationship(
        back_populates="run", order_by="TraceEvent.seq", cascade="all, delete-orphan"
    )
    sources: Mapped[list[SourceVersion]] = relationship(
        back_populates="run", order_by="SourceVersion.id", cascade="all, delete-orphan"
    )
    effects: Mapped[list[Effect]] = relationship(
        back_populates="run", order_by="Effect.id", cascade="all, delete-orphan"
    )


class TraceEvent(Base):
    """One entry of a run's trace, in order (``seq`` counts from 0)."""

    __tablename__ = "trace_events"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    step: Mapped[str | None] = mapped_column(String(1000))
    kind: Mapped[str] = mapped_column(String(100))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonDoc)

    run: Mapped[Run] = relationship(back_populates="trace_events")


class SourceVersion(Base):
    """A FHIR resource version a run read: the vector a conditional commit and an audit check."""

    __tablename__ = "source_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    resource_type: Mapped[str] = mapped_column(String(100))
    resource_id: Mapped[str] = mapped_column(String(200))
    version_id: Mapped[str | None] = mapped_column(String(100))
    last_updated: Mapped[str | None] = mapped_column(String(64))  # the FHIR instant, verbatim
    content_hash: Mapped[str | None] = mapped_column(String(100))

    run: Mapped[Run] = relationship(back_populates="sources")


class Effect(Base):
    """A write a run proposed through the commit adapter, and how far it got."""

    __tablename__ = "effects"
    __table_args__ = (
        UniqueConstraint("run_id", "effect_id"),
        CheckConstraint(_in("state", EFFECT_STATES), name="state"),
        Index(None, "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    effect_id: Mapped[str] = mapped_column(String(200))
    tool: Mapped[str] = mapped_column(String(1000))
    target_reference: Mapped[str | None] = mapped_column(String(500))
    expected_version: Mapped[str | None] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), default="proposed")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    remote_response: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)

    run: Mapped[Run] = relationship(back_populates="effects")


class Feedback(Base):
    """CDS Hooks feedback on a card; an identical re-POST hits the unique key and is a no-op."""

    __tablename__ = "feedback"
    __table_args__ = (
        UniqueConstraint("service_id", "card_uuid", "outcome", "outcome_timestamp"),
        Index(None, "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    service_id: Mapped[str] = mapped_column(String(200))
    card_uuid: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    outcome: Mapped[str] = mapped_column(String(20))
    accepted_suggestions: Mapped[list[Any] | None] = mapped_column(JsonDoc)
    override_reason: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    outcome_timestamp: Mapped[datetime] = mapped_column(UtcDateTime)
    received_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    #: what the card was about, copied from its issue: the declaration key, the proof's rules,
    #: the deployment version; and the chosen override reason as ``system|code``
    card_key: Mapped[str | None] = mapped_column(String(500))
    rules: Mapped[list[str] | None] = mapped_column(JsonDoc)
    deployment_version: Mapped[str | None] = mapped_column(String(100))
    reason_code: Mapped[str | None] = mapped_column(String(500))


class IssuedCard(Base):
    """A card a hook run returned: feedback names cards by uuid, and this finds the card's run
    by key instead of searching every stored response (feedback on any other card is refused)."""

    __tablename__ = "issued_cards"
    __table_args__ = (UniqueConstraint("service_id", "card_uuid"), Index(None, "run_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    service_id: Mapped[str] = mapped_column(String(200))
    card_uuid: Mapped[str] = mapped_column(String(200))
    #: the card's declaration (its summary template) and the rules of the decision's proof
    card_key: Mapped[str | None] = mapped_column(String(500))
    rules: Mapped[list[str] | None] = mapped_column(JsonDoc)


class SeenJti(Base):
    """A client JWT ``jti`` already accepted, kept until the token expires (replay defence)."""

    __tablename__ = "seen_jtis"
    __table_args__ = (UniqueConstraint("iss", "jti"), Index(None, "expires_at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    iss: Mapped[str] = mapped_column(String(500))
    jti: Mapped[str] = mapped_column(String(500))
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Change(Base):
    """A proposed change to one deployment's files, and where it is in its lifecycle
    (docs/changes.md). ``files`` holds only the paths it changes; its candidate version is the
    base version's files with those replaced."""

    __tablename__ = "changes"
    __table_args__ = (
        CheckConstraint(_in("status", CHANGE_STATUSES), name="status"),
        Index(None, "deployment", "status"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    #: the target deployment's IRI, and its short id when proposed
    deployment: Mapped[str] = mapped_column(String(1000))
    deployment_id: Mapped[str] = mapped_column(String(200))
    base_digest: Mapped[str] = mapped_column(String(100))
    base_version: Mapped[str | None] = mapped_column(String(100))
    #: the change whose version was active when this one was proposed (None: the release files)
    base_change_id: Mapped[str | None] = mapped_column(String(36))
    files: Mapped[dict[str, Any]] = mapped_column(JsonDoc)
    candidate_digest: Mapped[str | None] = mapped_column(String(100))
    candidate_version: Mapped[str | None] = mapped_column(String(100))
    author: Mapped[str] = mapped_column(String(200))
    rationale: Mapped[str] = mapped_column(Text, default="")
    #: "human", or "drafted" when a model wrote the envelope (it still needs human approval)
    origin: Mapped[str] = mapped_column(String(20), default="human")
    status: Mapped[str] = mapped_column(String(20))
    #: the deterministic policy's verdict: each check, and why a refused one failed
    policy: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    #: the sandboxed replay's report: decisions that change (both proofs) and the count that stay
    replay: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    #: the change that was active when this one was activated (what a rollback returns to)
    replaces: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class ChangeEvent(Base):
    """One state a change entered: which, who moved it there, when, and why."""

    __tablename__ = "change_events"
    __table_args__ = (Index(None, "change_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    change_id: Mapped[str] = mapped_column(ForeignKey("changes.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(20))
    actor: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)


class DeploymentState(Base):
    """Which version of a deployment is active, for every worker and process: the change it
    runs (None: its release files), bumped ``generation`` on every activation and rollback, and
    the approved change that runs beside it in shadow mode."""

    __tablename__ = "deployment_state"

    deployment: Mapped[str] = mapped_column(String(1000), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    active_change_id: Mapped[str | None] = mapped_column(String(36))
    shadow_change_id: Mapped[str | None] = mapped_column(String(36))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class ShadowResult(Base):
    """What an approved change decided beside the active version on one live hook run."""

    __tablename__ = "shadow_results"
    __table_args__ = (UniqueConstraint("change_id", "run_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    change_id: Mapped[str] = mapped_column(ForeignKey("changes.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    agree: Mapped[bool | None] = mapped_column(Boolean)
    before: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    after: Mapped[dict[str, Any] | None] = mapped_column(JsonDoc)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class StoredDefinition(Base):
    """A FHIR definition (ActivityDefinition, PlanDefinition, Questionnaire) written with
    ``PUT /fhir/{type}/{id}``: every write a new version of its id, none overwritten."""

    __tablename__ = "definitions"
    __table_args__ = (
        UniqueConstraint("resource_type", "logical_id", "version_id"),
        Index(None, "url"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    resource_type: Mapped[str] = mapped_column(String(40))
    logical_id: Mapped[str] = mapped_column(String(64))
    #: 1, 2, … per logical id (the resource's ``meta.versionId``)
    version_id: Mapped[int] = mapped_column(Integer)
    url: Mapped[str | None] = mapped_column(String(1000))
    #: the definition's own ``version`` (its business version)
    version: Mapped[str | None] = mapped_column(String(100))
    content: Mapped[dict[str, Any]] = mapped_column(JsonDoc)
    author: Mapped[str | None] = mapped_column(String(200))
    stored_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class CompiledPlan(Base):
    """The Turtle an authored PlanDefinition's applicability conditions compiled to, kept under
    its deployment IRI (``https://horismos.dev/compiled-plan/{digest}``) when a ``$apply`` run
    of it is recorded: replay and the run page load it again from here."""

    __tablename__ = "compiled_plans"

    iri: Mapped[str] = mapped_column(String(1000), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
