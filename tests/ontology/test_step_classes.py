"""Each step kind compiles to its own class, with only that kind's fields, and the runtime has a
body for every kind that does something: a kind added to the vocabulary without one is caught
here rather than by a run that silently follows ``next``."""

from __future__ import annotations

from dataclasses import fields

from rdflib import RDF, Graph, URIRef

from app.ontology.model import Ontology
from app.ontology.workflows import STEP_CLASSES, PlainStep, StepBase
from app.runtime.steps import STEP_BODIES
from tests.ontology.conftest import FULL

HORIS = "https://horismos.dev/ns#"


def test_each_step_is_compiled_to_the_class_its_rdf_type_names(full: Ontology) -> None:
    graph = Graph().parse(FULL)
    seen: set[type[StepBase]] = set()
    for workflow in full.workflows.values():
        for step in workflow.steps.values():
            declared = {str(t) for t in graph.objects(URIRef(step.iri), RDF.type)}
            assert HORIS + step.kind in declared, step.name
            seen.add(type(step))
    # the full vocabulary declares a step of every kind
    assert seen == set(STEP_CLASSES.values())


def test_a_step_carries_only_its_own_kinds_fields() -> None:
    common = {f.name for f in fields(StepBase)}
    own = {c: {f.name for f in fields(c)} - common for c in STEP_CLASSES.values()}
    assert own[STEP_CLASSES["ReasoningStep"]] == {"goal", "on_unreachable", "on_incomplete"}
    assert own[STEP_CLASSES["WaitStep"]] == {"awaits", "timeout", "on_timeout"}
    assert "tool" not in own[STEP_CLASSES["PerceptionStep"]]
    assert "fallback" not in own[STEP_CLASSES["NarrationStep"]]


def test_every_kind_but_the_plain_step_has_a_body() -> None:
    assert set(STEP_BODIES) == set(STEP_CLASSES.values()) - {PlainStep}
