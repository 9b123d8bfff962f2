"""The committed OpenAPI document is the live one: clients generated from it see every route."""

from __future__ import annotations

import difflib

from app.cli import DEFAULT_OPENAPI_PATH, render_openapi
from app.main import create_app
from app.settings import Settings


def test_committed_openapi_matches_the_live_schema() -> None:
    live = render_openapi(create_app(Settings()).openapi())
    committed = (
        DEFAULT_OPENAPI_PATH.read_text(encoding="utf-8") if DEFAULT_OPENAPI_PATH.exists() else ""
    )
    if committed != live:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                live.splitlines(keepends=True),
                "openapi/openapi.json (committed)",
                "live schema",
                n=2,
            )
        )
        raise AssertionError(
            "openapi/openapi.json is out of date with the routes; regenerate it with "
            "`horismos openapi` (or `make openapi`) and commit it.\n" + diff[:4000]
        )
