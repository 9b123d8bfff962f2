"""Definitions written over FHIR (``PUT /fhir/{type}/{id}`` for an ActivityDefinition,
PlanDefinition or Questionnaire): every write a new version of its id.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), "postgresql"
)
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "definitions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("resource_type", sa.String(40), nullable=False),
        sa.Column("logical_id", sa.String(64), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(1000), nullable=True),
        sa.Column("version", sa.String(100), nullable=True),
        sa.Column("content", JSON_DOC, nullable=False),
        sa.Column("author", sa.String(200), nullable=True),
        sa.Column("stored_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_definitions")),
        sa.UniqueConstraint(
            "resource_type",
            "logical_id",
            "version_id",
            name=op.f("uq_definitions_resource_type_logical_id_version_id"),
        ),
    )
    op.create_index(op.f("ix_definitions_url"), "definitions", ["url"])


def downgrade() -> None:
    op.drop_index(op.f("ix_definitions_url"), table_name="definitions")
    op.drop_table("definitions")
