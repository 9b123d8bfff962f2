"""The service's start-up state, and a population worker's, is left out of the garbage
collector's full passes.

A full collection visits every tracked object; on the loaded service that is hundreds of
thousands of them, and the call whose allocations trigger it (and every call in flight beside
it) waits. Each case starts a fresh interpreter, as a worker would be, so that no earlier test's
freeze hides the one under test. A frozen object is still tracked but no longer among the
objects the collector visits (``gc.get_objects()``).
"""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

from app.fhir.systems import installed_terminology
from app.ontology import default_ontology_paths
from app.population.spark import _deployments

ROOT = Path(__file__).resolve().parents[2]

#: what the probes report of the structures a call uses: whether each is out of full passes
_FROZEN = """
def frozen(*objects):
    visited = {id(o) for o in gc.get_objects()}
    return all(gc.is_tracked(o) and id(o) not in visited for o in objects)

def structures(ontology):
    from app.fhir_validate import _SHAPES
    from app.world.world import ontology_index
    return [ontology, ontology_index(ontology), _SHAPES["Observation"].fields]
"""


def _probe(code: str, *args: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (no earlier freeze) and read the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-c", "import gc, json, sys\n" + _FROZEN + code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


_SERVICE = """
from fastapi.testclient import TestClient
from app.main import create_app
from app.settings import Settings

app = create_app(Settings(database_url=sys.argv[1]))
with TestClient(app) as client:
    ok = client.get("/readyz").status_code
    deployment = app.state.container.running.hooks.deps.catalog.current().find("triage")
    loaded = frozen(*structures(deployment.ontology))
    # a hook call's own garbage is still collected: a cycle made now is freed by a collection
    class Node: pass
    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    freed = gc.collect()
print(json.dumps({"ready": ok, "loaded": loaded, "freed": freed}))
"""


def test_a_started_service_has_its_loaded_state_frozen(
    sqlite_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    seen = _probe(_SERVICE, f"sqlite:///{database}")
    assert seen["ready"] == 200
    # the deployment, its rule index and the R4 shapes it validates with
    assert seen["loaded"] is True
    assert isinstance(seen["freed"], int) and seen["freed"] >= 2  # the cycle made after


_WORKER = """
import pickle
from app.fhir_validate import _SHAPES
from app.population.spark import _ready

service = "opioidcds-12-patient-view"
with open(sys.argv[1], "rb") as f:
    compiled = pickle.load(f)  # as a Spark worker receives it: no per-process cache comes along
shipped_bare = "Observation" not in _SHAPES
_ready(compiled, service, "2026-12-01T12:00:00+00:00")  # what each worker does first
ontology = compiled[0].for_service(service).ontology
print(json.dumps({"shipped_bare": shipped_bare, "loaded": frozen(*structures(ontology))}))
"""


def test_a_population_worker_has_its_shipped_deployment_frozen(tmp_path: Path) -> None:
    paths = tuple(str(p) for p in default_ontology_paths())
    shipped = tmp_path / "compiled.pickle"
    compiled = (_deployments(paths, "opioidcds-12-patient-view"), installed_terminology())
    shipped.write_bytes(pickle.dumps(compiled))
    seen = _probe(_WORKER, str(shipped))
    assert seen["shipped_bare"] is True  # the worker builds its shapes and index itself
    # ... and they are settled with the deployment before its first patient
    assert seen["loaded"] is True
