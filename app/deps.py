"""FastAPI dependencies as ``Annotated`` aliases: routes declare what they need by type.

``SessionDep`` gives a session without an open transaction; a route commits explicitly
(``with session.begin(): ...``) before it answers, so nothing is returned that was not stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from email.message import Message
from typing import Annotated

import httpx
from fastapi import Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.applications import Starlette

from app import json_input
from app.container import container_of, running
from app.deployments import Deployments
from app.deployments.catalog import Catalog
from app.errors import BadRequest, ClientError
from app.runtime.runner import Runner
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
    return container_of(request.app).settings


def get_engine(request: Request) -> Engine:
    return running(request.app).engine


def get_session(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session


def get_catalog(request: Request) -> Catalog:
    return running(request.app).catalog


def get_deployments(request: Request) -> Deployments:
    """The deployments at their active versions, read afresh from the database (the hook path
    does not use this: it checks its deployment's version in the transaction storing its run)."""
    parts = running(request.app)
    return parts.catalog.refresh(parts.engine)


def app_runner(app: Starlette) -> Runner:
    """The app's Runner (built in the lifespan): every run's context and persistence; a bare
    one (no Bridge, in-process tools) before the lifespan built it."""
    parts = container_of(app).running
    return parts.runner if parts is not None else Runner()


def get_http_client(request: Request) -> httpx.AsyncClient:
    return running(request.app).http


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` or ``application/<something>+json`` (parameters allowed)."""
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


class UnsupportedMediaType(ClientError):
    """Raised when a body is not declared as JSON: a cross-origin page may send ``text/plain``
    (or a body without a type) without a CORS preflight, so such a body is never acted on."""

    def __init__(self) -> None:
        super().__init__(
            415, "unsupported-media-type", "Content-Type", "send the body as application/json"
        )


async def checked_json_body(request: Request) -> None:
    """Dependency of the run routes that take a JSON body: refuse a body not declared as JSON
    (415) and JSON the service cannot walk or store (nested absurdly deep, a NUL character, an
    unpaired surrogate: 400 naming where), before FastAPI's own parsing acts on it."""
    raw = await request.body()
    if not raw:
        return
    if not is_json_media_type(request.headers.get("content-type")):
        raise UnsupportedMediaType()
    try:
        json_input.loads(raw)
    except json_input.JsonRefused as exc:
        raise BadRequest(where=exc.where or None, message=exc.message) from None
    except ValueError:
        return  # not JSON at all: FastAPI answers 422 with its own description


JsonBodyChecked = Depends(checked_json_body)
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SessionDep = Annotated[Session, Depends(get_session)]
DeploymentsDep = Annotated[Deployments, Depends(get_deployments)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
HttpClientDep = Annotated[httpx.AsyncClient, Depends(get_http_client)]
