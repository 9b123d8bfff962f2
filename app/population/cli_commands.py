"""``horismos population run`` and ``horismos population diff``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

Echo = Callable[[str], None]


def run(
    service_id: str,
    *,
    ndjson: Path,
    out: Path,
    at: str | None,
    master: str | None,
    ontology_paths: list[Path],
    echo: Echo,
    err: Echo,
) -> int:
    """Run the population; print its summary. Exit 1 for a service or input it refuses."""
    from app.ontology import default_ontology_paths
    from app.population.decide import ServiceRefused
    from app.population.spark import population_run

    if not ndjson.is_dir() or not any(ndjson.glob("*.ndjson")):
        err(f"{ndjson}: no *.ndjson files (a Bulk Data export folder is expected)")
        return 1
    try:
        when = datetime.fromisoformat(at) if at else datetime.now(UTC)
    except ValueError:
        err(f"--at {at!r} is not an ISO 8601 instant (2026-12-06T09:00:00+00:00)")
        return 1
    if when.tzinfo is None:
        err(f"--at {at!r} names no time zone: give one (Z or +01:00)")
        return 1
    try:
        summary = population_run(
            service_id,
            ndjson,
            out,
            ontology_paths=ontology_paths or default_ontology_paths(),
            at=when,
            master=master,
        )
    except ServiceRefused as exc:
        err(str(exc))
        return 1
    echo(json.dumps(summary, indent=2, sort_keys=True))
    return 0


def diff(first: Path, second: Path, *, master: str | None, echo: Echo, err: Echo) -> int:
    """Print the patients whose answer differs; exit 0 when none does, 1 when some do."""
    from app.population.spark import population_diff

    for folder in (first, second):
        if not (folder / "decisions").is_dir():
            err(f"{folder}: no decisions/ folder (the OUT of a population run is expected)")
            return 2
    found = population_diff(first, second, master=master)
    echo(json.dumps(found, indent=2, sort_keys=True, default=str))
    return 1 if found["changed"] else 0


def export(
    base: str,
    *,
    out: Path,
    group: str | None,
    types: str | None,
    client_id: str | None,
    key: Path | None,
    token_url: str | None,
    echo: Echo,
    err: Echo,
) -> int:
    """Run the export; print the manifest's outputs. Exit 1 when it fails, saying where."""
    from app.population.export import BackendClient, ExportFailed, bulk_export

    given = [v is not None for v in (client_id, key, token_url)]
    if any(given) and not all(given):
        err("SMART Backend Services needs --client-id, --key and --token-url together")
        return 1
    client = None
    if client_id and key and token_url:
        try:
            jwk = json.loads(key.read_text())
        except (OSError, ValueError) as exc:
            err(f"--key {key}: not a JWK file: {exc}")
            return 1
        client = BackendClient(client_id=client_id, key=jwk, token_url=token_url)
    try:
        manifest = bulk_export(
            base, out, group=group, types=types.split(",") if types else None, client=client
        )
    except ExportFailed as exc:
        err(str(exc))
        return 1
    echo(json.dumps({"output": manifest.get("output", []), "out": str(out)}, indent=2))
    return 0


def impact(
    change_id: str,
    *,
    actor: str,
    ndjson: Path,
    out: Path,
    at: str | None,
    master: str | None,
    echo: Echo,
    err: Echo,
) -> int:
    """Print the patients whose answer the change would change; exit 0 when none, 1 when
    some, 2 when it cannot be run."""
    from app.deployments.catalog import Catalog, ChangeUnbuildable
    from app.main import configured_deployments
    from app.population.impact import ImpactRefused, change_impact
    from app.settings import get_settings
    from app.store import make_engine
    from app.tools.host import ToolHost

    try:
        when = datetime.fromisoformat(at) if at else datetime.now(UTC)
    except ValueError:
        err(f"--at {at!r} is not an ISO 8601 instant")
        return 2
    settings = get_settings()
    tools = ToolHost.discover()
    engine = make_engine(settings.database_url)
    try:
        catalog = Catalog(configured_deployments(settings, tools), tools.packaged)
        catalog.refresh(engine)
        report = change_impact(
            change_id, ndjson, out, engine=engine, catalog=catalog, at=when, actor=actor,
            master=master,
        )  # fmt: skip
    except (ImpactRefused, ChangeUnbuildable) as exc:
        err(str(exc))
        return 2
    finally:
        engine.dispose()
    echo(json.dumps(report, indent=2, sort_keys=True, default=str))
    return 1 if any(s["changed"] for s in report["services"].values()) else 0
