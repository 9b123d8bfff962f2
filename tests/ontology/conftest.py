from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.ontology import load_ontology
from app.ontology.model import Ontology

DATA = Path(__file__).resolve().parents[1] / "data" / "ontology"
ROOT = Path(__file__).resolve().parents[2]
TRIAGE = ROOT / "ontologies" / "triage.ttl"
FULL = DATA / "full_vocabulary.ttl"

PREFIXES = """\
@prefix :      <https://example.org/t#> .
@prefix horis: <https://horismos.dev/ns#> .
@prefix rdfs:  <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd:   <http://www.w3.org/2001/XMLSchema#> .
"""
T = "https://example.org/t#"


def _stand_in(*args: object, **kwargs: object) -> dict[str, object]:
    return {}


#: What the test deployments' ``rust:`` bindings resolve to.
REGISTRY = {"book": _stand_in}


@pytest.fixture(scope="session")
def triage() -> Ontology:
    return load_ontology([TRIAGE])


@pytest.fixture(scope="session")
def full() -> Ontology:
    return load_ontology([FULL], registry=REGISTRY)


@pytest.fixture
def ttl(tmp_path: Path) -> Callable[[str], Path]:
    """Write a Turtle snippet (prefixes added) to a file and return its path."""
    counter = iter(range(1000))

    def write(body: str) -> Path:
        path = tmp_path / f"snippet{next(counter)}.ttl"
        path.write_text(PREFIXES + body, encoding="utf-8")
        return path

    return write
