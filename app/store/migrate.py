"""Alembic, driven from code: the schema changes only through ``migrations/versions``.

The migration scripts are the source tree's ``migrations/`` (checkout, editable install) or the
copy an installed wheel carries (``app.resources``), so ``horismos db upgrade`` works from any
working directory.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.resources import alembic_ini, resource_dir
from app.store.db import describe_error, make_engine, normalize_url

MIGRATIONS_DIR = resource_dir("migrations")


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration for ``url`` (or the settings' database when omitted)."""
    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise FileNotFoundError(
            f"Alembic migrations not found at {MIGRATIONS_DIR}; install Horismos from its "
            "source tree or its wheel, which both carry them"
        )
    ini = alembic_ini()
    config = Config(str(ini)) if ini is not None else Config()
    # Called from code (CLI, tests, the app): leave the host's logging configuration alone.
    config.attributes["configure_logging"] = False
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        # ``%`` is ConfigParser interpolation syntax; URLs may contain it (escaped passwords).
        rendered = normalize_url(url).render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def upgrade(url: str | None = None, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str | None = None, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


class NotMigrated(Exception):
    """Raised when ``horismos serve`` would start on a PostgreSQL database whose schema is not
    the one this version needs: every hook would answer 503 until someone migrated it."""


def prepare_to_serve(url: str) -> str:
    """What ``horismos serve`` does to its database before it listens; a line saying what.

    The embedded SQLite file is migrated here: it belongs to this one service. A PostgreSQL
    database is shared and migrated on purpose (``horismos db upgrade``, once per release), so
    one at another revision is refused with that fix (:class:`NotMigrated`); one not reachable
    now is left to ``/readyz``, which says so until it is.
    """
    parsed = normalize_url(url)
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite":
        upgrade(url)
        engine = make_engine(url)
        try:
            return (
                f"SQLite database {parsed.database} migrated to revision {current_revision(engine)}"
            )
        finally:
            engine.dispose()
    head = head_revision()
    engine = make_engine(url)
    try:
        current = current_revision(engine)
    except SQLAlchemyError as exc:
        return (
            f"database {shown} not reachable now ({describe_error(exc)}); /readyz says when it is"
        )
    finally:
        engine.dispose()
    if current != head:
        raise NotMigrated(
            f"database {shown} is at revision {current or 'none (empty)'}, this version needs "
            f"{head}: run `horismos db upgrade` first"
        )
    return f"database {shown} at revision {current}"
