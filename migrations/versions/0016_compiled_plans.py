"""The Turtle each authored PlanDefinition's conditions compiled to, kept for the runs a
``$apply`` call recorded on it (replay loads it again).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "compiled_plans",
        sa.Column("iri", sa.String(1000), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("iri", name=op.f("pk_compiled_plans")),
    )


def downgrade() -> None:
    op.drop_table("compiled_plans")
