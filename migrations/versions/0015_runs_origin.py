"""Where a run came from: NULL for a hook call a CDS client made, ``apply`` for a run made by a
``$apply`` call on a served CDS service (recorded like a hook call, so it is audited and
replayed, and left out of the card analytics: no clinician was shown its cards).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("origin", sa.String(20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("origin")
