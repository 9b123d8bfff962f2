"""Runs name their patient (indexed), and are found by last activity for retention purges.

``runs.patient`` is the hook call's ``context.patientId``, so every decision about one patient
is one indexed query. Runs stored before this revision get the id of the one Patient resource
their source-version vector holds, when there is exactly one; others stay NULL.
``runs.updated_at`` is indexed for ``horismos purge`` (runs past a retention period).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BACKFILL = sa.text(
    "UPDATE runs SET patient = ("
    " SELECT min(sv.resource_id) FROM source_versions sv"
    " WHERE sv.run_id = runs.id AND sv.resource_type = 'Patient'"
    " HAVING count(DISTINCT sv.resource_id) = 1"
    ") WHERE runs.service_id IS NOT NULL"
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("patient", sa.String(length=200), nullable=True))
    op.create_index(op.f("ix_runs_patient"), "runs", ["patient"])
    op.create_index(op.f("ix_runs_updated_at"), "runs", ["updated_at"])
    op.get_bind().execute(_BACKFILL)


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_updated_at"), table_name="runs")
    op.drop_index(op.f("ix_runs_patient"), table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("patient")
