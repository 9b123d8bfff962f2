"""A mutant verification refuses is never served at all: its deployment is refused (its services
are absent from discovery and answer 503), so it can never answer 200 with no card."""

from __future__ import annotations

from pathlib import Path

from app.main import configured_deployments
from app.settings import Settings
from app.tools.host import ToolHost
from tests.mutation.mutants import affected, all_mutants, write_mutant


def test_a_refused_mutant_is_not_served(tmp_path: Path) -> None:
    every = all_mutants()
    tools = ToolHost.discover()
    for i, mutant in enumerate(every[:: max(1, len(every) // 8)]):
        folder = tmp_path / str(i)
        folder.mkdir()
        path = write_mutant(mutant, folder)
        sources = affected(path)
        files = sorted({p for source in sources for p in source.paths})
        deployments = configured_deployments(Settings(ontology_paths=files), tools)
        refused = [d for d in deployments if d.id in {s.id for s in sources} and not d.serving]
        assert refused, mutant.id
        for deployment in refused:
            assert not set(deployment.services) & {s.id for s, _ in deployments.services()}
            report = " ".join(str(p) for p in deployment.problems)
            assert mutant.owner.rsplit("#", 1)[-1] in report, mutant.id
