"""Small deployments written in Turtle for the knowledge-language tests, with value sets beside
them (the way a deployment keeps them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.ontology import load_ontology
from app.ontology.model import Ontology

PREFIXES = """\
@prefix :      <https://example.org/lang#> .
@prefix horis: <https://horismos.dev/ns#> .
@prefix rdfs:  <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd:   <http://www.w3.org/2001/XMLSchema#> .
"""
L = "https://example.org/lang#"
RX = "http://www.nlm.nih.gov/research/umls/rxnorm"
SCT = "http://snomed.info/sct"

#: canonical → (system, codes)
VALUE_SETS = {
    "http://example.org/vs/opioids": (RX, ["1049502", "197696", "1010600"]),
    "http://example.org/vs/benzodiazepines": (RX, ["1298088", "104693"]),
    "http://example.org/vs/terminal": (SCT, ["94225005"]),
}


def value_set(url: str, system: str, codes: list[str]) -> dict[str, object]:
    return {
        "resourceType": "ValueSet",
        "id": url.rsplit("/", 1)[1],
        "url": url,
        "status": "active",
        "expansion": {
            "timestamp": "2025-01-01T00:00:00Z",
            "contains": [{"system": system, "code": c} for c in codes],
        },
    }


@pytest.fixture
def deployment(tmp_path: Path) -> Callable[..., Ontology]:
    """Write a Turtle body (prefixes added) with the test value sets beside it and load it."""
    counter = iter(range(1000))

    def load(body: str, **kw: object) -> Ontology:
        folder = tmp_path / f"d{next(counter)}"
        (folder / "valuesets").mkdir(parents=True)
        for url, (system, codes) in VALUE_SETS.items():
            name = url.rsplit("/", 1)[1]
            (folder / "valuesets" / f"{name}.json").write_text(
                json.dumps(value_set(url, system, codes)), encoding="utf-8"
            )
        path = folder / "deployment.ttl"
        path.write_text(PREFIXES + body, encoding="utf-8")
        return load_ontology([path], **kw)  # type: ignore[arg-type]

    return load
