"""Every silent-failure mutant of every bundled deployment is refused by verification, with a
problem that names the node the mistake is under (or names it in its message).

A mutant the generator makes but verification lets through would load, serve, and answer 200
with no card on every call: the failure this suite exists to prevent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ontology import OntologyError, load_ontology, verify
from app.ontology.errors import Problem
from app.ontology.model import local_name
from tests.mutation.mutants import (
    OPERATORS,
    Mutant,
    affected,
    all_mutants,
    deployment_files,
    mutants,
    write_mutant,
)

MUTANTS = all_mutants()


def _refusals(mutant: Mutant, tmp_path: Path) -> list[list[Problem]]:
    """What verification says of each deployment the mutated file is part of."""
    path = write_mutant(mutant, tmp_path)
    found = affected(path)
    assert found, f"{mutant.id}: the mutated file is part of no deployment"
    out: list[list[Problem]] = []
    for source in found:
        try:
            out.append(verify(load_ontology(source.paths)))
        except OntologyError as exc:
            out.append(exc.problems)
    return out


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_every_mutant_is_refused_naming_the_node(mutant: Mutant, tmp_path: Path) -> None:
    # a common file's mistake may not reach every deployment importing it (patient-view reads
    # no draft orders), but it must be refused where it does reach
    refusals = [problems for problems in _refusals(mutant, tmp_path) if problems]
    assert refusals, f"{mutant.id}: verifies, so it would serve 200 with no card"
    for problems in refusals:
        named = [
            p for p in problems if p.node == mutant.owner or local_name(mutant.owner) in str(p)
        ]
        assert named, [str(p) for p in problems]


def test_the_generator_mutates_every_bundled_deployment() -> None:
    found = deployment_files()
    assert found, "no bundled deployment"
    for paths in found:
        made = {m.operator for path in paths for m in mutants(path)}
        # every deployment has FHIRPath, prefetch templates and a hook; coded data where it
        # names codes (the opioid deployments name value sets)
        needed = {"fhirpath-typo", "prefetch-token", "hook-typo"}
        own = paths[0].read_text(encoding="utf-8")
        if "a horis:CdsService" not in own:  # a combined service: a hook, no data of its own
            needed = {"hook-typo"}
        if any("horis:coding" in path.read_text(encoding="utf-8") for path in paths):
            needed.add("coding-relative")
        assert needed <= made, ([p.name for p in paths], made)


def test_the_issue_mutations_are_among_the_mutants() -> None:
    made = {(m.operator, m.before, m.after) for m in MUTANTS}
    assert ("unit-not-ucum", "mm[Hg]", "mmHg") in made
    assert ("fhirpath-typo", "valueQuantity", "valueQuantiy") in made
    assert ("hook-typo", "encounter-start", "encounter-strat") in made
    assert any(op == "prefetch-token" and "{{context.patient}}" in after for op, _b, after in made)
    assert {o.name for o in OPERATORS} == {m.operator for m in MUTANTS}
