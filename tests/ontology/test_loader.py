"""Loading: every vocabulary term compiles to the value it declares."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from app.ontology import OntologyError, default_ontology_paths, load_ontology
from app.ontology.loader import vocabulary_terms
from app.ontology.model import HORIS, XSD, AlternativeDecl, Ontology
from tests.ontology.conftest import FULL, REGISTRY, TRIAGE

F = "https://example.org/full#"


def test_the_full_vocabulary_file_uses_every_declared_term() -> None:
    used = set(re.findall(r"horis:(\w+)", FULL.read_text(encoding="utf-8")))
    declared = {t[len(HORIS) :] for t in vocabulary_terms()}
    assert declared - used == set()
    assert used - declared == set()


def test_classes_subclass_trees_and_codes(full: Ontology) -> None:
    cardiac = full.classes[F + "Cardiac"]
    assert cardiac.parents == (F + "Condition",)
    assert cardiac.codes == ("http://example.org/cs|card", "http://example.org/cs|card2")
    assert full.subclasses(F + "Condition") == (F + "Condition", F + "Cardiac", F + "Arrhythmia")
    assert full.is_subclass(F + "Arrhythmia", F + "Condition")
    assert not full.is_subclass(F + "Condition", F + "Arrhythmia")
    assert full.class_for_code("http://example.org/cs|arr") == F + "Arrhythmia"
    assert full.class_for_code("http://example.org/cs|nope") is None
    assert full.classes[F + "Traveller"].label == "Traveller"
    assert full.classes[F + "Option"].named_by == F + "bookedBy"
    assert full.classes[F + "Booking"].named_by is None


def test_value_sets_load_from_the_folder_beside_the_file(full: Ontology) -> None:
    respiratory = full.value_sets["http://example.org/vs/respiratory"]
    assert respiratory.codes == {"http://example.org/cs|asthma", "http://example.org/cs|copd"}
    assert respiratory.source.endswith("valuesets/respiratory.json")
    # an expansion is the membership (nested entries included, abstract ones not)
    cardiac = full.value_sets["http://example.org/vs/cardiac"]
    assert cardiac.codes == {"http://example.org/cs|card", "http://example.org/cs|mi"}
    assert full.classes[F + "Respiratory"].value_sets == ("http://example.org/vs/respiratory",)
    assert full.class_for_code("http://example.org/cs|copd") == F + "Respiratory"
    assert full.class_for_code("http://example.org/cs|card") == F + "Cardiac"  # horis:code first
    assert full.in_value_set("http://example.org/cs|mi", "http://example.org/vs/cardiac")
    assert not full.in_value_set("http://example.org/cs|copd", "http://example.org/vs/cardiac")
    mapping = full.properties[F + "conditionCode"].from_fhir[0]
    assert mapping.value_sets == ("http://example.org/vs/cardiac",)
    (rule,) = [r for r in full.rules if r.name == "R5"]
    assert (rule.when[0].op, rule.when[0].value) == ("inValueSet", "http://example.org/vs/cardiac")


def test_linked_resources_transforms_and_inverses(full: Ontology) -> None:
    assert full.properties[F + "optionOf"].inverse_of == (F + "hasOption",)
    (nights,) = full.properties[F + "stayNights"].from_fhir
    assert nights.transform == "PeriodDays"
    (item,) = full.properties[F + "bookedItem"].from_fhir
    assert (item.via, item.fhir_path) == ("medicationReference", "code")


def test_aggregates(full: Ontology) -> None:
    count = full.properties[F + "cheapOptions"]
    assert count.aggregate is not None and count.rules_only  # computed, never asserted
    assert (count.aggregate.function, count.aggregate.over) == ("Count", ((F + "hasOption",),))
    assert count.aggregate.where[0].op == "atMost"
    total = full.properties[F + "totalPrice"].aggregate
    assert total is not None
    assert (total.function, total.of) == ("Sum", F + "price")
    assert total.over == ((F + "hasOption",), (F + "chosen",))
    cheapest = full.properties[F + "cheapest"].aggregate
    assert cheapest is not None and cheapest.over == ((F + "hasOption", F + "price"),)
    assert cheapest.of is None


def test_enumeration_individuals_typed_or_only_listed(full: Ontology) -> None:
    assert full.classes[F + "Tier"].one_of == (F + "Gold", F + "Silver", F + "Bronze")
    assert full.individuals[F + "Gold"].codes == ("http://example.org/tier|G",)
    assert full.individuals[F + "Bronze"].class_iri == F + "Tier"  # listed, never typed
    assert full.individual_for_code("http://example.org/tier|B") == F + "Bronze"


def test_property_constraints(full: Ontology) -> None:
    age = full.properties[F + "age"]
    assert (age.range, age.min, age.max, age.unit, age.cardinality) == (
        XSD + "integer",
        Decimal(0),
        Decimal(130),
        "a",
        "0..1",
    )
    weight = full.properties[F + "weight"]
    assert (weight.min, weight.max) == (Decimal("0.5"), Decimal("400.25"))
    code = full.properties[F + "code"]
    assert code.pattern == "^[A-Z]{3}$" and code.required and code.single_valued
    assert full.properties[F + "vip"].cardinality == "0..*"  # the default
    assert full.properties[F + "seat"].one_of == ("aisle", "window")
    assert full.properties[F + "hasCondition"].is_object
    assert full.properties[F + "hasCondition"].closed_world
    assert full.properties[F + "weight"].absent_means == "Unknown"
    assert not full.properties[F + "weight"].closed_world
    assert full.properties[F + "vip"].absent_means is None  # undeclared: means Unknown
    assert not full.properties[F + "vip"].closed_world
    assert full.properties[F + "born"].range == XSD + "date"
    assert full.properties[F + "born"].absent_means == "Unread"


def test_one_of_on_the_property_or_inherited_from_the_range(full: Ontology) -> None:
    tier = full.properties[F + "tier"]
    assert tier.one_of == (F + "Gold", F + "Silver", F + "Bronze")
    assert tier.rules_only and tier.resolution == "FirstListed"
    top = full.properties[F + "topTier"]
    assert top.one_of == (F + "Gold", F + "Silver") and top.resolution == "Reject"


def test_fhir_mappings(full: Ontology) -> None:
    (age,) = full.properties[F + "age"].from_fhir
    assert (age.resource_type, age.fhir_path, age.transform) == (
        "Patient",
        "birthDate",
        "YearsSince",
    )
    (weight,) = full.properties[F + "weight"].from_fhir
    assert weight.codings == ("http://loinc.org|29463-7", "http://loinc.org|3141-9")
    assert weight.pick == "Latest"
    assert weight.max_age == 36 * 3600  # "P1DT12H"
    assert age.max_age is None
    (cond,) = full.properties[F + "hasCondition"].from_fhir
    assert cond.where == "clinicalStatus.coding.code = 'active'" and cond.pick == "All"
    assert cond.missing_excludes == ("clinicalStatus",) and weight.missing_excludes == ()
    assert full.properties[F + "hasCondition"].closed_over == ("http://example.org/cs",)
    assert full.properties[F + "weight"].closed_over == ()
    assert full.services[F + "Service"].clock_skew == 120
    assert full.services[F + "Service"].answered_ahead is True
    (draft,) = full.properties[F + "hasDraft"].from_fhir
    assert draft.context_key == "draftOrders"


def test_rules_every_operator_in_document_order(full: Ontology) -> None:
    assert [r.name for r in full.rules] == ["R1", "R2", "R3", "R4", "R5"]
    assert [r.order for r in full.rules] == [0, 1, 2, 3, 4]
    ops = [(c.op, c.value) for r in full.rules for c in r.when]
    assert ops == [
        ("greaterThan", 17),
        ("atLeast", 18),
        ("lessThan", Decimal("150.5")),
        ("atMost", 149),
        ("greaterThan", "2020-01-01T00:00:00+00:00"),  # normalized ISO 8601
        ("is", "ABC"),
        ("isNot", "XYZ"),
        ("in", ("aisle", "window")),
        ("notIn", ("AAA",)),
        ("matches", "^A"),
        ("isA", F + "Cardiac"),
        ("isAssigned", False),
        ("lessThan", 100),
        ("inValueSet", "http://example.org/vs/cardiac"),
        ("atLeastAgo", "P18Y"),
        ("withinPast", "PT24H"),
        ("atMostAgo", "P1W"),
    ]
    r4 = full.rules[3]
    assert r4.when[0].path == (F + "hasOption", F + "price")
    assert [(t.property, t.value) for t in r4.then] == [(F + "flagged", True), (F + "ref", "cheap")]
    assert full.rules_for(F + "tier") == full.rules[:3]
    assert full.rules[0].when[1].node == F + "R1 horis:when[2]"


def test_tools(full: Ontology) -> None:
    book = full.tools[F + "book"]
    assert [(a.name, a.type) for a in book.args] == [
        ("who", F + "Traveller"),
        ("tier", F + "Tier"),
        ("note", XSD + "string"),
    ]
    assert [(e.property, e.now, e.type) for e in book.effects] == [
        (F + "seenAt", True, None),
        (F + "ref", False, XSD + "string"),
    ]
    assert (book.binding, book.timeout, book.idempotent, book.retries) == (
        "rust:book",
        0.5,
        True,
        3,
    )
    commit = full.tools[F + "commit"]
    assert commit.commits is not None
    assert (commit.commits.resource_type, commit.commits.element, commit.commits.value_arg) == (
        "Encounter",
        "priority",
        "tier",
    )
    assert commit.commits.code_system == "http://example.org/tier"
    assert commit.commits.scope == "user/Encounter.write" and commit.timeout == 2.0
    patch, tell = full.tools[F + "patch"].commits, full.tools[F + "tell"].commits
    assert patch is not None and (patch.operation, patch.element) == ("patch", "priority")
    assert tell is not None and (tell.operation, tell.resource_type) == ("create", "Communication")
    assert tell.template is not None and "{{arg.note}}" in tell.template
    assert (tell.element, tell.value_arg) == ("", "")
    assert full.tools[F + "ask"].timeout == 120.0
    assert full.tools[F + "post"].timeout == 7.0
    assert full.tools[F + "pyfn"].timeout == 5.0 and full.tools[F + "pyfn"].retries is None
    assert full.tools[F + "pyfn"].pure and not full.tools[F + "ask"].pure


def test_workflow_and_every_step_kind(full: Ontology) -> None:
    flow = full.workflow("Flow")
    assert (flow.starts_at, flow.decides, flow.focus, flow.version) == (
        F + "Read",
        F + "tier",
        F + "Traveller",
        "1.0",
    )
    s = {st.name: st for st in flow.steps.values()}
    assert set(s) == {"Read", "Think", "Branch", "Act", "Pick", "Nest", "Tell", "Done", "Failed"}
    read = s["Read"]
    assert (read.kind, read.extracts, read.model, read.confidence, read.retries) == (
        "PerceptionStep",
        (F + "Traveller", F + "Condition"),
        "mock:x",
        0.9,
        1,
    )
    assert read.fallback == F + "Failed" and read.next == F + "Think"
    assert s["Think"].goal[0].op == "isAssigned" and s["Think"].on_unreachable == F + "Failed"
    assert s["Think"].on_incomplete == F + "Failed"
    branch = s["Branch"]
    assert [b.next for b in branch.branches] == [F + "Act", F + "Pick"]
    assert branch.branches[1].when[0].value == (F + "Silver", F + "Bronze")
    assert branch.otherwise == F + "Failed"
    act = s["Act"]
    assert act.tool == F + "book" and act.on_error == F + "Failed" and act.retries == 2
    assert act.on_unsatisfied == F + "Failed"
    assert [(b.arg, b.property, b.focus) for b in act.bindings] == [
        ("who", None, True),
        ("tier", F + "tier", False),
        ("note", F + "ref", False),
    ]
    pick = s["Pick"]
    assert pick.candidates is not None and pick.candidates.path == (F + "hasOption",)
    assert pick.candidates.where[0].op == "atMost"
    assert (pick.rank_by, pick.selects, pick.confidence) == (
        "the traveller's stated preference",
        F + "chosen",
        0.8,
    )
    nest = s["Nest"]
    assert nest.workflow == F + "Sub"
    assert [(o.terminal, o.next) for o in nest.outcomes] == [(F + "SubDone", F + "Tell")]
    tell = s["Tell"]
    assert (tell.narrates, tell.audience, tell.style, tell.required, tell.on_error) == (
        F + "tier",
        "agent",
        "plain",
        True,
        F + "Failed",
    )
    assert s["Done"].kind == "Step" and s["Done"].terminal
    assert s["Failed"].kind == "ActionStep" and s["Failed"].terminal
    sub = full.workflow(F + "Sub")
    wait = sub.steps[F + "SubWait"]
    assert (wait.awaits, wait.timeout, wait.on_timeout) == (
        (F + "approved",),
        4 * 3600.0,
        F + "SubFailed",
    )
    cand = sub.steps[F + "SubPick"].candidates
    assert cand is not None and cand.class_iri == F + "Option"


def test_cds_service(full: Ontology) -> None:
    svc = full.service("full")
    assert (svc.hook, svc.custom_hook, svc.title, svc.workflow, svc.usage_requirements) == (
        "order-sign",
        False,
        "Full",
        F + "Flow",
        "Needs a traveller.",
    )
    assert [(p.key, p.query) for p in svc.prefetch] == [
        ("patient", "Patient/{{context.patientId}}")
    ]
    assert [(t.resource_type, t.fhir_path) for t in svc.text] == [("Encounter", "reasonCode.text")]
    assert [c.summary for c in svc.cards][:3] == ["Gold", "Failed", "Assigned"]  # document order
    each = svc.cards[3]
    assert each.for_each == ((F + "hasDraft",),)
    assert [(c.path, c.op, c.value) for c in each.each_where] == [
        ((F + "stayNights",), "atLeast", 7)
    ]
    assert each.detail == "Booked: {{instance.bookedItem}}."
    assert dict(each.variables) == {
        "instance.stayNights": F + "stayNights",
        "focus.code": F + "code",
        "instance.bookedItem": F + "bookedItem",
    }
    assert each.suggestions[0].cites is None
    gold = svc.cards[0]
    assert gold.selection_behavior == "at-most-one" and gold.indicator == "critical"
    suggestion, swap, call_back, noted = gold.suggestions
    assert (call_back.action_type, call_back.cites) == ("create", None)
    assert len(call_back.activities) == 1
    assert [c.path for c in call_back.when] == [(F + "tier",)]
    assert (noted.action_type, noted.activities) == ("none", ())
    assert (suggestion.label, suggestion.action_type, suggestion.cites) == (
        "Remove the draft",
        "delete",
        F + "hasDraft",
    )
    assert (swap.action_type, swap.no_alternative) == ("update", "Nothing to book instead")
    assert swap.alternatives == (
        AlternativeDecl(
            replaces=("http://example.org/cs|card",),
            medication="http://example.org/cs|arr",
            display="Arrhythmia",
            keep_dosage=True,
        ),
        AlternativeDecl(
            replaces=("http://example.org/cs|card2",),
            medication=None,
            display=None,
            advice="Ask the traveller",
        ),
        AlternativeDecl(
            replaces=("http://example.org/cs|card",),
            medication="http://example.org/cs|arr",
            display="Arrhythmia",
            # the declared dosage, as the swapped-in order carries it (keys sorted)
            dosage='{"doseAndRate": [{"doseQuantity": {"value": 1}}], "text": "once", '
            '"timing": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}}}',
        ),
    )
    assert svc.cards[1].terminal == F + "Failed"
    assert svc.cards[3].line == "{{instance.stayNights}} nights"
    (combined,) = full.combined.values()
    assert (combined.id, combined.hook, combined.members, combined.max_lines) == (
        "full-combined",
        "order-sign",
        ("full",),
        2,
    )
    assert full.properties[F + "hasCondition"].known_outside == (
        "http://example.org/vs/respiratory",
    )
    (action,) = svc.system_actions
    assert (action.action_type, action.description, action.cites, action.terminal) == (
        "delete",
        "Drop the draft.",
        F + "hasDraft",
        F + "Done",
    )
    assert [(c.path, c.op, c.value) for c in action.when] == [((F + "tier",), "is", F + "Gold")]


def test_version_and_digest(full: Ontology) -> None:
    assert full.version == "9.9.9"
    assert len(full.digest) == 64
    again = load_ontology([FULL], registry=REGISTRY)
    assert again.digest == full.digest


def test_digest_changes_with_content_and_version_falls_back_to_it(
    ttl: Callable[[str], Path],
) -> None:
    a = load_ontology([ttl(":A a horis:Class .")])
    b = load_ontology([ttl(":B a horis:Class .")])
    assert a.digest != b.digest
    assert a.version == f"sha256:{a.digest[:12]}"


def test_several_files_load_as_one_ontology_with_their_namespaces(
    ttl: Callable[[str], Path],
) -> None:
    other = ttl(":Extra a horis:Class .").read_text().replace("example.org/t#", "example.org/u#")
    second = ttl("")
    second.write_text(other, encoding="utf-8")
    both = load_ontology([TRIAGE, second])
    assert both.namespace == "https://horismos.dev/example/triage#"
    assert both.namespaces == ("https://horismos.dev/example/triage#", "https://example.org/u#")
    assert both.resolve("Extra") == "https://example.org/u#Extra"
    assert both.sources == (str(TRIAGE), str(second))


def test_resolve_is_unambiguous_or_an_error(ttl: Callable[[str], Path]) -> None:
    first = ttl(":Patient a horis:Class .")
    second = ttl("")
    second.write_text(
        first.read_text().replace("example.org/t#", "example.org/u#"), encoding="utf-8"
    )
    o = load_ontology([first, second])
    with pytest.raises(KeyError, match="ambiguous"):
        o.resolve("Patient")
    assert (
        o.resolve("Patient", namespace="https://example.org/u#") == "https://example.org/u#Patient"
    )
    assert o.resolve("https://example.org/t#Patient") == "https://example.org/t#Patient"
    with pytest.raises(KeyError, match="not declared"):
        o.resolve("Nobody")


def test_a_class_used_across_files_resolves(ttl: Callable[[str], Path]) -> None:
    a = ttl(":Person a horis:Class .")
    b = ttl(":name a horis:Property ; horis:domain :Person ; horis:range xsd:string .")
    o = load_ontology([a, b])
    assert o.properties_of("https://example.org/t#Person")[0].name == "name"


def test_default_paths_are_the_bundled_deployments_without_the_vocabulary() -> None:
    paths = default_ontology_paths()
    assert TRIAGE in paths
    assert all(p.name != "horis.ttl" for p in paths)
    assert load_ontology(paths).service("horismos-triage").hook == "encounter-start"


def test_naming_the_vocabulary_file_is_harmless() -> None:
    o = load_ontology([TRIAGE.parent / "horis.ttl", TRIAGE])
    assert o.sources == (str(TRIAGE),)


@pytest.mark.parametrize(
    ("binding", "accepted"),
    [
        ("python:json.dumps", True),
        ("python:no_such_module_xyz.run", False),
        ("python:json.no_such_function", False),
        ("python:registered.fn", True),
        ("rust:book", True),
        ("rust:unregistered", False),
        ("https://api.example.org/x", True),
        ("http://127.0.0.1:9/x", True),
        ("mcp://server/tool", True),
        ("mcp://server", False),
        ("ftp://x/y", False),
        ("fhir:commit", False),  # without horis:commits
    ],
)
def test_tool_bindings_are_checked_at_load(
    ttl: Callable[[str], Path], binding: str, accepted: bool
) -> None:
    path = ttl(f':t a horis:Tool ; horis:binding "{binding}" .')
    registry: dict[str, Callable[..., object]] = {**REGISTRY, "registered.fn": print}
    if accepted:
        assert load_ontology([path], registry=registry).tools["https://example.org/t#t"]
    else:
        with pytest.raises(OntologyError) as err:
            load_ontology([path], registry=registry)
        (problem,) = err.value.problems
        assert (problem.code, problem.node) == ("binding", "https://example.org/t#t")


@pytest.mark.parametrize(
    ("binding", "accepted"),
    [
        ("python:json.dumps", True),
        ("rust:book", True),
        ("https://api.example.org/x", False),  # it leaves the process
        ("mcp://server/tool", False),
    ],
)
def test_a_pure_tool_must_run_in_the_process(
    ttl: Callable[[str], Path], binding: str, accepted: bool
) -> None:
    path = ttl(f':t a horis:Tool ; horis:binding "{binding}" ; horis:pure true .')
    if accepted:
        assert load_ontology([path], registry=REGISTRY).tools["https://example.org/t#t"].pure
    else:
        with pytest.raises(OntologyError) as err:
            load_ontology([path], registry=REGISTRY)
        (problem,) = err.value.problems
        assert problem.code == "binding" and "horis:pure" in problem.message


def test_a_tool_is_not_pure_unless_declared(ttl: Callable[[str], Path]) -> None:
    path = ttl(':t a horis:Tool ; horis:binding "python:json.dumps" .')
    assert not load_ontology([path]).tools["https://example.org/t#t"].pure


_CREATE = (
    ':t a horis:Tool ; horis:takes [ horis:arg [ horis:name "note" ; horis:type xsd:string ] ] ;'
    ' horis:binding "fhir:commit" ; horis:commits [ horis:resourceType "Communication" ;'
    ' horis:operation horis:{operation} ; horis:scope "user/Communication.write" {more} ] .'
)


@pytest.mark.parametrize(
    ("operation", "more", "message"),
    [
        ("Create", "", "needs horis:template"),
        ("Create", "; horis:template '[1, 2]'", "must be a JSON object"),
        ("Create", "; horis:template '{ nope'", "is not a JSON object"),
        ("Create", """; horis:template '{"resourceType": "Task"}'""", "is a Task, but"),
        ("Create", """; horis:template '{"a": "{{secret.x}}"}'""", "unknown placeholder"),
        ("Update", "; horis:template '{}'", "applies to horis:Create only"),
        ("Patch", "", "needs horis:element"),
    ],
)
def test_commit_operations_are_checked_at_load(
    ttl: Callable[[str], Path], operation: str, more: str, message: str
) -> None:
    path = ttl(_CREATE.format(operation=operation, more=more))
    with pytest.raises(OntologyError) as err:
        load_ontology([path])
    assert any(message in p.message for p in err.value.problems), err.value.problems


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ('"5s"', 5.0),
        ('"500ms"', 0.5),
        ('"PT5S"', 5.0),
        ('"PT1M30S"', 90.0),
        ('"1h"', 3600.0),
        ("3", 3.0),
    ],
)
def test_timeouts(ttl: Callable[[str], Path], text: str, seconds: float) -> None:
    path = ttl(f':t a horis:Tool ; horis:binding "mcp://a/b" ; horis:timeout {text} .')
    assert load_ontology([path]).tools["https://example.org/t#t"].timeout == seconds


def test_digest_ignores_formatting_and_order(ttl: Callable[[str], Path]) -> None:
    a = ttl(
        ":p a horis:Property ; horis:domain :A ; horis:range xsd:string ;\n"
        '   horis:fromFhir [ horis:resourceType "X" ; horis:fhirPath "a" ] .\n'
        ":A a horis:Class ."
    )
    b = ttl(
        ":A a horis:Class .\n"
        ':p horis:fromFhir [ horis:fhirPath "a" ; horis:resourceType "X" ] ;\n'
        "   horis:range xsd:string ; a horis:Property ; horis:domain :A ."
    )
    assert load_ontology([a]).digest == load_ontology([b]).digest


@pytest.mark.parametrize(
    ("text", "seconds"),
    [('"PT6H"', 6 * 3600), ('"P90D"', 90 * 86400), ('"P2W"', 14 * 86400), ('"PT30M"', 1800)],
)
def test_max_age_is_an_iso_8601_duration(
    ttl: Callable[[str], Path], text: str, seconds: float
) -> None:
    path = ttl(
        ":A a horis:Class .\n"
        ":p a horis:Property ; horis:domain :A ; horis:range xsd:decimal ;\n"
        '   horis:fromFhir [ horis:resourceType "Observation" ; horis:fhirPath "valueQuantity" ;\n'
        f"                    horis:maxAge {text} ] ."
    )
    (mapping,) = load_ontology([path]).properties["https://example.org/t#p"].from_fhir
    assert mapping.max_age == seconds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('"P3M"', "years and months have no fixed length"),
        ('"P1Y"', "years and months have no fixed length"),
        ('"6h"', "ISO 8601 duration"),
        ('"PT0S"', "positive ISO 8601 duration"),
        ("6", "ISO 8601 duration"),
    ],
)
def test_a_max_age_that_is_no_fixed_iso_duration_is_a_load_error(
    ttl: Callable[[str], Path], text: str, says: str
) -> None:
    path = ttl(
        ":A a horis:Class .\n"
        ":p a horis:Property ; horis:domain :A ; horis:range xsd:decimal ;\n"
        '   horis:fromFhir [ horis:resourceType "Observation" ; horis:fhirPath "valueQuantity" ;\n'
        f"                    horis:maxAge {text} ] ."
    )
    with pytest.raises(OntologyError) as err:
        load_ontology([path])
    (problem,) = err.value.problems
    assert problem.code == "literal-type" and says in problem.message
    assert problem.path == "horis:fromFhir/horis:maxAge"


@pytest.mark.parametrize(
    ("declaration", "says"),
    [
        ('horis:cardinality "0..1" ; horis:absentMeans horis:None', "record lists"),
        ("horis:absentMeans horis:Latest", "horis:None or horis:Unknown"),
        ('horis:absentMeans "none"', "horis:None or horis:Unknown"),
    ],
)
def test_absent_means_is_none_for_record_lists_or_unknown(
    ttl: Callable[[str], Path], declaration: str, says: str
) -> None:
    path = ttl(
        ":A a horis:Class .\n"
        f":p a horis:Property ; horis:domain :A ; horis:range xsd:decimal ; {declaration} ."
    )
    with pytest.raises(OntologyError) as err:
        load_ontology([path])
    (problem,) = err.value.problems
    assert problem.code == "literal-type" and says in problem.message


def test_on_incomplete_is_an_edge_of_a_reasoning_step_only(ttl: Callable[[str], Path]) -> None:
    path = ttl(
        ":A a horis:Class .\n"
        ":W a horis:Workflow ; horis:startsAt :S ; horis:focus :A .\n"
        ":S a horis:ActionStep ; horis:onIncomplete :E ; horis:terminal true .\n"
        ":E a horis:Step ; horis:terminal true ."
    )
    with pytest.raises(OntologyError) as err:
        load_ontology([path])
    assert any(
        p.code == "not-understood" and "horis:onIncomplete" in p.message for p in err.value.problems
    )
