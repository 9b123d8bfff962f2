"""A mutant verification refuses is never served at all: its deployment is refused (its services
are absent from discovery and answer 503), so it can never answer 200 with no card."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.main import configured_deployments
from app.settings import Settings
from app.tools.host import ToolHost
from tests.mutation.mutants import Mutant, all_mutants


def _write(mutant: Mutant, folder: Path) -> Path:
    valuesets = mutant.deployment.parent / "valuesets"
    if valuesets.is_dir():
        shutil.copytree(valuesets, folder / "valuesets")
    path = folder / mutant.deployment.name
    path.write_text(mutant.text, encoding="utf-8")
    return path


def test_a_refused_mutant_is_not_served(tmp_path: Path) -> None:
    every = all_mutants()
    tools = ToolHost.discover()
    for i, mutant in enumerate(every[:: max(1, len(every) // 8)]):
        folder = tmp_path / str(i)
        folder.mkdir()
        settings = Settings(ontology_paths=[_write(mutant, folder)])
        deployments = configured_deployments(settings, tools)
        (deployment,) = list(deployments)
        assert not deployment.serving and deployments.services() == [], mutant.id
        report = " ".join(str(p) for p in deployment.problems)
        assert mutant.owner.rsplit("#", 1)[-1] in report, mutant.id
