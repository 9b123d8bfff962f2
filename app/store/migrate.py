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

from app.resources import alembic_ini, resource_dir
from app.store.db import normalize_url

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
