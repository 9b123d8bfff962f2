"""Build ``Ontology`` objects in code for World tests (no Turtle needed)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from app.ontology.model import (
    XSD,
    ClassDef,
    Conclusion,
    Condition,
    Individual,
    Ontology,
    PropertyDef,
    Rule,
    Value,
)

NS = "https://example.org/t#"


def iri(name: str) -> str:
    return name if "://" in name else NS + name


def cls(name: str, *parents: str, one_of: tuple[str, ...] = ()) -> ClassDef:
    return ClassDef(
        iri=iri(name),
        name=name,
        parents=tuple(iri(p) for p in parents),
        one_of=tuple(iri(x) for x in one_of),
    )


def prop(
    name: str,
    domain: str,
    range_: str,
    *,
    cardinality: str = "0..*",
    one_of: tuple[str, ...] = (),
    **kw: Any,
) -> PropertyDef:
    rng = XSD + range_[4:] if range_.startswith("xsd:") else iri(range_)
    for k in ("min", "max"):
        if k in kw and kw[k] is not None:
            kw[k] = Decimal(str(kw[k]))
    return PropertyDef(
        iri=iri(name),
        name=name,
        domain=iri(domain),
        range=rng,
        cardinality=cardinality,  # type: ignore[arg-type]
        one_of=one_of if range_.startswith("xsd:") else tuple(iri(x) for x in one_of),
        **kw,
    )


def cond(path: str | tuple[str, ...], op: str, value: Any) -> Condition:
    p = (path,) if isinstance(path, str) else path
    if op == "isA" or (op in ("is", "isNot") and isinstance(value, str) and value[:1].isupper()):
        value = iri(value)
    if op in ("in", "notIn"):
        value = tuple(iri(v) if isinstance(v, str) and v[:1].isupper() else v for v in value)
    return Condition(path=tuple(iri(x) for x in p), op=op, value=value)  # type: ignore[arg-type]


def rule(
    name: str, about: str, when: list[Condition], then: list[tuple[str, Value]], order: int = 0
) -> Rule:
    return Rule(
        iri=iri(name),
        name=name,
        about=iri(about),
        when=tuple(when),
        then=tuple(
            Conclusion(
                property=iri(p), value=iri(v) if isinstance(v, str) and v[:1].isupper() else v
            )
            for p, v in then
        ),
        order=order,
    )


def ontology(
    classes: list[ClassDef],
    properties: list[PropertyDef],
    rules: list[Rule] = (),  # type: ignore[assignment]
    individuals: list[Individual] = (),  # type: ignore[assignment]
) -> Ontology:
    rules = [
        Rule(iri=r.iri, name=r.name, about=r.about, when=r.when, then=r.then, order=i)
        for i, r in enumerate(rules)
    ]
    return Ontology(
        namespace=NS,
        version="test",
        digest="test",
        classes={c.iri: c for c in classes},
        individuals={i.iri: i for i in individuals},
        properties={p.iri: p for p in properties},
        rules=tuple(rules),
        tools={},
        workflows={},
        services={},
    )


def individual(name: str, class_name: str) -> Individual:
    return Individual(iri=iri(name), name=name, class_iri=iri(class_name))


LEVELS = ("Immediate", "Urgent", "Standard", "NonUrgent")


def triage(resolution: str = "FirstListed") -> Ontology:
    """The triage deployment's rules (docs/examples.md), built in code."""
    classes = [
        cls("Patient"),
        cls("Symptom"),
        cls("Pain", "Symptom"),
        cls("ChestPain", "Pain"),
        cls("AbdominalPain", "Pain"),
        cls("Headache", "Pain"),
        cls("Dyspnea", "Symptom"),
        cls("Fever", "Symptom"),
        cls("Syncope", "Symptom"),
        cls("Unresponsive", "Symptom"),
        cls("AcuityLevel", one_of=LEVELS),
    ]
    properties = [
        prop("age", "Patient", "xsd:integer", cardinality="0..1", min=0, max=150, unit="a"),
        prop(
            "heartRate", "Patient", "xsd:decimal", cardinality="0..1", min=0, max=300, unit="/min"
        ),
        prop("respRate", "Patient", "xsd:decimal", cardinality="0..1", min=0, max=100, unit="/min"),
        prop("spo2", "Patient", "xsd:decimal", cardinality="0..1", min=0, max=100, unit="%"),
        prop(
            "systolicBP",
            "Patient",
            "xsd:decimal",
            cardinality="0..1",
            min=0,
            max=400,
            unit="mm[Hg]",
        ),
        prop(
            "temperature", "Patient", "xsd:decimal", cardinality="0..1", min=20, max=45, unit="Cel"
        ),
        prop("hasSymptom", "Patient", "Symptom"),
        prop(
            "acuity",
            "Patient",
            "AcuityLevel",
            cardinality="0..1",
            one_of=LEVELS,
            rules_only=True,
            resolution=resolution,
        ),
    ]
    sym = "hasSymptom"
    rules = [
        rule("LowSpO2", "Patient", [cond("spo2", "lessThan", 90)], [("acuity", "Immediate")]),
        rule(
            "Hypotension",
            "Patient",
            [cond("systolicBP", "lessThan", 90)],
            [("acuity", "Immediate")],
        ),
        rule(
            "SevereTachy",
            "Patient",
            [cond("heartRate", "greaterThan", 150)],
            [("acuity", "Immediate")],
        ),
        rule("Brady", "Patient", [cond("heartRate", "lessThan", 40)], [("acuity", "Immediate")]),
        rule(
            "Tachypnea", "Patient", [cond("respRate", "greaterThan", 30)], [("acuity", "Immediate")]
        ),
        rule("Bradypnea", "Patient", [cond("respRate", "lessThan", 8)], [("acuity", "Immediate")]),
        rule(
            "Unresponsive", "Patient", [cond(sym, "isA", "Unresponsive")], [("acuity", "Immediate")]
        ),
        rule(
            "TachyChestPain",
            "Patient",
            [cond("heartRate", "greaterThan", 120), cond(sym, "isA", "ChestPain")],
            [("acuity", "Immediate")],
        ),
        rule("ChestPainUrgent", "Patient", [cond(sym, "isA", "ChestPain")], [("acuity", "Urgent")]),
        rule("DyspneaUrgent", "Patient", [cond(sym, "isA", "Dyspnea")], [("acuity", "Urgent")]),
        rule("SyncopeUrgent", "Patient", [cond(sym, "isA", "Syncope")], [("acuity", "Urgent")]),
        rule(
            "Tachycardia",
            "Patient",
            [cond("heartRate", "greaterThan", 100)],
            [("acuity", "Urgent")],
        ),
        rule(
            "RespUrgent", "Patient", [cond("respRate", "greaterThan", 24)], [("acuity", "Urgent")]
        ),
        rule("SpO2Urgent", "Patient", [cond("spo2", "lessThan", 94)], [("acuity", "Urgent")]),
        rule(
            "HighFever",
            "Patient",
            [cond("temperature", "atLeast", Decimal("39.0"))],
            [("acuity", "Urgent")],
        ),
        rule(
            "ElderlyFever",
            "Patient",
            [cond("age", "atLeast", 65), cond("temperature", "atLeast", Decimal("38.0"))],
            [("acuity", "Urgent")],
        ),
        rule("PainStandard", "Patient", [cond(sym, "isA", "Pain")], [("acuity", "Standard")]),
        rule("FeverStandard", "Patient", [cond(sym, "isA", "Fever")], [("acuity", "Standard")]),
        rule(
            "Febrile",
            "Patient",
            [cond("temperature", "atLeast", Decimal("38.0"))],
            [("acuity", "Standard")],
        ),
        rule(
            "HasVitals",
            "Patient",
            [cond("heartRate", "isAssigned", True)],
            [("acuity", "NonUrgent")],
        ),
        rule("HasSymptom", "Patient", [cond(sym, "isAssigned", True)], [("acuity", "NonUrgent")]),
    ]
    inds = [individual(x, "AcuityLevel") for x in LEVELS]
    return ontology(classes, properties, rules, inds)
