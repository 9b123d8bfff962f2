"""Effects may be ``refused``: a write the commit adapter declined to send.

Until now such rows were stored as ``failed`` with ``remote_response.refused = true``; upgrading
turns them into ``refused`` rows (without the flag), downgrading turns ``refused`` rows back into
flagged ``failed`` ones so the narrower check holds again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies: a migration must not change when app code does.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), "postgresql"
)
OLD_STATES = "state IN ('proposed', 'attempted', 'accepted', 'conflicted', 'failed', 'unknown')"
NEW_STATES = (
    "state IN ('proposed', 'attempted', 'accepted', 'conflicted', 'failed', 'unknown', 'refused')"
)
EFFECTS = sa.table(
    "effects",
    sa.column("id", sa.Integer()),
    sa.column("state", sa.String(20)),
    sa.column("remote_response", JSON_DOC),
)


def _replace_check(condition: str) -> None:
    # Batch mode: ALTER on PostgreSQL; on SQLite the table is copied with the new check.
    with op.batch_alter_table("effects") as batch:
        batch.drop_constraint(op.f("ck_effects_state"), type_="check")
        batch.create_check_constraint(op.f("ck_effects_state"), condition)


def _rows(state: str) -> list[tuple[int, dict[str, Any] | None]]:
    found = op.get_bind().execute(
        sa.select(EFFECTS.c.id, EFFECTS.c.remote_response).where(EFFECTS.c.state == state)
    )
    return [(row.id, row.remote_response) for row in found]


def _set(effect_id: int, state: str, response: dict[str, Any]) -> None:
    op.get_bind().execute(
        sa.update(EFFECTS)
        .where(EFFECTS.c.id == effect_id)
        .values(state=state, remote_response=response)
    )


def upgrade() -> None:
    _replace_check(NEW_STATES)
    for effect_id, response in _rows("failed"):
        if isinstance(response, dict) and response.get("refused") is True:
            _set(effect_id, "refused", {k: v for k, v in response.items() if k != "refused"})


def downgrade() -> None:
    for effect_id, response in _rows("refused"):
        _set(effect_id, "failed", {**(response or {}), "refused": True})
    _replace_check(OLD_STATES)
