"""What a proposed change would do to a population: ``horismos change impact CHANGE_ID``.

Change control replays a change on stored runs — the patients who happened to trigger a hook.
This answers for every patient of a Bulk Data export: each patient-view service of the
deployment the change is for is run on the export twice (``population_run``), under the version
served now and under the change's candidate version (both written from the change store's
material: what would be activated, not what is on disk), and the patients whose decision,
terminal step or cards differ are listed with both answers and both proofs
(``population_diff``). Nothing is stored in the run store or written to an EHR; the change gets
an ``impact`` event (the patients, up to 200 per service, and where the full report is), which
its page shows beside the stored-run replay.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from app.deployments.catalog import Catalog
from app.deployments.material import Material, write
from app.population.decide import POPULATION_HOOKS
from app.population.spark import population_diff, population_run
from app.store import changes as change_store
from app.store import session_scope

#: the most patients the change's event (and page) names per service; the report has them all
_LISTED = 200


class ImpactRefused(ValueError):
    """A change whose impact cannot be run, and why."""


def _paths(material: Material, folder: Path) -> list[Path]:
    root = write(material, folder)
    return [root / p for p in (*material.own, *material.imports)]


def change_impact(
    change_id: str,
    ndjson: Path,
    out: Path,
    *,
    engine: Engine,
    catalog: Catalog,
    at: datetime,
    actor: str,
    master: str | None = None,
) -> dict[str, Any]:
    """Run the change's deployment's population services on ``ndjson`` before and after the
    change; write ``OUT/impact.json`` (and each run under ``OUT/<service>/``) and return it."""
    with session_scope(engine) as session:
        change = change_store.get_change(session, change_id)
        if change is None:
            raise ImpactRefused(f"no change {change_id}")
        served = catalog.current().find(change.deployment)
        if served is None:
            raise ImpactRefused(f"deployment {change.deployment} is not loaded")
        active = catalog.active_material(session, served)
        candidate = catalog.material(session, change)
        version = catalog.version(session, change_id)
    services = sorted(
        s.id
        for s in (version.ontology.services.values() if version.ontology else ())
        if s.hook in POPULATION_HOOKS and s.id in version.services
    )
    if not services:
        raise ImpactRefused(
            f"deployment {change.deployment} serves no {', '.join(POPULATION_HOOKS)} service: "
            "a population run builds those calls only"
        )
    report: dict[str, Any] = {
        "change": change_id,
        "deployment": change.deployment,
        "activeVersion": served.version,
        "candidateVersion": version.version,
        "at": at.isoformat(),
        "services": {},
    }
    with tempfile.TemporaryDirectory(prefix="horismos-impact-") as tmp:
        before = _paths(active, Path(tmp) / "active")
        after = _paths(candidate, Path(tmp) / "candidate")
        for sid in services:
            runs = {}
            for name, paths in (("active", before), ("candidate", after)):
                runs[name] = out / sid / name
                population_run(sid, ndjson, runs[name], ontology_paths=paths, at=at, master=master)
            report["services"][sid] = population_diff(
                runs["active"], runs["candidate"], master=master
            )
    out.mkdir(parents=True, exist_ok=True)
    path = out / "impact.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True, default=str))
    with session_scope(engine) as session:  # the change page shows it beside the replay
        change_store.add_event(
            session,
            change_id,
            "impact",
            actor,
            {
                "export": str(ndjson),
                "at": report["at"],
                "report": str(path),
                "services": {
                    sid: {
                        "compared": found["compared"],
                        "changed": [c["patient"] for c in found["changed"]][:_LISTED],
                    }
                    for sid, found in report["services"].items()
                },
            },
        )
    return report


__all__ = ["ImpactRefused", "change_impact"]
