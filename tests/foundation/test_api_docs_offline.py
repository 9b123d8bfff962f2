"""The API documentation pages work on a network without Internet: every script, style and
icon ``/docs`` and ``/redoc`` name is served by the service itself."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


@pytest.fixture
def client(sqlite_template: Path, tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "horismos.db"
    shutil.copyfile(sqlite_template, path)
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as test_client:
        yield test_client


class _Assets(HTMLParser):
    """The URLs a page makes the browser fetch: script sources, stylesheets and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag in {"script", "img"} and named.get("src"):
            self.urls.append(str(named["src"]))
        if tag == "link" and named.get("href"):
            self.urls.append(str(named["href"]))


def _assets(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"swagger-ui-bundle.js", "swagger-ui.css"}),
        ("/redoc", {"redoc.standalone.js"}),
    ],
)
def test_docs_pages_load_every_asset_from_the_service(
    client: TestClient, page: str, expected: set[str]
) -> None:
    answer = client.get(page)
    assert answer.status_code == 200
    assert "text/html" in answer.headers["content-type"]
    urls = _assets(answer.text)
    assert expected <= {u.rsplit("/", 1)[-1] for u in urls}
    for url in urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{page} loads {url} from elsewhere"
        fetched = client.get(url)
        assert fetched.status_code == 200, url
        assert fetched.content, url
    assert "cdn" not in answer.text.lower()


def test_swagger_ui_sends_the_api_description_to_no_validator(client: TestClient) -> None:
    assert '"validatorUrl": null' in client.get("/docs").text
