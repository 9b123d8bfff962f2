"""Change control: proposed changes to deployments, their states, the active version of each
deployment, and what approved changes decide in shadow mode.

``changes`` holds each proposal (target deployment, base digest, the files it changes, author,
rationale, policy verdict, replay report, status); ``change_events`` every state a change
entered, with who and when; ``deployment_state`` the active version of each deployment (the
change it runs, a generation bumped on every activation and rollback, the change in shadow
mode) for every worker and process; ``shadow_results`` what an approved change decided beside
the active version on a live hook run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)
STATUSES = "('proposed', 'refused', 'replayed', 'approved', 'active', 'superseded')"


def upgrade() -> None:
    op.create_table(
        "changes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("deployment", sa.String(length=1000), nullable=False),
        sa.Column("deployment_id", sa.String(length=200), nullable=False),
        sa.Column("base_digest", sa.String(length=100), nullable=False),
        sa.Column("base_version", sa.String(length=100), nullable=True),
        sa.Column("base_change_id", sa.String(length=36), nullable=True),
        sa.Column("files", JSON_DOC, nullable=False),
        sa.Column("candidate_digest", sa.String(length=100), nullable=True),
        sa.Column("candidate_version", sa.String(length=100), nullable=True),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("policy", JSON_DOC, nullable=True),
        sa.Column("replay", JSON_DOC, nullable=True),
        sa.Column("replaces", sa.String(length=36), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.CheckConstraint(f"status IN {STATUSES}", name=op.f("ck_changes_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_changes")),
    )
    op.create_index(op.f("ix_changes_deployment_status"), "changes", ["deployment", "status"])
    op.create_table(
        "change_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("change_id", sa.String(length=36), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("at", TIMESTAMP, nullable=False),
        sa.Column("detail", JSON_DOC, nullable=True),
        sa.ForeignKeyConstraint(
            ["change_id"],
            ["changes.id"],
            name=op.f("fk_change_events_change_id_changes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_events")),
    )
    op.create_index(
        op.f("ix_change_events_change_id_id"), "change_events", ["change_id", "id"]
    )
    op.create_table(
        "deployment_state",
        sa.Column("deployment", sa.String(length=1000), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("active_change_id", sa.String(length=36), nullable=True),
        sa.Column("shadow_change_id", sa.String(length=36), nullable=True),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("deployment", name=op.f("pk_deployment_state")),
    )
    op.create_table(
        "shadow_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("change_id", sa.String(length=36), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("agree", sa.Boolean(), nullable=True),
        sa.Column("before", JSON_DOC, nullable=True),
        sa.Column("after", JSON_DOC, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["change_id"],
            ["changes.id"],
            name=op.f("fk_shadow_results_change_id_changes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_shadow_results_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shadow_results")),
        sa.UniqueConstraint("change_id", "run_id", name=op.f("uq_shadow_results_change_id_run_id")),
    )
    op.create_index(op.f("ix_shadow_results_run_id"), "shadow_results", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_shadow_results_run_id"), table_name="shadow_results")
    op.drop_table("shadow_results")
    op.drop_table("deployment_state")
    op.drop_index(op.f("ix_change_events_change_id_id"), table_name="change_events")
    op.drop_table("change_events")
    op.drop_index(op.f("ix_changes_deployment_status"), table_name="changes")
    op.drop_table("changes")
