"""The World over the shipped triage ontology: the acuity table of docs/examples.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.ontology.loader import load_ontology
from app.ontology.model import Ontology, local_name
from app.world import World, load_structured

TTL = Path(__file__).resolve().parents[2] / "ontologies" / "triage.ttl"


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology([TTL])


CASES: list[tuple[dict[str, Any], list[str], str | None]] = [
    ({"spo2": 85}, [], "Immediate"),
    ({"systolicBP": 85}, [], "Immediate"),
    ({"heartRate": 160}, [], "Immediate"),
    ({"heartRate": 35}, [], "Immediate"),
    ({"respRate": 32}, [], "Immediate"),
    ({"respRate": 6}, [], "Immediate"),
    ({}, ["Unresponsive"], "Immediate"),
    ({"heartRate": 125}, ["ChestPain"], "Immediate"),
    ({"heartRate": 120}, ["ChestPain"], "Urgent"),
    ({}, ["ChestPain"], "Urgent"),
    ({}, ["Dyspnea"], "Urgent"),
    ({}, ["Syncope"], "Urgent"),
    ({"heartRate": 101}, [], "Urgent"),
    ({"respRate": 25}, [], "Urgent"),
    ({"spo2": 93}, [], "Urgent"),
    ({"temperature": 39.0}, [], "Urgent"),
    ({"age": 65, "temperature": 38.0}, [], "Urgent"),
    ({"age": 64, "temperature": 38.0}, [], "Standard"),
    ({}, ["Headache"], "Standard"),
    ({}, ["Fever"], "Standard"),
    ({"heartRate": 80}, [], "NonUrgent"),
    ({"heartRate": 100, "spo2": 94}, [], "NonUrgent"),
    ({"age": 30, "spo2": 98}, [], None),
]


@pytest.mark.parametrize(("vitals", "symptoms", "acuity"), CASES)
def test_acuity_table(
    onto: Ontology, vitals: dict[str, Any], symptoms: list[str], acuity: str | None
) -> None:
    world = World(onto)
    patient = {"id": "p1", "class": "Patient", **vitals}
    if symptoms:
        patient["hasSymptom"] = [f"s{i}" for i in range(len(symptoms))]
    body = {"instances": [patient] + [{"id": f"s{i}", "class": c} for i, c in enumerate(symptoms)]}
    result = load_structured(world, body)
    assert result.ok, result.violations
    value = world.value("p1", "acuity")
    assert (None if value is None else local_name(str(value))) == acuity
    proof = world.proof("p1", "acuity")
    cited = {local_name(f.property) for f in proof.base_facts()}
    assert cited <= {*vitals, "hasSymptom"}
    assert bool(cited) == (acuity is not None)
