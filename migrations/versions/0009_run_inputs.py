"""Runs keep their input status: ``runs.inputs``, for every property the run read whether its
inputs came in complete, and if not (absent, refused, stale, truncated) why.

A JSON list (``app.world.inputs.InputStatus.to_json``), shown in ``GET /runs/{id}`` and on the
run's page. Runs stored before this revision, and runs on structured input, have none.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("inputs", JSON_DOC, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("inputs")
