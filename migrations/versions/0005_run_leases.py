"""Runs carry a lease: a ``running`` run whose process died is taken over once it expires.

``lease_owner`` names the one claim (of one hook call) running the run, ``lease_expires_at``
until when it may; the holder renews it while it works. Rows claimed before this revision have
no lease, and count as expired.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("lease_owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", TIMESTAMP, nullable=True))
    op.create_index(
        op.f("ix_runs_status_lease_expires_at"), "runs", ["status", "lease_expires_at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_status_lease_expires_at"), table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
