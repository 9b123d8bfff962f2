"""Verification decisions that the broken-file suite does not show on its own."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from app.ontology import load_ontology, verify
from app.ontology.model import Ontology
from tests.ontology.conftest import DATA, T

SOUND = (DATA / "verify_sound.ttl").read_text(encoding="utf-8")


def _sound_with(ttl: Callable[[str], Path], old: str, new: str, extra: str = "") -> Path:
    body = SOUND.split("\n", 1)[1]
    body = body[body.index("\n:Patient") :]
    assert old in body
    return ttl(body.replace(old, new) + extra)


def test_an_unresolved_edge_in_a_compiled_ontology_is_reported(triage: Ontology) -> None:
    # Turtle cannot express this (the loader refuses it); a hand-built Ontology can.
    w = triage.workflow("Triage")
    assess = next(s for s in w.steps.values() if s.name == "Assess")
    broken = dataclasses.replace(assess, next="https://horismos.dev/example/triage#Nowhere")
    steps = {**w.steps, assess.iri: broken}
    o = dataclasses.replace(triage, workflows={w.iri: dataclasses.replace(w, steps=steps)})
    problems = verify(o)
    assert [(p.code, p.node) for p in problems] == [("unresolved-edge", assess.iri)]
    assert "Nowhere" in problems[0].message


def test_a_terminal_action_step_needs_no_on_error(triage: Ontology) -> None:
    escalate = triage.step("https://horismos.dev/example/triage#EscalateToNurse")
    assert escalate.kind == "ActionStep" and escalate.on_error is None
    assert verify(triage) == []


PAGE = (
    ':Page a horis:ActionStep ; horis:tool :notify ; horis:bind [ horis:arg "patient" ; '
    "horis:focus true ] ;\n    horis:requires [ horis:property :consent ; horis:is true ] ; "
    "horis:onError :Escalate ; horis:next :Done .\n"
)


@pytest.mark.parametrize(
    ("producer", "start"),
    [
        # a rule concludes it
        (
            ":ConsentRule a horis:Rule ; horis:about :Patient ;"
            " horis:when ( [ horis:property :hr ; horis:isAssigned true ] ) ;"
            " horis:then [ horis:property :consent ; horis:value true ] .",
            "Assess",
        ),
        # it is read from FHIR
        (
            ':consent horis:fromFhir [ horis:resourceType "Consent" ; '
            "horis:fhirPath \"status = 'active'\" ] .",
            "Assess",
        ),
        # an upstream tool declares it as an effect
        (
            ':ask a horis:Tool ; horis:binding "mcp://a/b" ; horis:effect [ horis:asserts '
            "[ horis:property :consent ; horis:type xsd:boolean ] ] .\n"
            ":Ask a horis:ActionStep ; horis:tool :ask ; horis:onError :Escalate ; "
            "horis:next :Assess .",
            "Ask",
        ),
        # an upstream PerceptionStep extracts its class
        (
            ":Read a horis:PerceptionStep ; horis:extracts :Patient ; horis:fallback :Escalate ; "
            "horis:next :Assess .",
            "Read",
        ),
        # an upstream WaitStep awaits it
        (":Hold a horis:WaitStep ; horis:awaits :consent ; horis:next :Assess .", "Hold"),
    ],
    ids=["rule", "fhir", "tool-effect", "perception", "wait"],
)
def test_requires_is_satisfiable_by_any_upstream_producer(
    ttl: Callable[[str], Path], producer: str, start: str
) -> None:
    path = _sound_with(
        ttl,
        "horis:onUnreachable :Escalate ; horis:next :Done .",
        "horis:onUnreachable :Escalate ; horis:next :Page .",
        ":consent a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean .\n"
        + PAGE
        + producer
        + "\n",
    )
    text = path.read_text().replace("horis:startsAt :Assess", f"horis:startsAt :{start}")
    path.write_text(text)
    assert verify(load_ontology([path])) == []


def test_a_producer_after_the_step_does_not_count(ttl: Callable[[str], Path]) -> None:
    path = _sound_with(
        ttl,
        "horis:onUnreachable :Escalate ; horis:next :Done .",
        "horis:onUnreachable :Escalate ; horis:next :Page .",
        ":consent a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean .\n"
        + PAGE.replace("horis:next :Done", "horis:next :Hold")
        + ":Hold a horis:WaitStep ; horis:awaits :consent ; horis:next :Done .\n",
    )
    assert [p.code for p in verify(load_ontology([path]))] == ["requires"]


def test_on_unsatisfied_or_a_negative_precondition_needs_no_producer(
    ttl: Callable[[str], Path],
) -> None:
    extra = ":consent a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean .\n"
    with_edge = _sound_with(
        ttl,
        "horis:onUnreachable :Escalate ; horis:next :Done .",
        "horis:onUnreachable :Escalate ; horis:next :Page .",
        extra + PAGE.replace("horis:onError", "horis:onUnsatisfied :Escalate ; horis:onError"),
    )
    assert verify(load_ontology([with_edge])) == []
    negative = _sound_with(
        ttl,
        "horis:onUnreachable :Escalate ; horis:next :Done .",
        "horis:onUnreachable :Escalate ; horis:next :Page .",
        extra + PAGE.replace("horis:is true", "horis:isAssigned false"),
    )
    assert verify(load_ontology([negative])) == []


def test_negation_on_a_property_outside_the_cycle_is_stratified(
    ttl: Callable[[str], Path],
) -> None:
    path = _sound_with(
        ttl,
        "[ horis:property :hr ; horis:greaterThan 100 ]",
        "[ horis:property :hr ; horis:isAssigned false ]",
        ":hr horis:absentMeans horis:Unknown .\n",
    )
    assert verify(load_ontology([path])) == []


def test_negation_cycle_through_a_chain_of_derived_properties(
    ttl: Callable[[str], Path],
) -> None:
    chain = "".join(
        f":{a} a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean .\n"
        for a in ("a", "b", "c")
    ) + (
        ":RA a horis:Rule ; horis:about :Patient ; horis:when ( [ horis:property :c ; "
        "horis:isAssigned false ] ) ; horis:then [ horis:property :a ; horis:value true ] .\n"
        ":RB a horis:Rule ; horis:about :Patient ; horis:when ( [ horis:property :a ; "
        "horis:is true ] ) ; horis:then [ horis:property :b ; horis:value true ] .\n"
        ":RC a horis:Rule ; horis:about :Patient ; horis:when ( [ horis:path ( :b ) ; "
        "horis:is true ] ) ; horis:then [ horis:property :c ; horis:value true ] .\n"
    )
    path = _sound_with(ttl, ":Patient a horis:Class .", ":Patient a horis:Class .", chain)
    problems = verify(load_ontology([path]))
    assert [(p.code, p.node) for p in problems] == [("stratification", T + "RA")]


@pytest.mark.parametrize(
    ("names", "sound"),
    [
        (":name a horis:Property ; horis:domain :Patient ; horis:range xsd:string .", True),
        # a number names nobody, and another class's property is not the instance's
        (":name a horis:Property ; horis:domain :Patient ; horis:range xsd:integer .", False),
        (
            ":Other a horis:Class .\n"
            ":name a horis:Property ; horis:domain :Other ; horis:range xsd:string .",
            False,
        ),
    ],
)
def test_named_by_is_a_text_property_of_the_class(
    ttl: Callable[[str], Path], names: str, sound: bool
) -> None:
    path = _sound_with(
        ttl, ":Patient a horis:Class .", ":Patient a horis:Class ; horis:namedBy :name .", names
    )
    problems = [(p.code, p.node) for p in verify(load_ontology([path]))]
    assert problems == ([] if sound else [("type-check", "https://example.org/t#Patient")])


def _answered_ahead(o: Ontology, **change: object) -> Ontology:
    service = next(iter(o.services.values()))
    ahead = dataclasses.replace(service, answered_ahead=True, **change)  # type: ignore[arg-type]
    return dataclasses.replace(o, services={service.iri: ahead})


def _ahead_problems(o: Ontology) -> list[str]:
    return [p.message for p in verify(o) if p.path == "horis:answeredAhead"]


def test_a_service_answered_ahead_is_on_order_sign(triage: Ontology) -> None:
    assert _ahead_problems(triage) == []
    (problem,) = _ahead_problems(_answered_ahead(triage))
    assert "is for order-sign services" in problem and "encounter-start" in problem


def test_a_service_answered_ahead_acts_on_nothing_outside(triage: Ontology) -> None:
    # triage assigns a queue and pages a nurse (tools that act outside) and narrates its proof
    problems = _ahead_problems(_answered_ahead(triage, hook="order-sign"))
    assert any("Route" in p and "not horis:pure" in p for p in problems)
    assert any("EscalateToNurse" in p and "not horis:pure" in p for p in problems)
    assert any("Explain" in p and "asks a language model" in p for p in problems)
    # its vital signs are read with horis:maxAge: a reading may go stale within the day an
    # answer computed ahead stands for
    assert any("reads with horis:maxAge" in p for p in problems)


@pytest.mark.parametrize(
    ("annotation", "sound"), [("{1.73_m2}", True), ("{BSA}", False), ("1.73_m2", False)]
)
def test_codes_imply_an_annotation_that_ends_the_property_s_unit(
    annotation: str, sound: bool
) -> None:
    """med-safety's eGFR codes imply {1.73_m2}, which ends its unit mL/min/{1.73_m2}; an
    annotation the unit does not end with (or a text that is no annotation) is refused."""
    from app.ontology import default_ontology_paths

    [path] = [p for p in default_ontology_paths() if p.name == "med-safety.ttl"]
    o = load_ontology([path])
    egfr = o.properties["https://horismos.dev/example/med-safety#egfr"]
    assert [m.codes_imply for m in egfr.from_fhir] == [("{1.73_m2}",)]
    changed = dataclasses.replace(
        egfr,
        from_fhir=tuple(dataclasses.replace(m, codes_imply=(annotation,)) for m in egfr.from_fhir),
    )
    o = dataclasses.replace(o, properties={**o.properties, egfr.iri: changed})
    found = [p.message for p in verify(o) if "codesImply" in p.message]
    if sound:
        assert found == []
    else:
        [message] = found
        assert f'horis:codesImply "{annotation}"' in message


SERVICE = """
:Service a horis:CdsService ; horis:id "activity" ; horis:hook "patient-view" ;
    horis:title "Activity" ; horis:description "A suggestion creating a request." ;
    horis:workflow :Flow ;
    horis:prefetch [ horis:key "hr" ;
                     horis:query "Observation?patient={{{{context.patientId}}}}" ] ;
    horis:card [ horis:terminal :Done ; horis:indicator "info" ; horis:summary "Done" ;
                 horis:suggest [ horis:label "Order it" ; horis:activity {activity} ] ] .
