"""Runs record their deployment: its IRI and version (its digest is ``ontology_digest``).

Each deployment is loaded, verified and versioned on its own; a run names the one it ran on, and
"the last runs of this deployment" is one indexed query (``deployment``, ``created_at``). Runs
stored before this revision have no deployment recorded.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("deployment", sa.String(length=1000), nullable=True))
        batch.add_column(sa.Column("deployment_version", sa.String(length=100), nullable=True))
    op.create_index(op.f("ix_runs_deployment_created_at"), "runs", ["deployment", "created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_deployment_created_at"), table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("deployment_version")
        batch.drop_column("deployment")
