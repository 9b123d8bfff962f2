"""The service with HORISMOS_MCP_SERVERS: a hook call runs an mcp:// tool under its contract,
against the real FHIR test server and a real MCP server process; an unreachable server makes
the deployment unready, not the process dead; a binding that does not fit stops the start."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import McpServer, Settings
from tests.cds import clinical
from tests.support.fhir_server import FhirServer
from tests.support.live_server import live_server
from tests.tools.conftest import McpEvents, stdio_server

pytestmark = pytest.mark.fhirserver

ROOT = Path(__file__).resolve().parents[2]
SERVICE = ROOT / "tests" / "data" / "tools" / "mcp_service.ttl"
HttpServer = Callable[..., AbstractContextManager[str]]


def _ontology(tmp_path: Path, tool: str = "ticket") -> Path:
    path = tmp_path / f"mcp-service-{tool}.ttl"
    path.write_text(SERVICE.read_text().replace("mcp://tickets/ticket", f"mcp://tickets/{tool}"))
    return path


def _settings(pg_url: str, ontology: Path, url: str) -> Settings:
    return Settings(
        database_url=pg_url,
        reconcile_interval_seconds=0,
        ontology_paths=[ontology],
        mcp_servers={"tickets": McpServer(url=url)},
    )


def _hook(fhir_server: FhirServer, heart_rate: float) -> dict[str, Any]:
    pid = fhir_server.new_id()
    fhir_server.create(clinical.patient(pid))
    fhir_server.create(clinical.observation(pid, "8867-4", heart_rate, "/min"))
    return clinical.hook_request(
        "patient-view", {"patientId": pid}, fhir_server=fhir_server.base_url
    )


@pytest.fixture
def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready_within(client: TestClient, seconds: float) -> dict[str, Any]:
    """Poll /readyz until it answers 200 (an unreachable server is retried between probes)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = client.get("/readyz")
        if answer.status_code == 200 or time.monotonic() > deadline:
            body: dict[str, Any] = answer.json()
            return body
        time.sleep(0.2)  # readiness poll, not a race cover


