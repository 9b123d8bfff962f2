"""What verifies also builds a World: verification runs the World's own stratification, so an
ontology cannot pass ``horismos verify`` and then fail at ``World(...)``."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ontology import default_ontology_paths, load_ontology, verify
from app.ontology.deployments import find_deployments
from app.world import StratificationError, World
from tests.ontology.conftest import DATA, REGISTRY

#: each ontology as its files: a bundled deployment with what it imports
ONTOLOGIES = [
    *([p] for p in sorted(DATA.glob("verify_*.ttl"))),
    *(source.paths for source in find_deployments(default_ontology_paths())),
    [DATA.parent / "cds" / "system_actions.ttl"],
]


@pytest.mark.parametrize("paths", ONTOLOGIES, ids=lambda p: p[0].stem)
def test_verify_reports_stratification_exactly_when_the_world_refuses(paths: list[Path]) -> None:
    ontology = load_ontology(paths, registry=REGISTRY)
    reported = any(p.code == "stratification" for p in verify(ontology))
    try:
        World(ontology)
        refused = False
    except StratificationError:
        refused = True
    assert reported == refused


def test_a_first_listed_cycle_is_reported_on_the_rule_the_world_names() -> None:
    ontology = load_ontology([DATA / "verify_stratification_first_listed.ttl"])
    with pytest.raises(StratificationError) as refused:
        World(ontology)
    problems = [p for p in verify(ontology) if p.code == "stratification"]
    assert {p.node for p in problems} == set(refused.value.rules)
    assert all("FirstListed" in p.message for p in problems)
