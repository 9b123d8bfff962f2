"""Population runs on Spark: patients per second per core (not a test).

    .venv/bin/python bench/population.py [--sizes 1000,10000] [--live 200]

Builds N synthetic patients from the committed sample charts — the CDC guide's and our own
recommendation 12 examples (``opioidcds-12-patient-view``), rolled to today as the tests roll
them, each copied under new ids (every id of a copy gets its own prefix) — writes them as a
Bulk Data export (one NDJSON file per type) and runs ``population_run`` on it in local mode
with one and with two executor cores. Prints, per size and core count: the wall time, Spark's
start-up (a session started and stopped apart, reported on its own line, not counted), the
patients per second per core; then the live hook's one-call-at-a-time rate on the same charts
(the same service called over HTTP on loopback, sequentially, the service one uvicorn worker
storing each call on PostgreSQL as in production, or ``--backend sqlite``: what a hook call
costs); and the goal lines:

- per core at least 5× the live hook's one-call-at-a-time rate;
- two cores at least 1.7× one (the larger size).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.ontology import default_ontology_paths  # noqa: E402
from app.population.spark import _session, population_run  # noqa: E402
from bench.profile_hook import fresh_database  # noqa: E402
from tests.support.opioid_examples import (  # noqa: E402
    CASES_DIR,
    EXAMPLES_DIR,
    load_examples,
    prepare,
)

SERVICE = "opioidcds-12-patient-view"
PER_CORE_GOAL = 5.0
SCALING_GOAL = 1.7


def charts() -> list[list[dict[str, Any]]]:
    """The sample charts, one list of resources per patient, rolled to today."""
    today = datetime.now(UTC).date()
    out = []
    for example in [*load_examples(EXAMPLES_DIR), *load_examples(CASES_DIR)]:
        if example.service == SERVICE:
            out.append(prepare(example, today, tag="bench-").stored)
    return out


def copies(base: list[list[dict[str, Any]]], n: int) -> list[dict[str, Any]]:
    """``n`` patients: the charts in turn, every id of each copy prefixed anew."""
    resources: list[dict[str, Any]] = []
    for i in range(n):
        chart = base[i % len(base)]
        text = json.dumps(chart)
        prefix = f"p{i}-"
        for r in chart:
            text = text.replace(f'"{r["id"]}"', f'"{prefix}{r["id"]}"')
            text = text.replace(f'/{r["id"]}"', f'/{prefix}{r["id"]}"')
        resources.extend(json.loads(text))
    return resources


def export(resources: list[dict[str, Any]], folder: Path) -> None:
    by_type: dict[str, list[str]] = defaultdict(list)
    for r in resources:
        by_type[r["resourceType"]].append(json.dumps(r))
    folder.mkdir(parents=True)
    for kind, lines in by_type.items():
        (folder / f"{kind}.ndjson").write_text("\n".join(lines) + "\n")


def spark_startup(cores: int) -> float:
    started = time.perf_counter()
    spark = _session(f"local[{cores}]", "horismos bench start-up")
    spark.sparkContext.parallelize([1], 1).count()
    spark.stop()
    return time.perf_counter() - started


def population_rate(folder: Path, out: Path, cores: int, n: int) -> tuple[float, float]:
    """(wall seconds of the run less its own start-up, patients per second per core). The
    start-up subtracted is the run's own, timed inside it: its Spark session's start and its
    Python workers made ready (imports, the shipped deployment), paid once per run whatever
    the size; one measured apart could be longer (the first one in a process boots the JVM)
    and leave a negative time."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    summary = population_run(
        SERVICE,
        folder,
        out,
        ontology_paths=default_ontology_paths(),
        master=f"local[{cores}]",
        partitions=max(2, cores * 4),
        timings=timings,
    )
    wall = time.perf_counter() - started - timings["sessionStart"] - timings["workersReady"]
    print(
        f"{'':>6} start-up, apart: session {timings['sessionStart']:.1f} s · "
        f"{cores} worker(s) ready {timings['workersReady']:.1f} s"
    )
    assert summary["patients"] == n and not summary["errors"], summary
    return wall, n / wall / cores


