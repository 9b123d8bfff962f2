"""The deployments' filters follow the code systems' own hierarchies: where a filter reads a
clinical status as "active", every code HL7's CodeSystem puts under ``active`` is read too."""

from __future__ import annotations

import json

import pytest

from app.ontology import default_ontology_paths, load_ontology
from app.terminology import default_packages_dir, load_terminology

CLINICAL = "http://terminology.hl7.org/CodeSystem/condition-clinical"


def _codes(system: str) -> list[str]:
    [package] = default_packages_dir().glob("hl7.terminology.r4#*/package")
    resource = json.loads((package / "CodeSystem-condition-clinical.json").read_text("utf-8"))
    assert resource["url"] == system
    out: list[str] = []
    stack = list(resource["concept"])
    while stack:
        concept = stack.pop()
        out.append(concept["code"])
        stack.extend(concept.get("concept", []))
    return out


@pytest.mark.parametrize("deployment", ["triage.ttl"])
def test_an_active_condition_filter_reads_every_code_under_active(deployment: str) -> None:
    terminology = load_terminology()
    under = [c for c in _codes(CLINICAL) if terminology.subsumes(CLINICAL, "active", c)]
    assert {"active", "recurrence", "relapse"} <= set(under)
    [path] = [p for p in default_ontology_paths() if p.name == deployment]
    onto = load_ontology([path])
    filters = [
        m.where
        for p in onto.properties.values()
        for m in p.from_fhir
        if m.where and "clinicalStatus" in m.where and m.resource_type == "Condition"
    ]
    assert filters
    for where in filters:
        for code in under:
            assert f"'{code}'" in where, (code, where)