def test_a_hook_runs_its_mcp_tool_under_contract_and_an_unreachable_server_only_unreadies_it(
    pg_url: str,
    pg_engine: Any,
    tmp_path: Path,
    fhir_server: FhirServer,
    mcp_http: HttpServer,
    mcp_events: McpEvents,
    port: int,
) -> None:
    ontology = _ontology(tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"
    with mcp_http(port=port), TestClient(create_app(_settings(pg_url, ontology, url))) as client:
        ready = client.get("/readyz")
        answer = client.post("/cds-services/mcp-ticketing", json=_hook(fhir_server, 130))

        assert ready.status_code == 200, ready.text
        [deployment] = ready.json()["deployments"]
        assert (deployment["status"], deployment["unready"]) == ("serving", None)
        assert ready.json()["tools"]["mcp"]["tickets"]["state"] == "ready"
        assert answer.status_code == 200, answer.text
        [card] = answer.json()["cards"]
        assert card["summary"] == "Ticket filed"
        run_id = answer.json()["extension"]["dev.horismos.run"]["runId"]
        record = client.get(f"/runs/{run_id}").json()
        [call] = next(e for e in record["trace"] if e["step"] == "File")["calls"]
        assert (call["binding"], call["result"]) == ("mcp://tickets/ticket", {"ticket": "T-130"})
        [received] = mcp_events.of("call")
        assert received["args"] == {
            "case": received["args"]["case"],
            "score": 130,
            "severity": "Major",
            "urgent": False,
        }

    # the MCP server is gone: the deployment is unready, the process is not dead
    with TestClient(create_app(_settings(pg_url, ontology, url))) as client:
        unready = client.get("/readyz")
        alive = client.get("/healthz")
        answer = client.post("/cds-services/mcp-ticketing", json=_hook(fhir_server, 130))

        assert unready.status_code == 503
        [deployment] = unready.json()["deployments"]
        assert deployment["status"] == "serving"
        assert deployment["unready"].startswith("MCP server 'tickets' is unreachable")
        assert alive.status_code == 200
        assert answer.status_code == 200, answer.text
        assert [c["summary"] for c in answer.json()["cards"]] == ["No ticket was filed"]

        with mcp_http(port=port):
            back = _ready_within(client, 30)
            assert back["deployments"][0]["unready"] is None, back
            again = client.post("/cds-services/mcp-ticketing", json=_hook(fhir_server, 80))
        assert [c["summary"] for c in again.json()["cards"]] == ["Ticket filed"]


def _landed(step: dict[str, Any]) -> list[tuple[str, Any]]:
    """The facts a traced step added to the World."""
    added = (step.get("delta") or {}).get("added") or []
    return [(f["property"], f["value"]) for f in added]


def _variant(tmp_path: Path, tool: str, service_id: str) -> Path:
    """The ticketing deployment under another IRI and service id, bound to ``tool``."""
    path = tmp_path / f"{service_id}.ttl"
    text = _ontology(tmp_path, tool).read_text()
    text = text.replace(
        "<https://horismos.dev/test/mcp-service>", f"<https://horismos.dev/test/{service_id}>"
    )
    path.write_text(text.replace('horis:id "mcp-ticketing"', f'horis:id "{service_id}"'))
    return path


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_served_process_runs_mcp_tools_under_their_contracts_over_http(
    pg_url: str,
    pg_engine: Any,
    tmp_path: Path,
    fhir_server: FhirServer,
    mcp_http: HttpServer,
    mcp_events: McpEvents,
    transport: str,
) -> None:
    """uvicorn, the EHR's hook calls over HTTP, a real MCP server process: the conforming tool's
    result lands; the one answering an undeclared key takes onError and nothing lands."""
    conforming = _variant(tmp_path, "ticket", "mcp-ticketing")
    chatty = _variant(tmp_path, "ticket_chatty", "mcp-ticketing-chatty")
    with contextlib.ExitStack() as stack:
        if transport == "http":
            spec: dict[str, Any] = {"url": stack.enter_context(mcp_http())}
        else:
            spec = stdio_server(mcp_events).model_dump(exclude_none=True)
        env = {
            "HORISMOS_DATABASE_URL": pg_url,
            "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
            "HORISMOS_ONTOLOGY_PATHS": json.dumps([str(conforming), str(chatty)]),
            "HORISMOS_MCP_SERVERS": json.dumps({"tickets": spec}),
        }
        server = stack.enter_context(live_server(env, tmp_path / "server.log"))
        http = stack.enter_context(httpx.Client(base_url=server.base, timeout=60))
        ready = http.get("/readyz")
        filed = http.post("/cds-services/mcp-ticketing", json=_hook(fhir_server, 130))
        refused = http.post("/cds-services/mcp-ticketing-chatty", json=_hook(fhir_server, 90))
        run_id = filed.json()["extension"]["dev.horismos.run"]["runId"]
        record = http.get(f"/runs/{run_id}").json()
        chatty_id = refused.json()["extension"]["dev.horismos.run"]["runId"]
        chatty_record = http.get(f"/runs/{chatty_id}").json()

    assert ready.status_code == 200, ready.text
    assert ready.json()["tools"]["mcp"]["tickets"]["state"] == "ready"
    assert [c["summary"] for c in filed.json()["cards"]] == ["Ticket filed"]
    step = next(e for e in record["trace"] if e["step"] == "File")
    [call] = step["calls"]
    assert (call["binding"], call["result"]) == ("mcp://tickets/ticket", {"ticket": "T-130"})
    assert _landed(step) == [("ticket", "T-130")]
    assert [c["summary"] for c in refused.json()["cards"]] == ["No ticket was filed"]
    chatty_step = next(e for e in chatty_record["trace"] if e["step"] == "File")
    assert chatty_step["edge"] == "onError" and "internalNote" in chatty_step["error"]
    assert _landed(chatty_step) == []
    received = {c["tool"]: c["args"] for c in mcp_events.of("call")}
    assert received["ticket"]["score"] == 130 and received["ticket"]["urgent"] is False
    assert received["ticket_chatty"] == {"case": received["ticket_chatty"]["case"], "score": 90}


def test_a_binding_that_does_not_fit_its_mcp_tool_refuses_its_deployment(
    pg_url: str, tmp_path: Path, mcp_http: HttpServer, fhir_server: FhirServer
) -> None:
    ontology = _ontology(tmp_path, "ticket_whole_scores")
    with mcp_http() as url, TestClient(create_app(_settings(pg_url, ontology, url))) as client:
        ready = client.get("/readyz")
        answer = client.post("/cds-services/mcp-ticketing", json=_hook(fhir_server, 130))

    assert ready.status_code == 503
    [deployment] = ready.json()["deployments"]
    assert deployment["status"] == "refused"
    [problem] = deployment["problems"]
    assert problem["node"].endswith("#file_ticket")
    assert problem["message"].startswith(
        "file_ticket (horis:takes case: Patient, score: decimal, severity: Severity) does not "
        "fit MCP tool tickets/ticket_whole_scores: its argument 'score' is integer, not number"
    )
    assert answer.status_code == 503  # not served: nothing calls the tool


def test_horismos_run_calls_mcp_tools_through_the_same_setting(
    tmp_path: Path, mcp_http: HttpServer, mcp_events: McpEvents
) -> None:
    ticketing = ROOT / "tests" / "data" / "tools" / "ticketing.ttl"
    ontology = tmp_path / "ticketing.ttl"
    ontology.write_text(ticketing.read_text().replace('"BINDING"', '"mcp://tickets/ticket"'))
    facts = tmp_path / "case.json"
    facts.write_text(json.dumps({"instances": [{"id": "c1", "class": "Case", "score": 64}]}))
    with mcp_http() as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
        env["HORISMOS_MCP_SERVERS"] = json.dumps({"tickets": {"url": url}})
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("horismos")),
                "run",
                str(ontology),
                "--workflow",
                "Ticket",
                "--facts",
                str(facts),
                "--json",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["terminal"].endswith("Done")
    [call] = next(e for e in outcome["trace"] if e["step"] == "Issue")["calls"]
    assert call["result"] == {"ticket": "T-64"}
    assert [c["args"]["score"] for c in mcp_events.of("call")] == [64]


def test_horismos_tools_lists_each_mcp_server_and_the_bindings_it_cannot_serve(
    tmp_path: Path, mcp_http: HttpServer
) -> None:
    ontology = _ontology(tmp_path, "ticket_major_only")
    with mcp_http() as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
        env["HORISMOS_MCP_SERVERS"] = json.dumps({"tickets": {"url": url}})
        env["HORISMOS_ONTOLOGY_PATHS"] = str(ontology)
        done = subprocess.run(
            [str(Path(sys.executable).with_name("horismos")), "tools", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert done.returncode == 1
    listing = json.loads(done.stdout)
    assert listing["mcp"]["tickets"]["state"] == "ready"
    assert {"ticket", "ticket_major_only"} <= set(listing["mcp"]["tickets"]["tools"])
    [problem] = listing["problems"]
    assert "does not fit MCP tool tickets/ticket_major_only" in problem
    assert "accepts only ['Major'], not ['Minor']" in done.stderr
