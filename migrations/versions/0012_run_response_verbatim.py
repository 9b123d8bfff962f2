"""A run's CDS response is stored as ``json``, not ``jsonb``, on PostgreSQL: JSONB reorders an
object's keys, so a retried hookInstance got its first answer back with the same content but
different bytes. ``json`` keeps the text as written. SQLite stores JSON as text already.

Responses stored before this revision keep the key order JSONB gave them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE runs ALTER COLUMN response TYPE json USING response::json")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE runs ALTER COLUMN response TYPE jsonb USING response::jsonb")
