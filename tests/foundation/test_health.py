"""Liveness, readiness and metrics as an operator or orchestrator sees them."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

DATA = Path(__file__).parent.parent / "data" / "foundation"


def test_healthz_answers_while_the_process_lives(app_client: TestClient) -> None:
    response = app_client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_database_and_ontology(app_client: TestClient) -> None:
    response = app_client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"] == "ok"
    assert body["ontology"]["loaded"] is True and body["ontology"]["problems"] == 0
    deployments = {d["id"]: d for d in body["deployments"]}
    assert {"med-safety", "triage"} <= set(deployments)  # and the opioid guideline's services
    assert all(d["status"] == "serving" for d in deployments.values())
    triage = deployments["triage"]
    assert (triage["iri"], triage["version"], triage["status"], triage["services"]) == (
        "https://horismos.dev/example/triage",
        "1.5.0",
        "serving",
        ["horismos-triage"],
    )
    assert len(triage["digest"]) == 64


def test_an_unsound_deployment_is_not_served_and_readyz_says_why(
    sqlite_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "x.db"
    database.write_bytes(sqlite_template.read_bytes())
    settings = Settings(database_url=f"sqlite:///{database}", ontology_paths=[DATA / "unsound.ttl"])
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz")
        runs = client.post("/workflows/Check/runs", json={"instances": []})
    assert ready.status_code == 503  # nothing is served
    (deployment,) = ready.json()["deployments"]
    assert deployment["status"] == "refused" and deployment["id"] == "unsound"
    nodes = {p["node"]: p["message"] for p in deployment["problems"]}
    assert "onUnreachable" in nodes["https://horismos.dev/example/unsound#Decide"]
    assert runs.status_code == 503
    assert runs.json()["problems"] == deployment["problems"]


def test_readyz_names_an_unmigrated_database(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}")
    with TestClient(create_app(settings)) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["database"].startswith("not migrated")
    assert "horismos db upgrade" in response.json()["database"]


def test_readyz_names_an_unreachable_database() -> None:
    settings = Settings(database_url="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["database"].startswith("unreachable")


def test_metrics_count_requests_by_route_template(app_client: TestClient) -> None:
    app_client.get("/healthz")
    app_client.get("/no/such/page")
    text = app_client.get("/metrics").text
    assert 'horismos_http_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert 'route="<unmatched>",status="404"' in text
    assert "/no/such/page" not in text


def test_cors_preflight_allows_configured_origin(
    make_app_client: object,
) -> None:
    with make_app_client(cors_origins=["https://ehr.example"]) as client:  # type: ignore[operator]
        response = client.options(
            "/healthz",
            headers={"Origin": "https://ehr.example", "Access-Control-Request-Method": "GET"},
        )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://ehr.example"
