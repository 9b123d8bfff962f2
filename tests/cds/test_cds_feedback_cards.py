"""Feedback finds its card by key and refuses cards the service never returned (real database on
both backends, real HTTP through the ASGI app)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, func, select

from app.store import Feedback, session_scope
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
MED = "/cds-services/horismos-med-safety"
STAMP = "2025-06-01T10:05:31Z"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def _stored(engine: Engine) -> int:
    with session_scope(engine) as session:
        return int(session.execute(select(func.count()).select_from(Feedback)).scalar_one())


def test_feedback_for_a_card_never_issued_is_400_and_nothing_is_stored(
    client: TestClient, engine: Engine
) -> None:
    answer = client.post(MED, json=fx.med_safety_body()).json()
    real = answer["cards"][0]["uuid"]
    items = [
        {"card": real, "outcome": "overridden", "outcomeTimestamp": STAMP},
        {
            "card": "9368d37b-283f-44a0-93ea-547cebab93ed",
            "outcome": "accepted",
            "outcomeTimestamp": STAMP,
        },
    ]
    resp = client.post(MED + "/feedback", json={"feedback": items})
    assert resp.status_code == 400, resp.text
    [issue] = resp.json()["issue"]
    assert issue["expression"] == ["feedback[1].card"]
    assert _stored(engine) == 0
    elsewhere = client.post("/cds-services/horismos-triage/feedback", json={"feedback": items[:1]})
    assert elsewhere.status_code == 400  # the card belongs to another service
    ok = client.post(MED + "/feedback", json={"feedback": items[:1]})
    assert ok.json() == {"stored": 1, "duplicates": 0}


def test_thousands_of_feedback_items_are_matched_by_key_not_by_scanning_responses(
    client: TestClient, engine: Engine
) -> None:
    cards = []
    for _ in range(5):
        answer = client.post(MED, json=fx.med_safety_body()).json()
        cards.append(answer["cards"][0]["uuid"])
    items = [
        {
            "card": cards[i % len(cards)],
            "outcome": "overridden",
            "outcomeTimestamp": f"2025-06-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z",
        }
        for i in range(3_000)
    ]
    statements: list[str] = []
    app_engine = client.app.state.container.running.engine  # type: ignore[attr-defined]

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(app_engine, "before_cursor_execute", seen)
    try:
        resp = client.post(MED + "/feedback", json={"feedback": items})
    finally:
        event.remove(app_engine, "before_cursor_execute", seen)
    assert resp.status_code == 200, resp.text[:500]
    assert resp.json() == {"stored": 3_000, "duplicates": 0}
    assert _stored(engine) == 3_000
    # matched by key, in batches: no text search over stored responses, a few lookups in all
    assert not [s for s in statements if "LIKE" in s.upper()]
    assert len([s for s in statements if "issued_cards" in s]) <= 3
