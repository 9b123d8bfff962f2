"""Hook runs keep what hydration read: ``runs.input``, the validated FHIR input of the call.

zlib-compressed JSON (``app.cds.hook_input``): the hook, the service, the context, the prefetch
data and the run's time. Replay hydrates it again under another version of the deployment (a
changed mapping, unit or value set). Runs stored before this revision have none.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("input", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("input")