def live_rate(base: list[list[dict[str, Any]]], calls: int, where: Path, backend: str) -> float:
    """Hook calls per second, one at a time, over HTTP to the service running as a process
    (uvicorn, one worker) storing each call on ``backend``: the live hook."""
    with fresh_database(backend) as url:
        return _live_rate(base, calls, where, url)


def _live_rate(base: list[list[dict[str, Any]]], calls: int, where: Path, url: str) -> float:
    import httpx

    from app.population.bulk import answer_template, patient_of
    from tests.support.live_server import launch

    by_patient: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in copies(base, calls + 10):
        pid = patient_of(r)
        if pid is not None:
            by_patient[pid].append(r)
    env = {
        "HORISMOS_DATABASE_URL": url,
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
    }
    server = launch(env, where / "live.log")
    try:
        with httpx.Client(base_url=server.base, timeout=30.0) as client:
            listed = client.get("/individual/cds-services").json()["services"]
            templates = next(s for s in listed if s["id"] == SERVICE)["prefetch"]
            bodies = [
                {
                    "hook": "patient-view",
                    "hookInstance": str(uuid.uuid4()),
                    "context": {"patientId": pid, "userId": "Practitioner/bench"},
                    "prefetch": {k: answer_template(q, pid, rs, {}) for k, q in templates.items()},
                }
                for pid, rs in by_patient.items()
            ]
            for body in bodies[:10]:  # warm-up
                client.post(f"/cds-services/{SERVICE}", json=body)
            started = time.perf_counter()
            for body in bodies[10:]:
                assert client.post(f"/cds-services/{SERVICE}", json=body).status_code == 200
            return (len(bodies) - 10) / (time.perf_counter() - started)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--live", type=int, default=200, help="live hook calls to time")
    parser.add_argument(
        "--backend",
        choices=("postgresql", "sqlite"),
        default="postgresql",
        help="the live hook's store (PostgreSQL, as in production, by default)",
    )
    args = parser.parse_args()
    logging.getLogger("py4j").setLevel(logging.ERROR)
    sizes = [int(s) for s in args.sizes.split(",")]
    base = charts()
    where = Path(tempfile.mkdtemp(prefix="horismos-population-bench-"))
    results: dict[str, Any] = {"charts": len(base), "runs": []}
    try:
        live = live_rate(base, args.live, where, args.backend)
        print(
            f"live hook, one call at a time (HTTP, one worker, stored on {args.backend}): "
            f"{live:.1f} calls/s"
        )
        for n in sizes:
            folder = where / f"export-{n}"
            export(copies(base, n), folder)
            for cores in (1, 2):
                wall, rate = population_rate(folder, where / f"out-{n}-{cores}", cores, n)
                print(
                    f"{n:>6} patients · {cores} core(s): {wall:6.1f} s after start-up · "
                    f"{rate:7.1f} patients/s per core"
                )
                results["runs"].append(
                    {"patients": n, "cores": cores, "seconds": wall, "perCore": rate}
                )
        startup = spark_startup(1)
        print(f"Spark start-up (local, one core), apart: {startup:.1f} s")
        largest = max(sizes)
        one, two = (
            next(r for r in results["runs"] if r["patients"] == largest and r["cores"] == c)
            for c in (1, 2)
        )
        per_core = min(r["perCore"] for r in results["runs"] if r["patients"] == largest)
        scaling = (two["perCore"] * 2) / one["perCore"]
        verdict_rate = "PASS" if per_core >= PER_CORE_GOAL * live else "FAIL"
        verdict_scale = "PASS" if scaling >= SCALING_GOAL else "FAIL"
        print(
            f"{verdict_rate}: per core {per_core:.1f} patients/s ≥ {PER_CORE_GOAL:g}× the live "
            f"hook's {live:.1f} calls/s ({per_core / live:.1f}×)"
        )
        print(
            f"{verdict_scale}: two cores {scaling:.2f}× one ≥ {SCALING_GOAL}× ({largest} patients)"
        )
        results.update(live=live, startup=startup, scaling=scaling)
        print(json.dumps(results))
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
