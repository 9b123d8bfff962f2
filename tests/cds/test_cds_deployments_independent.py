"""Deployments are loaded, verified and served each on its own: one that does not verify is not
served (absent from discovery, 503 with its verification report, named by /readyz) while the
others answer; every run records its deployment's IRI, version and digest (both backends)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from app.store import Run, session_scope

ROOT = Path(__file__).resolve().parents[2]
OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _request(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((ROOT / "examples" / name).read_text())
    body["hookInstance"] = str(uuid.uuid4())
    return body


def _three_deployments(folder: Path) -> list[Path]:
    """Triage and med-safety as bundled, and a third deployment whose workflow step lacks its
    failure edge (it loads, and does not verify)."""
    triage = shutil.copy(ROOT / "ontologies/triage.ttl", folder / "triage.ttl")
    med = shutil.copy(ROOT / "ontologies/med-safety.ttl", folder / "med-safety.ttl")
    shutil.copytree(ROOT / "ontologies/valuesets", folder / "valuesets")  # its drug products
    broken = folder / "hook-wait.ttl"
    text = (ROOT / "tests/data/runtime/hook_wait.ttl").read_text()
    assert "horis:onUnreachable :Nothing ; " in text
    broken.write_text(text.replace("horis:onUnreachable :Nothing ; ", ""))
    return [Path(triage), Path(med), broken]


def test_one_broken_deployment_does_not_stop_the_others(
    make_app_client: OpenClient, engine: Engine, tmp_path: Path
) -> None:
    with make_app_client(ontology_paths=_three_deployments(tmp_path)) as client:
        discovery = client.get("/cds-services").json()
        ready = client.get("/readyz")
        triage = client.post(
            "/cds-services/horismos-triage", json=_request("triage-encounter-start.json")
        )
        med = client.post(
            "/cds-services/horismos-med-safety", json=_request("med-safety-order-sign.json")
        )
        broken = client.post("/cds-services/hook-wait", json=_request("med-safety-order-sign.json"))

    assert sorted(s["id"] for s in discovery["services"]) == [
        "horismos-med-safety",
        "horismos-med-safety-order-select",
        "horismos-triage",
    ]
    assert ready.status_code == 200  # two of three deployments serve
    by_id = {d["id"]: d for d in ready.json()["deployments"]}
    assert {k: d["status"] for k, d in by_id.items()} == {
        "hookwait": "refused",
        "med-safety": "serving",
        "triage": "serving",
    }
    [problem] = by_id["hookwait"]["problems"]
    assert problem["node"] == "https://example.org/hookwait#Decide"
    assert "onUnreachable" in problem["message"]
    assert by_id["hookwait"]["services"] == ["hook-wait"]

    assert triage.status_code == 200 and triage.json()["cards"]
    assert med.status_code == 200 and med.json()["cards"]
    assert broken.status_code == 503
    issues = broken.json()["issue"]
    assert any("onUnreachable" in i["diagnostics"] for i in issues)
    assert all("hookwait" in i["diagnostics"] for i in issues)

    runs = {
        r["extension"]["dev.horismos.run"]["runId"]: name
        for name, r in (("triage", triage.json()), ("med-safety", med.json()))
    }
    with session_scope(engine) as session:
        rows = session.execute(
            select(Run.id, Run.deployment, Run.deployment_version, Run.ontology_digest)
        ).all()
    recorded = {runs[i]: (iri, version, digest) for i, iri, version, digest in rows}
    assert recorded == {
        name: (by_id[name]["iri"], by_id[name]["version"], by_id[name]["digest"])
        for name in ("triage", "med-safety")
    }


def test_horismos_deployments_lists_them_and_exits_one_for_a_refused_one(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    paths = ",".join(str(p) for p in _three_deployments(tmp_path))
    cli = Path(sys.executable).parent / "horismos"
    done = subprocess.run(
        [str(cli), "deployments", "--json"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "HORISMOS_ONTOLOGY_PATHS": paths,
            "HORISMOS_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}",
        },
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    listed = {d["id"]: d for d in json.loads(done.stdout)["deployments"]}
    assert {k: (d["version"], d["status"], d["services"]) for k, d in listed.items()} == {
        "hookwait": ("0.1.0", "refused", ["hook-wait"]),
        "med-safety": (
            "1.7.0",
            "serving",
            ["horismos-med-safety", "horismos-med-safety-order-select"],
        ),
        "triage": ("1.5.0", "serving", ["horismos-triage"]),
    }
    assert "hookwait: not served" in done.stderr and "onUnreachable" in done.stderr
