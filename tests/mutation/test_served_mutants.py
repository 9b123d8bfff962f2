"""A mutant verification refuses is never served at all: the service does not start on it, so
it can never answer 200 with no card."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.main import OntologyRefused, load_verified_ontology
from app.ontology import OntologyError
from app.settings import Settings
from tests.mutation.mutants import Mutant, all_mutants


def _write(mutant: Mutant, folder: Path) -> Path:
    valuesets = mutant.deployment.parent / "valuesets"
    if valuesets.is_dir():
        shutil.copytree(valuesets, folder / "valuesets")
    path = folder / mutant.deployment.name
    path.write_text(mutant.text, encoding="utf-8")
    return path


def test_the_service_does_not_start_on_a_refused_mutant(tmp_path: Path) -> None:
    every = all_mutants()
    for i, mutant in enumerate(every[:: max(1, len(every) // 8)]):
        folder = tmp_path / str(i)
        folder.mkdir()
        settings = Settings(ontology_paths=[_write(mutant, folder)])
        with pytest.raises((OntologyRefused, OntologyError)) as refused:
            load_verified_ontology(settings)
        assert mutant.owner.rsplit("#", 1)[-1] in str(refused.value), mutant.id
