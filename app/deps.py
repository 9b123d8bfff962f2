"""FastAPI dependencies as ``Annotated`` aliases: routes declare what they need by type.

``SessionDep`` gives a session without an open transaction; a route commits explicitly
(``with session.begin(): ...``) before it answers, so nothing is returned that was not stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import httpx
from fastapi import Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.errors import Unavailable
from app.ontology.model import Ontology
from app.settings import Settings
from app.tools import ToolInvoker


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def get_session(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session


def get_ontology(request: Request) -> Ontology:
    ontology: Ontology | None = getattr(request.app.state, "ontology", None)
    if ontology is None:
        raise Unavailable("no ontology is loaded", where="ontology")
    return ontology


def tool_invoker(app_state: object) -> ToolInvoker:
    """A fresh invoker for one run from the app's tool host (packaged tools, MCP sessions);
    a bare one before the lifespan built the host."""
    host = getattr(app_state, "tool_host", None)
    invoker = getattr(host, "invoker", None)
    return invoker() if callable(invoker) else ToolInvoker()


def get_http_client(request: Request) -> httpx.AsyncClient:
    client: httpx.AsyncClient = request.app.state.http
    return client


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SessionDep = Annotated[Session, Depends(get_session)]
OntologyDep = Annotated[Ontology, Depends(get_ontology)]
HttpClientDep = Annotated[httpx.AsyncClient, Depends(get_http_client)]
