"""The service's start-up state, and a population worker's, is left out of the garbage
collector's full passes.

A full collection visits every tracked object; on the loaded service that is hundreds of
thousands of them, and the call whose allocations trigger it (and every call in flight beside
it) waits. A fresh process is started here, as a worker would be, so that no earlier test's
freeze hides the service's own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _probe(code: str, *args: str) -> dict[str, int]:
    """Run ``code`` in a fresh interpreter (no earlier freeze) and read the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


_PROBE = """
import gc, json, sys
from fastapi.testclient import TestClient
from app.main import create_app
from app.settings import Settings

before = gc.get_freeze_count()
with TestClient(create_app(Settings(database_url=sys.argv[1]))) as client:
    ok = client.get("/readyz").status_code
    frozen = gc.get_freeze_count()
    # a hook call's own garbage is still collected: a cycle made now is freed by a collection
    class Node: pass
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    freed = gc.collect()
print(json.dumps({"before": before, "frozen": frozen, "ready": ok, "freed": freed}))
"""


def test_a_started_service_has_its_loaded_state_frozen(
    sqlite_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    seen = _probe(_PROBE, f"sqlite:///{database}")
    assert seen["ready"] == 200
    assert seen["before"] == 0
    # the deployments, their rules and shapes: far more than the interpreter's own start
    assert seen["frozen"] > 100_000
    assert seen["freed"] >= 2  # the two nodes of the cycle made after the start


_WORKER = """
import gc, json
from app.fhir.systems import installed_terminology
from app.ontology import default_ontology_paths
from app.population.spark import _deployments, _ready

service = "opioidcds-12-patient-view"
paths = tuple(str(p) for p in default_ontology_paths())
compiled = (_deployments(paths, service), installed_terminology())
before = gc.get_freeze_count()
_ready(compiled, service, "2026-12-01T12:00:00+00:00")  # what each Spark worker does first
print(json.dumps({"before": before, "frozen": gc.get_freeze_count()}))
"""


def test_a_population_worker_has_its_shipped_deployment_frozen() -> None:
    seen = _probe(_WORKER)
    assert seen["before"] == 0
    assert seen["frozen"] > 100_000  # the deployment a worker decides every patient on
