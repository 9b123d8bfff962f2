"""The database down or hung, as an orchestrator and an EHR see the service: a real uvicorn
process on loopback whose PostgreSQL is a closed port or a black hole (a listener that accepts
connections and never answers). Nothing may hang: every answer comes within its deadline."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cds import clinical as fx
from tests.support.live_server import free_port, live_server
from tests.support.rogue_http import black_hole

TRIAGE = "/cds-services/horismos-triage"


def triage_body() -> dict[str, Any]:
    pid, eid = fx.new_id(), fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset([]),
            "conditions": fx.searchset([]),
        },
    )


def _env(database_url: str) -> dict[str, str]:
    return {
        "HORISMOS_DATABASE_URL": database_url,
        "HORISMOS_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
    }


async def _readyz_storm(base: str, n: int) -> tuple[list[httpx.Response], float, list[float]]:
    """``n`` concurrent /readyz, and /healthz asked while they are in flight."""
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(5.0)) as client:
        started = time.monotonic()
        storm = [asyncio.create_task(client.get("/readyz")) for _ in range(n)]
        health_times: list[float] = []
        for _ in range(3):
            t = time.monotonic()
            # blocked behind the stuck probes this would wait out the driver's 130 s
            health = await client.get("/healthz", timeout=5.0)
            assert health.status_code == 200
            health_times.append(time.monotonic() - t)
        answers = await asyncio.gather(*storm)
        return list(answers), time.monotonic() - started, health_times


def test_a_black_holed_database_hangs_neither_readyz_nor_healthz_nor_hook_calls(
    tmp_path: Path,
) -> None:
    with (
        black_hole() as hole,
        live_server(
            _env(f"postgresql://horismos@127.0.0.1:{hole.port}/horismos"), tmp_path / "server.log"
        ) as server,
    ):
        answers, elapsed, health = asyncio.run(_readyz_storm(server.base, 45))
        assert hole.connections >= 1  # the probe did reach the black hole
        assert [a.status_code for a in answers] == [503] * 45
        assert all(a.json()["database"].startswith("unreachable") for a in answers)
        # each within the 2 s budget (with slack for a loaded machine), not the driver's 130 s
        assert elapsed < 5.0, elapsed
        assert max(health) < 5.0, health
        with httpx.Client(base_url=server.base, timeout=15.0) as client:
            hook = client.post(TRIAGE, json=triage_body())
            assert hook.status_code == 503, hook.text
            assert hook.json()["resourceType"] == "OperationOutcome"
            assert hook.headers["retry-after"]


def test_a_database_that_is_down_is_a_prompt_503_everywhere_but_healthz(tmp_path: Path) -> None:
    down = f"postgresql://horismos@127.0.0.1:{free_port()}/horismos"
    with (
        live_server(_env(down), tmp_path / "server.log") as server,
        httpx.Client(base_url=server.base, timeout=5.0) as client,
    ):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 503
        for resp in (
            client.post(TRIAGE, json=triage_body()),
            client.get("/runs/00000000-0000-4000-8000-000000000000"),
        ):
            assert resp.status_code == 503, resp.text
            assert resp.headers["retry-after"]


@pytest.mark.parametrize("budget", [0.2])
def test_readyz_answers_within_its_budget_while_a_probe_is_stuck(budget: float) -> None:
    """One probe at a time: callers arriving while it hangs share it and get their answer when
    the budget runs out (unit test of the probe, no server)."""
    import threading

    from app.readiness import DatabaseProbe

    release = threading.Event()
    calls: list[int] = []

    class StuckEngine:
        def connect(self) -> Any:
            calls.append(1)
            release.wait(10)
            raise RuntimeError("gone")

    probe = DatabaseProbe(StuckEngine(), budget=budget)  # type: ignore[arg-type]

    async def many() -> list[str]:
        return list(await asyncio.gather(*(probe.state() for _ in range(20))))

    try:
        started = time.monotonic()
        states = asyncio.run(many())
        assert time.monotonic() - started < 2.0
        assert states == [f"unreachable: no answer within {budget:g} s"] * 20
        assert calls == [1]  # one thread on the stuck database, not twenty
    finally:
        release.set()
        probe.close()
