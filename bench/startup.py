"""What loading the deployments adds to the service's start (not a test).

    .venv/bin/python bench/startup.py [--rounds 3] [PATH ...]

The service loads, compiles and verifies every deployment before it answers (``app.main``:
``configured_deployments``). This measures that step in a fresh interpreter per round (nothing
cached from an earlier load), for the bundled deployments (or the Turtle files given), against
the two example deployments alone as the baseline. Times are the process's CPU time (what the
work costs; the wall time on a busy machine adds whatever else runs) and the wall time of the
whole load. It prints, per deployment, the CPU time to find, load and verify it (value sets and
imports included) and, per ``valuesets`` folder, the time to read its value sets once they are
cached; then the median of each configuration and the difference: what the extra deployments
add to the start.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys, time
from pathlib import Path
from app.deployments.registry import build_deployment
from app.ontology import default_ontology_paths
from app.ontology.deployments import find_deployments
from app.ontology.loader import vocabulary_path
from app.ontology.valuesets import folders_beside, load_value_sets
from app.tools.packaged import discover
paths = [Path(p) for p in json.loads(sys.argv[1])] or default_ontology_paths()
packaged = discover()
started = time.process_time()
wall = time.perf_counter()
timings = {}
status = {}
for source in find_deployments(paths, skip=vocabulary_path()):
    t = time.process_time()
    built = build_deployment(source, packaged)
    timings[source.id] = time.process_time() - t
    status[source.id] = built.status
total = time.process_time() - started
wall = time.perf_counter() - wall
folders = {}
for folder in folders_beside(paths):
    t = time.process_time()
    found, _ = load_value_sets([folder])
    folders[str(folder)] = (len(found), time.process_time() - t)
print(json.dumps({"total": total, "wall": wall, "deployments": timings, "status": status,
                  "valuesets": folders}))
"""


def probe(paths: list[str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(paths)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("paths", nargs="*", help="Turtle files (default: the bundled ones)")
    args = parser.parse_args()
    baseline = ["ontologies/triage.ttl", "ontologies/med-safety.ttl"]
    runs = {"baseline": [probe(baseline) for _ in range(args.rounds)]}
    runs["all"] = [probe(args.paths) for _ in range(args.rounds)]
    last = runs["all"][-1]
    deployments = last["deployments"]
    status = last["status"]
    assert isinstance(deployments, dict) and isinstance(status, dict)
    print(f"{'deployment':<32} {'CPU load+verify':>16}  status")
    for name, seconds in sorted(deployments.items()):
        print(f"{name:<32} {seconds * 1000:>13.0f} ms  {status[name]}")
    folders = last["valuesets"]
    assert isinstance(folders, dict)
    for folder, (count, seconds) in folders.items():
        print(f"value sets {folder}: {count}, read again (cached) in {seconds * 1000:.0f} ms")

    def median(name: str, key: str) -> float:
        return statistics.median(float(str(r[key])) for r in runs[name])

    cpu, base = median("all", "total"), median("baseline", "total")
    print(
        f"deployments loaded and verified: {cpu:.2f} s CPU ({median('all', 'wall'):.2f} s wall) "
        f"for {len(deployments)} deployment(s), {base:.2f} s CPU "
        f"({median('baseline', 'wall'):.2f} s wall) for the two examples alone: "
        f"+{cpu - base:.2f} s CPU at start (median of {args.rounds} fresh interpreters)"
    )


if __name__ == "__main__":
    main()
