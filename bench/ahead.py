"""What answering order-sign ahead saves the order-sign call, in-process (not a test).

    .venv/bin/python bench/ahead.py [--backend postgresql|sqlite] [--calls 200]
        [--service ID=REQUEST.json]

Builds the app in-process on a fresh database (as ``bench/profile_hook.py`` does) and sends an
order-sign service's request (recommendation 8's bench request by default) through the ASGI app,
one call at a time, a fresh hookInstance each, timing every call with the process's CPU clock
(the database server's own CPU is not in it):

- **computed**: nothing is computed ahead (``HORISMOS_ANSWER_AHEAD_SECONDS=0``): every call runs;
- **looked up, none found**: answering ahead is on, but each call's resource ids are fresh, so
  no run computed ahead has its key: the cost the lookup adds to a call that computes;
- **computed ahead**: the cost of the run computed at order-select (once per service there);
- **answered from the run computed ahead**: the same request as that run, so each call reuses it.

Prints CPU ms per call for each, and a JSON line with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.hooks_requests import PLACEHOLDER, UNIQUE, template_of  # noqa: E402
from bench.profile_hook import fresh_database  # noqa: E402

DEFAULT = ("opioidcds-08", ROOT / "bench" / "data" / "opioidcds-08-two-active-opioids.json")
EXT = "dev.horismos.run"


async def drive(url: str, calls: int, sid: str, request: dict[str, Any]) -> dict[str, float]:
    import httpx

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url=url))
    template = template_of(request)
    same = secrets.token_hex(4)

    def body(*, fresh_ids: bool) -> str:
        text = template.replace(PLACEHOLDER, str(uuid.uuid4()))
        return text.replace(UNIQUE, secrets.token_hex(4) if fresh_ids else same)

    figures: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        service = app.state.container.running.hooks
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def timed(label: str, *, fresh_ids: bool, reused: bool) -> None:
                spent = 0.0
                for i in range(calls + calls // 10):
                    content = body(fresh_ids=fresh_ids).encode()
                    start = time.process_time()
                    resp = await client.post(
                        f"/cds-services/{sid}",
                        content=content,
                        headers={"content-type": "application/json"},
                    )
                    took = time.process_time() - start
                    if resp.status_code != 200:
                        raise RuntimeError(f"{sid} answered {resp.status_code}: {resp.text[:300]}")
                    if ("reusedRun" in resp.json()["extension"][EXT]) != reused:
                        raise RuntimeError(f"{label}: the call was not answered as expected")
                    if i >= calls // 10:  # after a warm-up
                        spent += took
                figures[label] = spent / calls * 1000

            window = service.deps.answer_ahead_seconds or 300.0
            service.deps.answer_ahead_seconds = 0.0
            await timed("computed", fresh_ids=False, reused=False)
            service.deps.answer_ahead_seconds = window
            await timed("looked up, none found", fresh_ids=True, reused=False)
            # what the order-select call sets off for this service, once (in the background)
            ahead = json.loads(body(fresh_ids=False))
            start = time.process_time()
            await service._call(sid, ahead, None, "http://bench", "http://bench", ahead=True)
            figures["computed ahead (at order-select)"] = (time.process_time() - start) * 1000
            await timed("answered from the run computed ahead", fresh_ids=False, reused=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--service", metavar="ID=FILE", help="an order-sign service's request")
    args = parser.parse_args()
    sid, path = DEFAULT
    if args.service:
        sid, _, raw = args.service.partition("=")
        path = Path(raw)
    request = json.loads(Path(path).read_text(encoding="utf-8"))
    logging.disable(logging.WARNING)
    with fresh_database(args.backend) as url:
        figures = asyncio.run(drive(url, args.calls, sid, request))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.backend} · {sid} · {args.calls} sequential calls each · load average {load}")
    print(f"{'the order-sign call':<42}{'CPU ms/call':>12}")
    for label, ms in figures.items():
        print(f"{label:<42}{ms:>12.2f}")
    base = figures["computed"]
    reused = figures["answered from the run computed ahead"]
    print(f"answered ahead: {reused / base:.0%} of the computed call's CPU")
    print(json.dumps({k: round(v, 3) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