"""
ORDER = (
    '"""{"activityDefinition": {"resourceType": "ActivityDefinition", "status": "active", '
    '"kind": "ServiceRequest"%s}}"""'
)


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("", None),
        (', "library": ["http://example.org/Library/L"]', "logic library"),
        (
            ', "dynamicValue": [{"path": "priority", "expression": '
            '{"language": "text/cql-identifier", "expression": "P"}}]',
            "FHIRPath",
        ),
        (', "status": 7', "ActivityDefinition.status"),
        (', "quantity": {"value": 2}', "quantity is not carried"),
    ],
)
def test_a_suggestions_activity_is_an_r4_activity_definition_in_fhirpath(
    ttl: Callable[[str], Path], extra: str, problem: str | None
) -> None:
    path = _sound_with(ttl, ":Done a", ":Done a", SERVICE.format(activity=ORDER % extra))
    found = [p.message for p in verify(load_ontology([path]))]
    if problem is None:
        assert found == []  # the complete declaration loads clean
    else:
        assert len(found) == 1 and "horis:activity" in found[0] and problem in found[0]


def test_an_activity_that_is_not_json_is_refused(ttl: Callable[[str], Path]) -> None:
    path = _sound_with(ttl, ":Done a", ":Done a", SERVICE.format(activity='"{not json"'))
    [problem] = verify(load_ontology([path]))
    assert "not JSON" in problem.message
