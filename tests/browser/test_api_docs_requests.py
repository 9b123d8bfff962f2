"""In a real browser (Debian's Chromium driven by Playwright), ``/docs`` and ``/redoc`` render
the API while every request the page makes stays on the service: they work on a hospital
network without Internet. Requests elsewhere are recorded and refused, never sent."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Route, sync_playwright

from tests.support.live_server import LiveServer, live_server

CHROMIUM = Path("/usr/bin/chromium")

# Locally a missing Chromium skips these tests; under CI=true they run and fail on it.
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and os.environ.get("CI", "").strip().lower() not in {"1", "true", "yes"},
    reason="Debian's chromium is missing: run make deps",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("docs-server")
    database = directory / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    env = {"HORISMOS_DATABASE_URL": f"sqlite:///{database}"}
    with live_server(env, directory / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class _Traffic:
    answered: list[str] = field(default_factory=list)  # requests that got a response
    refused: list[str] = field(default_factory=list)  # reached the network bound elsewhere
    blocked: dict[str, str] = field(default_factory=dict)  # failed in the browser: why


def _open(browser: Browser, base: str, path: str, shown: str) -> _Traffic:
    """Open ``path`` until the selector ``shown`` is visible and the network is idle, recording
    every request the page makes: a request bound outside the service is aborted, not sent."""
    traffic = _Traffic()

    def gate(route: Route) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            traffic.refused.append(route.request.url)
            route.abort()

    page = browser.new_page()
    try:
        page.on("response", lambda response: traffic.answered.append(response.url))
        page.on(
            "requestfailed",
            lambda request: traffic.blocked.__setitem__(request.url, request.failure or ""),
        )
        page.route("**/*", gate)
        page.goto(base + path)
        page.wait_for_selector(shown, state="visible", timeout=30_000)
        page.wait_for_load_state("networkidle")
    finally:
        page.close()
    return traffic


def test_swagger_ui_renders_the_api_with_no_request_outside_the_service(
    browser: Browser, server: LiveServer
) -> None:
    traffic = _open(browser, server.base, "/docs", "text=/cds-services")
    assert traffic.refused == []
    assert traffic.blocked == {}
    assert all(url.startswith(server.base + "/") for url in traffic.answered), traffic.answered
    assert server.base + "/openapi.json" in traffic.answered
    assert server.base + "/docs/assets/swagger-ui-bundle.js" in traffic.answered


def test_redoc_renders_the_api_with_no_request_outside_the_service(
    browser: Browser, server: LiveServer
) -> None:
    traffic = _open(browser, server.base, "/redoc", "h1:has-text('Horismos')")
    assert traffic.refused == []
    assert all(url.startswith(server.base + "/") for url in traffic.answered), traffic.answered
    assert server.base + "/openapi.json" in traffic.answered
    assert server.base + "/docs/assets/redoc.standalone.js" in traffic.answered
    # the ReDoc bundle names a branding image on its CDN; the page's policy stops the browser
    # from ever sending that request
    for url, why in traffic.blocked.items():
        assert not url.startswith(server.base), (url, why)
        assert why == "csp", (url, why)
