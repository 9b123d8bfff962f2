"""/metrics stays small whatever methods callers invent (it is served without authentication)."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_invented_http_methods_do_not_grow_the_metrics(app_client: TestClient) -> None:
    app_client.get("/healthz")
    before = len(app_client.get("/metrics").content)
    for i in range(300):
        app_client.request(f"X{i:03d}", "/healthz")
    text = app_client.get("/metrics").text
    assert "X123" not in text
    assert (
        'horismos_http_requests_total{method="OTHER",route="/healthz",status="405"} 300.0' in text
    )
    # one more label set for the invented methods, not 300: a few kilobytes at most
    assert len(text.encode()) < before + 8_000
