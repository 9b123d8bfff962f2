"""Alembic environment: the URL comes from ``-x url=…``, the config, or HORISMOS_DATABASE_URL."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text

from app.settings import Settings
from app.store.db import make_engine, normalize_url
from app.store.models import Base

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata
_LOCK = 0x686F7269736D6F73  # an arbitrary, fixed advisory-lock key for migrations


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        url = config.get_main_option("sqlalchemy.url")
    if not url:
        url = Settings().database_url
    return normalize_url(url).render_as_string(hide_password=False)


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                compare_type=True,
                # SQLite alters tables by copying them; batch mode makes that automatic.
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                if connection.dialect.name == "postgresql":
                    # Several containers may start at once and each runs the migrations: the
                    # transaction-scoped lock makes them take turns, and the later ones find
                    # the schema already at head.
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
