"""Order-sign answered ahead: a run computed at order-select for an order-sign service carries
the key of its input (``ahead_key``: the service, the deployment version, the hook context and
the source-version vector of what it read); an order-sign call whose input has the same key
answers from it, as a run of its own that names the run it reused (``reused_run_id``).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("ahead_key", sa.String(100), nullable=True))
        batch.add_column(sa.Column("reused_run_id", sa.String(36), nullable=True))
    op.create_index(op.f("ix_runs_service_id_ahead_key"), "runs", ["service_id", "ahead_key"])


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_service_id_ahead_key"), table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("reused_run_id")
        batch.drop_column("ahead_key")
