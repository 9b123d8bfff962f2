"""How a hook call's CPU grows with the data it is sent, in-process (not a test).

    .venv/bin/python bench/scaling.py [--backend postgresql|sqlite] [--calls 60]
        [--sizes 6,60,600]

The triage request of ``bench/hooks.py`` with its vitals search holding 6, 60 and 600
Observations (the six of the bench request, and older readings of the same vital signs taken
earlier the same hour, so the decision is the same at every size), sent through the ASGI app as
``bench/profile_hook.py`` sends it: one call at a time, a fresh hookInstance and fresh resource
ids each, CPU time of the process per call. Prints the CPU per call at each size, the main
stages, the cost per added Observation between consecutive sizes (the slope: a cost linear in
the data has the same slope throughout) and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import json
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.hooks_requests import TAKEN, observation, triage_request  # noqa: E402
from bench.profile_hook import PARTS, Clock, drive, fresh_database, instrument  # noqa: E402

#: the goal line: CPU per Observation added to the request, from the smallest size to the largest
SLOPE_GOAL_MS = 0.03

#: the stages printed per size (labels of ``bench/profile_hook.py``)
STAGES = (
    "gather: prefetch R4 validation",
    "  hydration",
    "  run: workflow (rules, steps, tools)",
    "  store the run (one statement on PostgreSQL)",
)
# a stage the profiler no longer times would print as 0.00: say so instead
_UNKNOWN = sorted(set(STAGES) - {label for label, _module, _attr in PARTS})
if _UNKNOWN:
    raise SystemExit(f"bench/profile_hook.py times no stage labelled {_UNKNOWN}")
#: older readings added: (LOINC, value, unit), cycled
_OLDER = (
    ("8867-4", 98, "/min"),
    ("9279-1", 18, "/min"),
    ("59408-5", 97, "%"),
    ("8310-5", 98.9, "[degF]"),
)


def request_with(size: int) -> dict[str, Any]:
    """The triage request with ``size`` Observations in its vitals search."""
    request = copy.deepcopy(triage_request())
    entries = request["prefetch"]["vitals"]["entry"]
    pid = request["context"]["patientId"]
    for n in range(size - len(entries)):
        code, value, unit = _OLDER[n % len(_OLDER)]
        older = observation(pid, code, value, unit, 0, 100 + n)
        # earlier than every reading of the bench request (taken from TAKEN on), same hour
        at = TAKEN - timedelta(seconds=1 + n * 5 % 3000)
        older["effectiveDateTime"] = at.isoformat(timespec="seconds")
        entries.append({"resource": older})
    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--sizes", default="6,60,600")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    logging.disable(logging.WARNING)
    clock = Clock()
    instrument(clock)
    whole = PARTS[0][0]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        with fresh_database(args.backend) as url:
            calls, last = asyncio.run(
                drive(url, args.calls, 5, clock, ("horismos-triage", request_with(size)))
            )
        run = last["extension"]["dev.horismos.run"]
        row = {"observations": size, "terminal": run["terminal"]}
        row["cpu_ms"] = clock.total.get(whole, 0.0) / calls * 1000
        for stage in STAGES:
            row[stage.strip()] = clock.total.get(stage, 0.0) / calls * 1000
        rows.append(row)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.backend} · {args.calls} sequential calls per size · load average {load}")
    header = f"{'Observations':>12}{'CPU ms/call':>13}" + "".join(
        f"{s.strip()[:22]:>24}" for s in STAGES
    )
    print(header + f"{'terminal':>12}")
    for row in rows:
        cells = "".join(f"{row[s.strip()]:>24.2f}" for s in STAGES)
        print(f"{row['observations']:>12}{row['cpu_ms']:>13.2f}{cells}{row['terminal']:>12}")
    slopes = []
    for before, after in itertools.pairwise(rows):
        added = after["observations"] - before["observations"]
        slope = (after["cpu_ms"] - before["cpu_ms"]) / added
        slopes.append(round(slope, 4))
        print(
            f"{before['observations']} → {after['observations']}: "
            f"{slope:.3f} ms per added Observation"
        )
    first, last = rows[0], rows[-1]
    overall = (last["cpu_ms"] - first["cpu_ms"]) / (last["observations"] - first["observations"])
    met = overall <= SLOPE_GOAL_MS
    print(
        f"{'PASS' if met else 'FAIL'}  {overall:.3f} ms per added Observation from "
        f"{first['observations']} to {last['observations']} <= {SLOPE_GOAL_MS:g} ms"
    )
    print(json.dumps({"sizes": rows, "ms_per_observation": slopes, "overall": round(overall, 4)}))


if __name__ == "__main__":
    main()
