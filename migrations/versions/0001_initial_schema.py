"""Initial schema: runs, their traces and source versions, effects, feedback, seen JWT ids.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model types: a migration must not change when app code does.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), "postgresql"
)
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("service_id", sa.String(length=200), nullable=True),
        sa.Column("hook", sa.String(length=200), nullable=True),
        sa.Column("hook_instance", sa.String(length=200), nullable=True),
        sa.Column("workflow_iri", sa.String(length=1000), nullable=False),
        sa.Column("workflow_version", sa.String(length=100), nullable=True),
        sa.Column("ontology_digest", sa.String(length=100), nullable=True),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("terminal", sa.String(length=1000), nullable=True),
        sa.Column("decision", JSON_DOC, nullable=True),
        sa.Column("request_digest", sa.String(length=100), nullable=True),
        sa.Column("response", JSON_DOC, nullable=True),
        sa.Column("outcome", JSON_DOC, nullable=True),
        sa.Column("world_state", JSON_DOC, nullable=True),
        sa.Column("position", sa.String(length=1000), nullable=True),
        sa.Column("wait_deadline", TIMESTAMP, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "status IN ('running', 'completed', 'suspended', 'failed')",
            name=op.f("ck_runs_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint(
            "service_id", "hook_instance", name=op.f("uq_runs_service_id_hook_instance")
        ),
    )
    op.create_index(op.f("ix_runs_created_at"), "runs", ["created_at"])
    op.create_index(op.f("ix_runs_status_wait_deadline"), "runs", ["status", "wait_deadline"])

    op.create_table(
        "seen_jtis",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("iss", sa.String(length=500), nullable=False),
        sa.Column("jti", sa.String(length=500), nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seen_jtis")),
        sa.UniqueConstraint("iss", "jti", name=op.f("uq_seen_jtis_iss_jti")),
    )
    op.create_index(op.f("ix_seen_jtis_expires_at"), "seen_jtis", ["expires_at"])

    op.create_table(
        "effects",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("effect_id", sa.String(length=200), nullable=False),
        sa.Column("tool", sa.String(length=1000), nullable=False),
        sa.Column("target_reference", sa.String(length=500), nullable=True),
        sa.Column("expected_version", sa.String(length=100), nullable=True),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("remote_response", JSON_DOC, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint(
            "state IN ('proposed', 'attempted', 'accepted', 'conflicted', 'failed', 'unknown')",
            name=op.f("ck_effects_state"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_effects_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_effects")),
        sa.UniqueConstraint("run_id", "effect_id", name=op.f("uq_effects_run_id_effect_id")),
    )
    op.create_index(op.f("ix_effects_state"), "effects", ["state"])

    op.create_table(
        "feedback",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("service_id", sa.String(length=200), nullable=False),
        sa.Column("card_uuid", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("accepted_suggestions", JSON_DOC, nullable=True),
        sa.Column("override_reason", JSON_DOC, nullable=True),
        sa.Column("outcome_timestamp", TIMESTAMP, nullable=False),
        sa.Column("received_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_feedback_run_id_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feedback")),
        sa.UniqueConstraint(
            "service_id",
            "card_uuid",
            "outcome",
            "outcome_timestamp",
            name=op.f("uq_feedback_service_id_card_uuid_outcome_outcome_timestamp"),
        ),
    )
    op.create_index(op.f("ix_feedback_run_id"), "feedback", ["run_id"])

    op.create_table(
        "source_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("resource_type", sa.String(length=100), nullable=False),
        sa.Column("resource_id", sa.String(length=200), nullable=False),
        sa.Column("version_id", sa.String(length=100), nullable=True),
        sa.Column("last_updated", sa.String(length=64), nullable=True),
        sa.Column("content_hash", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_source_versions_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source_versions")),
    )
    op.create_index(op.f("ix_source_versions_run_id"), "source_versions", ["run_id"])

    op.create_table(
        "trace_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.String(length=1000), nullable=True),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("payload", JSON_DOC, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_trace_events_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trace_events")),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_trace_events_run_id_seq")),
    )


def downgrade() -> None:
    op.drop_table("trace_events")
    op.drop_index(op.f("ix_source_versions_run_id"), table_name="source_versions")
    op.drop_table("source_versions")
    op.drop_index(op.f("ix_feedback_run_id"), table_name="feedback")
    op.drop_table("feedback")
    op.drop_index(op.f("ix_effects_state"), table_name="effects")
    op.drop_table("effects")
    op.drop_index(op.f("ix_seen_jtis_expires_at"), table_name="seen_jtis")
    op.drop_table("seen_jtis")
    op.drop_index(op.f("ix_runs_status_wait_deadline"), table_name="runs")
    op.drop_index(op.f("ix_runs_created_at"), table_name="runs")
    op.drop_table("runs")
