"""The no-op endpoint ``bench/hooks.py`` compares the service with: served by the same uvicorn
options, it reads and ``json.loads`` the same body and answers ``{"cards": []}``, so the
difference is what a hook call costs beyond HTTP and JSON parsing."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def _noop_app() -> Any:
    app = FastAPI()

    @app.post("/cds-services/{service_id}")
    async def noop(service_id: str, request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse({"cards": [], "hook": body.get("hook")})

    @app.get("/healthz")
    async def alive() -> dict[str, str]:
        return {"status": "ok"}

    return app


def noop_factory() -> Any:
    """The app uvicorn serves (``--factory``), one per worker."""
    return _noop_app()
