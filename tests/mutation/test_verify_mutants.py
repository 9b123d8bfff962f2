"""Every silent-failure mutant of every bundled deployment is refused by verification, with a
problem that names the node the mistake is under (or names it in its message).

A mutant the generator makes but verification lets through would load, serve, and answer 200
with no card on every call: the failure this suite exists to prevent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.ontology import OntologyError, load_ontology, verify
from app.ontology.errors import Problem
from app.ontology.model import local_name
from tests.mutation.mutants import OPERATORS, Mutant, all_mutants, deployments, mutants

MUTANTS = all_mutants()


def _refusal(mutant: Mutant, tmp_path: Path) -> list[Problem]:
    valuesets = mutant.deployment.parent / "valuesets"
    if valuesets.is_dir():  # the deployment's value sets, beside it as the loader expects
        shutil.copytree(valuesets, tmp_path / "valuesets")
    path = tmp_path / mutant.deployment.name
    path.write_text(mutant.text, encoding="utf-8")
    try:
        return verify(load_ontology([path]))
    except OntologyError as exc:
        return exc.problems


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_every_mutant_is_refused_naming_the_node(mutant: Mutant, tmp_path: Path) -> None:
    problems = _refusal(mutant, tmp_path)
    assert problems, f"{mutant.id}: verifies, so it would serve 200 with no card"
    named = [p for p in problems if p.node == mutant.owner or local_name(mutant.owner) in str(p)]
    assert named, [str(p) for p in problems]


def test_the_generator_mutates_every_bundled_deployment() -> None:
    found = deployments()
    assert found, "no bundled deployment"
    for path in found:
        made = {m.operator for m in mutants(path)}
        # every deployment has units, FHIRPath, prefetch templates, a hook and coded data
        assert {"fhirpath-typo", "prefetch-token", "hook-typo", "coding-relative"} <= made, (
            path.name,
            made,
        )


def test_the_issue_mutations_are_among_the_mutants() -> None:
    made = {(m.operator, m.before, m.after) for m in MUTANTS}
    assert ("unit-not-ucum", "mm[Hg]", "mmHg") in made
    assert ("fhirpath-typo", "valueQuantity", "valueQuantiy") in made
    assert ("hook-typo", "encounter-start", "encounter-strat") in made
    assert any(op == "prefetch-token" and "{{context.patient}}" in after for op, _b, after in made)
    assert {o.name for o in OPERATORS} == {m.operator for m in MUTANTS}
