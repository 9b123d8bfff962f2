"""Runs record the ontologies their deployment imports: each one's IRI, version and digest.

A deployment built on a common file (``owl:imports``) ran on that file's version too; editing
the common file changes the deployment's digest, and ``deployment_imports`` says which file
moved. Runs stored before this revision have none recorded.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("deployment_imports", JSON_DOC, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("deployment_imports")
