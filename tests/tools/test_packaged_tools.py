"""Tools shipped as installed packages (the ``horismos.tools`` entry-point group)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.ontology import OntologyError, load_ontology
from app.runtime import RunContext, run_workflow
from app.tools.host import ToolHost
from app.world import World, load_structured
from tests.runtime.conftest import NOW
from tests.support.packages import install

ROOT = Path(__file__).resolve().parents[2]
TICKETING = ROOT / "tests" / "data" / "tools" / "ticketing.ttl"
CASE = {"instances": [{"id": "c1", "class": "Case", "score": 72}]}

TOOL_SOURCE = """
from typing import Any

CALLS: list[dict[str, Any]] = []


def issue(case: str, score: float, severity: str) -> dict[str, Any]:
    CALLS.append({"case": case, "score": score, "severity": severity})
    return {"ticket": f"T-{int(score)}"}


NOT_A_FUNCTION = 42
"""


def _ticketing(tmp_path: Path, binding: str) -> Path:
    path = tmp_path / "ticketing.ttl"
    path.write_text(TICKETING.read_text().replace('"BINDING"', f'"{binding}"'))
    return path


@pytest.fixture
def module() -> str:
    """A module name no other test has imported."""
    return f"acme_tools_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def site(tmp_path: Path, module: str) -> Path:
    """A site directory holding the "acme-tools" package, which offers ``issue_ticket``."""
    return install(
        tmp_path / "site",
        "acme-tools",
        modules={f"{module}.tickets": TOOL_SOURCE},
        tools={"issue_ticket": f"{module}.tickets:issue"},
        version="1.4.0",
    )


@pytest.mark.parametrize("scheme", ["rust", "python"])
def test_a_packaged_tool_is_bound_by_its_name_and_its_result_lands(
    site: Path, module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    monkeypatch.syspath_prepend(str(site))
    host = ToolHost.discover()
    ontology = load_ontology(
        [_ticketing(tmp_path, f"{scheme}:issue_ticket")], registry=host.registry
    )
    world = World(ontology)
    assert load_structured(world, CASE).ok

    outcome = run_workflow(
        ontology, "Ticket", world, RunContext(now=NOW, tools=host.invoker(), run_id="r1")
    )

    assert outcome.terminal.endswith("Done"), outcome.trace
    assert world.value("c1", ontology.namespace + "ticket") == "T-72"
    calls = sys.modules[f"{module}.tickets"].CALLS
    assert calls == [{"case": "c1", "score": 72, "severity": "Major"}]
    assert host.status()["registered"] == [
        {
            "name": "issue_ticket",
            "target": f"{module}.tickets:issue",
            "package": "acme-tools 1.4.0",
        }
    ]


def test_a_name_no_package_offers_is_a_load_error(tmp_path: Path) -> None:
    host = ToolHost.discover()
    with pytest.raises(OntologyError) as info:
        load_ontology([_ticketing(tmp_path, "rust:issue_ticket")], registry=host.registry)
    [problem] = info.value.problems
    assert problem.node.endswith("#issue_ticket")
    assert "rust:issue_ticket is not registered" in problem.message
    assert "horismos.tools" in problem.message


def _horismos(*args: str, site: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [str(Path(sys.executable).with_name("horismos")), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_verify_accepts_an_installed_name_and_refuses_an_unknown_one(
    site: Path, tmp_path: Path
) -> None:
    known = _ticketing(tmp_path, "rust:issue_ticket")
    accepted = _horismos("verify", str(known), site=site, cwd=tmp_path)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr

    refused = _horismos("verify", str(known), site=None, cwd=tmp_path)
    assert refused.returncode == 1
    assert "rust:issue_ticket is not registered" in refused.stdout


def test_horismos_tools_lists_what_the_packages_offer(
    site: Path, module: str, tmp_path: Path
) -> None:
    done = _horismos("tools", "--json", site=site, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["registered"]
    assert listed == [
        {"name": "issue_ticket", "target": f"{module}.tickets:issue", "package": "acme-tools 1.4.0"}
    ]


def test_a_broken_entry_point_is_listed_and_a_binding_to_it_names_the_package(
    tmp_path: Path, module: str
) -> None:
    site = install(
        tmp_path / "site",
        "broken-tools",
        modules={f"{module}.tickets": TOOL_SOURCE},
        tools={
            "issue_ticket": f"{module}.missing:issue",
            "constant": f"{module}.tickets:NOT_A_FUNCTION",
        },
    )
    listing = _horismos("tools", site=site, cwd=tmp_path)
    assert listing.returncode == 1
    assert "constant" in listing.stderr and "is not callable" in listing.stderr
    assert "issue_ticket" in listing.stderr and "does not load" in listing.stderr

    verify = _horismos(
        "verify", str(_ticketing(tmp_path, "rust:issue_ticket")), site=site, cwd=tmp_path
    )
    assert verify.returncode == 1
    assert (
        f"comes from entry point issue_ticket = {module}.missing:issue of broken-tools 0.1.0"
        in (verify.stdout)
    )
    assert "ModuleNotFoundError" in verify.stdout


def test_two_packages_offering_one_name_register_neither(
    tmp_path: Path, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    for dist in ("first-tools", "second-tools"):
        install(
            site,
            dist,
            modules={f"{module}.tickets": TOOL_SOURCE},
            tools={"issue_ticket": f"{module}.tickets:issue"},
        )
    monkeypatch.syspath_prepend(str(site))
    host = ToolHost.discover()

    listed = host.status()["registered"]
    assert sorted(t["package"] for t in listed) == ["first-tools 0.1.0", "second-tools 0.1.0"]
    for tool in listed:
        other = "second-tools" if tool["package"].startswith("first") else "first-tools"
        assert "shares its name with" in tool["error"] and other in tool["error"]
    ontology = load_ontology([_ticketing(tmp_path, "rust:issue_ticket")], registry=host.registry)
    assert [iri for iri, _ in host.binding_problems(ontology)] == [
        ontology.namespace + "issue_ticket"
    ]


def test_the_server_lists_its_packaged_tools_in_readyz_and_runs_them(
    site: Path,
    module: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> None:
    monkeypatch.syspath_prepend(str(site))
    ontology = _ticketing(tmp_path, "python:issue_ticket")

    with make_app_client(ontology_paths=[ontology]) as client:
        ready = client.get("/readyz")
        run = client.post("/workflows/Ticket/runs", json=CASE)

    assert ready.status_code == 200, ready.text
    assert ready.json()["tools"]["registered"] == [
        {
            "name": "issue_ticket",
            "target": f"{module}.tickets:issue",
            "package": "acme-tools 1.4.0",
        }
    ]
    assert run.status_code == 200, run.text
    body: dict[str, Any] = run.json()
    assert body["terminal"].endswith("Done")
    assert body["decision"]["value"].endswith("Major")


def test_the_server_does_not_serve_a_binding_to_a_broken_package(
    tmp_path: Path,
    module: str,
    monkeypatch: pytest.MonkeyPatch,
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> None:
    site = install(
        tmp_path / "site",
        "broken-tools",
        modules={f"{module}.tickets": TOOL_SOURCE},
        tools={"issue_ticket": f"{module}.missing:issue"},
    )
    monkeypatch.syspath_prepend(str(site))
    ontology = _ticketing(tmp_path, "rust:issue_ticket")

    with make_app_client(ontology_paths=[ontology]) as client:
        ready = client.get("/readyz")
        run = client.post("/workflows/Ticket/runs", json=CASE)
    assert ready.status_code == 503
    [deployment] = ready.json()["deployments"]
    [problem] = deployment["problems"]
    assert deployment["status"] == "refused" and problem["node"].endswith("#issue_ticket")
    assert "broken-tools 0.1.0" in problem["message"] and "does not load" in problem["message"]
    assert run.status_code == 503 and run.json()["problems"] == [problem]
