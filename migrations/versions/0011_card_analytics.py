"""Cards and feedback say which card declaration, which rules and which deployment version they
were about, so override reasons can be counted per service, card and rule.

``issued_cards`` gains the card's declaration key (its summary template) and the rules of the
decision's proof; ``feedback`` gains the same two, the deployment version of the run that
issued the card and the override reason's ``system|code``. Rows stored before this revision
have none recorded (analytics counts them under an unknown card).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)


def upgrade() -> None:
    with op.batch_alter_table("issued_cards") as batch:
        batch.add_column(sa.Column("card_key", sa.String(500), nullable=True))
        batch.add_column(sa.Column("rules", JSON_DOC, nullable=True))
    with op.batch_alter_table("feedback") as batch:
        batch.add_column(sa.Column("card_key", sa.String(500), nullable=True))
        batch.add_column(sa.Column("rules", JSON_DOC, nullable=True))
        batch.add_column(sa.Column("deployment_version", sa.String(100), nullable=True))
        batch.add_column(sa.Column("reason_code", sa.String(500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("feedback") as batch:
        batch.drop_column("reason_code")
        batch.drop_column("deployment_version")
        batch.drop_column("rules")
        batch.drop_column("card_key")
    with op.batch_alter_table("issued_cards") as batch:
        batch.drop_column("rules")
        batch.drop_column("card_key")
