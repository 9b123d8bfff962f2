"""Issued cards: feedback finds a card's run by key, and feedback on unknown cards is refused.

Until now feedback searched every stored response for the card's uuid as text (a full scan per
item). Upgrading creates ``issued_cards`` and fills it from the responses already stored.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies: a migration must not change when app code does.
JSON_DOC = sa.JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), "postgresql"
)
RUNS = sa.table(
    "runs",
    sa.column("id", sa.String(36)),
    sa.column("service_id", sa.String(200)),
    sa.column("response", JSON_DOC),
)
_BATCH = 500


def upgrade() -> None:
    cards = op.create_table(
        "issued_cards",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("service_id", sa.String(length=200), nullable=False),
        sa.Column("card_uuid", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name=op.f("fk_issued_cards_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_issued_cards")),
        sa.UniqueConstraint(
            "service_id", "card_uuid", name=op.f("uq_issued_cards_service_id_card_uuid")
        ),
    )
    op.create_index(op.f("ix_issued_cards_run_id"), "issued_cards", ["run_id"])
    bind = op.get_bind()
    after = ""
    while True:  # in pages by id: the stored responses need not fit in memory at once
        rows = bind.execute(
            sa.select(RUNS.c.id, RUNS.c.service_id, RUNS.c.response)
            .where(
                RUNS.c.id > after, RUNS.c.service_id.is_not(None), RUNS.c.response.is_not(None)
            )
            .order_by(RUNS.c.id)
            .limit(_BATCH)
        ).all()
        if not rows:
            return
        batch: list[dict[str, str]] = []
        for run_id, service_id, response in rows:
            for uuid in _card_uuids(response):
                batch.append({"run_id": run_id, "service_id": service_id, "card_uuid": uuid})
        if batch:
            bind.execute(sa.insert(cards), batch)
        after = rows[-1].id


def _card_uuids(response: object) -> list[str]:
    cards = response.get("cards") if isinstance(response, dict) else None
    found: list[str] = []
    for card in cards if isinstance(cards, list) else []:
        uuid = card.get("uuid") if isinstance(card, dict) else None
        if isinstance(uuid, str) and 0 < len(uuid) <= 200 and uuid not in found:
            found.append(uuid)
    return found


def downgrade() -> None:
    op.drop_index(op.f("ix_issued_cards_run_id"), table_name="issued_cards")
    op.drop_table("issued_cards")
