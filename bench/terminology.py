"""What the terminology port costs a hook call, in CPU of the service's process (not a test).

    .venv/bin/python bench/terminology.py [--calls 200] [--rounds 3]

One order-sign call of the test deployment whose diagnosis class is a pinned value set
(tests/data/terminology), in-process on SQLite, five ways:

- **lists only**: the diagnosis is in the value set's expansion, the drug an ingredient the lists
  name: the port is never asked (every call of the bundled deployments whose codes are listed);
- **embedded, warm / cold**: a SNOMED CT diagnosis the lists do not settle, so hydration asks the
  embedded port (``$validate-code`` against the deployment's own file); warm repeats one code (the
  answer is cached by value-set version), cold sends a code never asked before on every call;
- **HTTP, warm / cold**: the same against ``horismos terminology serve`` on loopback
  (``HORISMOS_TERMINOLOGY_URL``); cold pays one request per call. The server's own CPU is
  another process's and is not counted.

Prints CPU ms per call, the least of ``--rounds`` alternating rounds (``time.process_time``;
client and service share the process, so compare the lines with each other, not with
``bench/hooks.py``), each port line's cost over its own "lists only", and how often per call the
port was asked and answered afresh; the goal is a warm cache adding less than 0.3 ms.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.migrate import upgrade  # noqa: E402
from app.terminology.port import CachedTerminology  # noqa: E402
from tests.cds import clinical as fx  # noqa: E402
from tests.terminology import fixture as tx  # noqa: E402
from tests.terminology.served import served_terminology  # noqa: E402

SERVICE = "/cds-services/terminology-check"
WARM_GOAL_MS = 0.3


def _call(diagnosis: str) -> dict[str, Any]:
    pid = fx.new_id()
    condition = fx.condition(pid, diagnosis)
    condition["code"]["coding"][0]["system"] = tx.SNOMED
    return fx.order_sign(
        pid,
        [fx.draft_order(pid, tx.IBUPROFEN)],
        fhir_server=None,
        prefetch={"conditions": fx.searchset([condition])},
    )


#: how often the port was asked, and how often it had no answer kept (counted by _counting)
ASKED = {"asked": 0, "missed": 0}


def _counting() -> None:
    """Count the port's questions and cache misses, so each line says what it measured."""
    original = CachedTerminology._cached

    def counted(self: CachedTerminology, key: Any, ask: Callable[[], Any]) -> Any:
        ASKED["asked"] += 1

        def missed() -> Any:
            ASKED["missed"] += 1
            return ask()

        return original(self, key, missed)

    CachedTerminology._cached = counted  # type: ignore[method-assign]


def _cpu_ms(
    client: TestClient, codes: Callable[[], str], calls: int, warmup: int
) -> tuple[float, float, float]:
    """CPU ms per call, and per call how often the port was asked and answered afresh."""
    for _ in range(warmup):
        assert client.post(SERVICE, json=_call(codes())).status_code == 200
    bodies = [_call(codes()) for _ in range(calls)]
    ASKED.update(asked=0, missed=0)
    start = time.process_time()
    for body in bodies:
        answer = client.post(SERVICE, json=body)
        assert answer.status_code == 200, answer.text
    cpu = (time.process_time() - start) * 1000 / calls
    return cpu, ASKED["asked"] / calls, ASKED["missed"] / calls


def _measure(
    client: TestClient, calls: int, warmup: int, rounds: int
) -> dict[str, tuple[float, float, float]]:
    """Each case in ``rounds`` alternating rounds; the least CPU of its rounds (the one least
    disturbed by other work on the machine)."""
    fresh = (str(90000000 + n) for n in itertools.count(1))  # never asked before
    cases: dict[str, Callable[[], str]] = {
        "lists only": lambda: tx.CURRENT,
        "warm": lambda: "90000000",
        "cold": lambda: next(fresh),
    }
    found: dict[str, list[tuple[float, float, float]]] = {case: [] for case in cases}
    for _ in range(rounds):
        for case, codes in cases.items():
            found[case].append(_cpu_ms(client, codes, calls, warmup))
    return {case: min(runs) for case, runs in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _counting()
    with tempfile.TemporaryDirectory() as folder:
        results: dict[str, dict[str, tuple[float, float, float]]] = {}
        for name, url in (("embedded", None), ("HTTP", "serve")):
            db = Path(folder) / f"{name}.db"
            upgrade(f"sqlite:///{db}")
            settings: dict[str, Any] = {
                "database_url": f"sqlite:///{db}",
                "ontology_paths": [tx.DEPLOYMENT],
            }
            if url is None:
                with TestClient(create_app(Settings(**settings))) as client:
                    results[name] = _measure(client, args.calls, args.warmup, args.rounds)
            else:
                with (
                    served_terminology(tx.DEPLOYMENT) as base,
                    TestClient(create_app(Settings(**settings, terminology_url=base))) as c,
                ):
                    results[name] = _measure(c, args.calls, args.warmup, args.rounds)
    print(f"CPU ms per hook call, {args.calls} calls each, in-process (SQLite)")
    print(f"  {'':24} {'CPU ms':>7} {'vs lists':>9} {'asked/call':>11} {'fresh/call':>11}")
    warm: dict[str, float] = {}
    for name in ("embedded", "HTTP"):
        base = results[name]["lists only"][0]
        for case in ("lists only", "warm", "cold"):
            ms, asked, missed = results[name][case]
            line = f"{ms:7.2f} {ms - base:+9.2f} {asked:11.1f} {missed:11.1f}"
            print(f"  {name + ', ' + case:24} {line}")
        warm[name] = round(results[name]["warm"][0] - base, 3)
    verdict = "PASS" if max(warm.values()) < WARM_GOAL_MS else "FAIL"
    print(f"{verdict}  a warm cache adds < {WARM_GOAL_MS} ms CPU per hook: " + json.dumps(warm))


if __name__ == "__main__":
    main()
