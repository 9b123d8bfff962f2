"""The compiled ontology: frozen values that every other layer reads.

The loader (``app.ontology.loader``) turns Turtle into these objects; nothing else builds them
except tests. Every identifier is a full IRI string; ``name`` is the IRI's local name, used in
JSON (structured input, schemas, outcomes). Turtle terms are given next to each field as
``horis:term`` so these modules double as the vocabulary reference (docs/vocabulary.md expands
it). This module holds the whole, ``Ontology``, and its lookups; the parts live by concept in
``names``, ``rules``, ``classes``, ``tools``, ``workflows`` and ``services``, and every one of
them can be imported from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.ontology import product_names
from app.ontology.classes import (
    AbsentMeans,
    AggregateDef,
    AggregateFunction,
    Cardinality,
    ClassDef,
    ConceptMapDef,
    Datatype,
    DatedDef,
    EarlierMember,
    FhirMapping,
    Individual,
    MappedCode,
    MapTarget,
    Pick,
    PropertyDef,
    Resolution,
    SharingDef,
    SpanDef,
    ValueSetDef,
)
from app.ontology.names import HORIS, XSD, humanise, local_name
from app.ontology.rules import OPERATORS, Conclusion, Condition, Operator, Rule, Value
from app.ontology.services import (
    DEFAULT_CLOCK_SKEW,
    AlternativeDecl,
    CardDecl,
    CdsServiceDef,
    CombinedServiceDef,
    PrefetchTemplate,
    SuggestionDecl,
    SystemActionDecl,
    TextSource,
)
from app.ontology.tools import AdapterCommit, CommitOperation, EffectDecl, ToolArg, ToolDef
from app.ontology.workflows import (
    ArgBinding,
    Branch,
    CandidateQuery,
    StepDef,
    StepKind,
    SubflowOutcome,
    WorkflowDef,
)

__all__ = [
    "DEFAULT_CLOCK_SKEW",
    "HORIS",
    "OPERATORS",
    "XSD",
    "AbsentMeans",
    "AdapterCommit",
    "AggregateDef",
    "AggregateFunction",
    "AlternativeDecl",
    "ArgBinding",
    "Branch",
    "CandidateQuery",
    "CardDecl",
    "Cardinality",
    "CdsServiceDef",
    "ClassDef",
    "CommitOperation",
    "ConceptMapDef",
    "Conclusion",
    "Condition",
    "Datatype",
    "DatedDef",
    "EarlierMember",
    "EffectDecl",
    "FhirMapping",
    "Individual",
    "MapTarget",
    "MappedCode",
    "MappingCodes",
    "Ontology",
    "OntologyPart",
    "Operator",
    "Pick",
    "PrefetchTemplate",
    "PropertyDef",
    "Resolution",
    "Rule",
    "SharingDef",
    "SpanDef",
    "StepDef",
    "StepKind",
    "SubflowOutcome",
    "SuggestionDecl",
    "SystemActionDecl",
    "TextSource",
    "ToolArg",
    "ToolDef",
    "Value",
    "ValueSetDef",
    "WorkflowDef",
    "humanise",
    "local_name",
]


@dataclass(frozen=True, kw_only=True)
class OntologyPart:
    """One ``owl:Ontology`` among the files loaded together (a deployment and each file it
    imports): its IRI, ``owl:versionInfo``, the digest of its own files' triples, its files."""

    iri: str
    version: str | None
    digest: str
    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Ontology:
    """Everything loaded from one or more Turtle files, checked and indexed."""

    namespace: str  # the deployment namespace local names resolve against (first file's base)
    version: str  # owl:versionInfo of the ontology, else a content digest
    digest: str  # sha256 of the canonical Turtle: identifies exactly what a run ran against
    classes: dict[str, ClassDef]
    individuals: dict[str, Individual]
    properties: dict[str, PropertyDef]
    rules: tuple[Rule, ...]
    tools: dict[str, ToolDef]
    workflows: dict[str, WorkflowDef]
    services: dict[str, CdsServiceDef]
    #: combined services (``horis:CombinedService``), by IRI
    combined: dict[str, CombinedServiceDef] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # the files it was loaded from
    namespaces: tuple[str, ...] = ()  # every deployment file's default namespace, in load order
    unreachable_steps: tuple[str, ...] = ()  # declared steps no workflow's start reaches
    #: FHIR value sets by canonical URL, read from the ``valuesets`` folders beside the files
    value_sets: dict[str, ValueSetDef] = field(default_factory=dict)
    #: earlier expansions of those value sets (``valuesets/history``), by canonical URL
    value_set_history: dict[str, tuple[ValueSetDef, ...]] = field(default_factory=dict)
    #: FHIR concept maps by canonical URL, read from the ``conceptmaps`` folders beside the files
    concept_maps: dict[str, ConceptMapDef] = field(default_factory=dict)
    #: each ``owl:Ontology`` loaded (a file without one is a part named by its file URI), in
    #: load order: the deployment's own first, then what it imports
    parts: tuple[OntologyPart, ...] = ()
    #: the file each named node was first read from (relative to the first file's folder), so
    #: a problem about a node of an imported file names that file
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _index: _Index = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", _Index.build(self))

    # --- lookups ---------------------------------------------------------------------------

    def resolve(self, name: str, *, namespace: str | None = None) -> str:
        """A local name or IRI → the IRI of a declared node.

        A full IRI must be declared. A local name resolves to ``namespace + name`` when that is
        declared, else to the one declared node with that local name; a local name declared in
        several namespaces is ambiguous (``KeyError``) unless ``namespace`` picks one.
        """
        known = self._index.names
        if name in self._index.all_iris:
            return name
        if namespace is not None and namespace + name in self._index.all_iris:
            return namespace + name
        candidates = known.get(name, ())
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise KeyError(f"{name!r} is not declared in the ontology")
        raise KeyError(f"{name!r} is ambiguous: {', '.join(candidates)}; use the full IRI")

    def namespace_of(self, iri: str) -> str:
        """The namespace part of an IRI (everything up to the local name)."""
        return iri[: len(iri) - len(local_name(iri))]

    def is_subclass(self, c: str, ancestor: str) -> bool:
        """Whether ``c`` is ``ancestor`` or below it (reflexive, transitive)."""
        return ancestor in self._index.ancestors.get(c, (c,))

    def ancestors(self, c: str) -> tuple[str, ...]:
        """``c`` and every class above it, nearest first."""
        return self._index.ancestors.get(c, (c,))

    def subclasses(self, c: str) -> tuple[str, ...]:
        """The closed tree under ``c``, ``c`` included, in a stable (pre-order) order."""
        return self._index.subtree.get(c, (c,))

    def class_for_code(self, coding: str) -> str | None:
        """The class whose ``horis:code`` is ``"system|code"``, else the most specific class
        with a ``horis:inValueSet`` that has it as a member, if any."""
        found = self._index.class_codes.get(coding)
        if found is not None:
            return found
        best: str | None = None
        for iri, codes in self._index.value_set_classes:
            if coding in codes and (best is None or self.is_subclass(iri, best)):
                best = iri
        return best

    def earlier_members(self, coding: str) -> tuple[EarlierMember, ...]:
        """The classes ``"system|code"`` belongs to only through an earlier expansion of one of
        their value sets (none when a current expansion or a class's own code lists it)."""
        return self._index.earlier.get(coding, ())

    def earlier_expansions(self, coding: str) -> tuple[EarlierMember, ...]:
        """The value sets only an earlier expansion of which lists ``"system|code"`` (each an
        ``EarlierMember`` with an empty ``class_iri``): what ``horis:inValueSet`` conditions
        and mapping filters count too, with a note."""
        return self._index.earlier_any.get(coding, ())

    def mapping_codes(self, m: FhirMapping) -> MappingCodes:
        """The codings ``m`` recognises (its ``horis:coding`` values and the current members of
        its value sets) and their code systems: indexed when the ontology is built, for each
        of its properties' mappings; computed here for a mapping made later."""
        found = self._index.mapping_codes.get(id(m))
        if found is not None and found.mapping is m:  # the same object, not a reused id
            return found
        return MappingCodes.of(m, self.value_sets)

    def translations(self, coding: str) -> tuple[MappedCode, ...]:
        """What the deployment's concept maps translate ``"system|code"`` to."""
        return self._index.mapped.get(coding, ())

    def knows_code(self, coding: str) -> bool:
        """Whether ``"system|code"`` is named anywhere in the deployment (a class's or an
        individual's code, a value set member, a mapping's coding)."""
        return coding in self._index.known_codes

    def known_outside(self, prop: PropertyDef, coding: str) -> bool:
        """Whether ``"system|code"`` is in a value set ``prop`` declares ``horis:knownOutside``:
        a code the deployment knows is none of its own (an opioid to a medication-safety
        check that has no rule about opioids)."""
        return any(
            coding in self.value_sets[url].codes
            for url in prop.known_outside
            if url in self.value_sets
        )

    def listed_brand_of(
        self, prop: PropertyDef, name: str, codes: Iterable[str] = ()
    ) -> str | None:
        """For a branded product name (``Diazepam [Valium]``): a product with the same
        ingredients (``diazepam 5 MG Oral Tablet``) that a value set ``prop`` reads lists (its
        range's classes', or those its conditions test), else None. A record so named that no
        list holds by code may be one of ours: it is unread, never none of ours."""
        if not product_names.branded(name):
            return None
        found = product_names.ingredients(name)
        if not found:
            return None
        urls = {
            u
            for c in self.subclasses(prop.range)
            if (k := self.classes.get(c))
            for u in k.value_sets
        }
        urls.update(str(c.value) for c in self.conditions_on(prop.iri) if c.op == "inValueSet")
        if any(self.in_value_set(c, u, earlier=True) for c in codes for u in urls):
            return None  # a member after all (a supplement, an earlier expansion)
        for url in sorted(urls):
            listed = self._index.products.get(url, {}).get(found)
            if listed is not None:
                return listed
        return None

    def names_system(self, system: str) -> bool:
        """Whether any code the deployment names is of code system ``system``."""
        return system in self._index.code_systems

    def conditions_on(self, property_iri: str) -> tuple[Condition, ...]:
        """The conditions (rules, steps, cards) that compare a value of ``property_iri``."""
        return self._index.conditions_on.get(property_iri, ())

    def in_value_set(self, coding: str, canonical: str, *, earlier: bool = False) -> bool:
        """Whether ``"system|code"`` is a member of the value set ``canonical`` (with
        ``earlier``, of its current expansion or of an earlier one)."""
        vs = self.value_sets.get(canonical)
        if vs is not None and coding in vs.codes:
            return True
        return earlier and any(m.url == canonical for m in self.earlier_expansions(coding))

    def individual_for_code(self, coding: str) -> str | None:
        """The enumeration individual whose ``horis:code`` is ``"system|code"``, if any."""
        return self._index.individual_codes.get(coding)

    def class_of(self, iri: str) -> str | None:
        """The class of a named individual."""
        ind = self.individuals.get(iri)
        return ind.class_iri if ind else None

    def workflow(self, name_or_iri: str) -> WorkflowDef:
        """A workflow by IRI or local name (``KeyError`` if unknown or ambiguous)."""
        if name_or_iri in self.workflows:
            return self.workflows[name_or_iri]
        matches = [w for w in self.workflows.values() if w.name == name_or_iri]
        if len(matches) == 1:
            return matches[0]
        raise KeyError(f"workflow {name_or_iri!r} is {'ambiguous' if matches else 'not declared'}")

    def step(self, iri: str) -> StepDef:
        """A step of any workflow by IRI."""
        return self._index.steps[iri]

    def service(self, id: str) -> CdsServiceDef:
        """A CDS service by its ``horis:id`` (or IRI)."""
        for s in self.services.values():
            if s.id == id or s.iri == id:
                return s
        raise KeyError(f"CDS service {id!r} is not declared")

    def rules_for(self, property_iri: str) -> tuple[Rule, ...]:
        """The rules concluding ``property_iri``, in document order."""
        return self._index.rules_by_property.get(property_iri, ())

    def properties_of(self, class_iri: str) -> tuple[PropertyDef, ...]:
        """Properties an instance of ``class_iri`` may carry (domain is the class or above)."""
        ancestors = set(self.ancestors(class_iri))
        return tuple(p for p in self.properties.values() if p.domain in ancestors)


def _products(o: Ontology, outside: set[str]) -> dict[str, dict[frozenset[str], str]]:
    """Per value set, each listed product's ingredient names → its display (value sets named
    as outside a property's lists left out)."""
    out: dict[str, dict[frozenset[str], str]] = {}
    for vs in o.value_sets.values():
        if vs.url in outside:
            continue
        mine = out.setdefault(vs.url, {})
        for display in sorted(vs.displays):
            found = product_names.ingredients(display)
            if found:
                mine.setdefault(found, display)
    return out


def _conditions_by_property(
    o: Ontology, steps: Mapping[str, StepDef]
) -> dict[str, tuple[Condition, ...]]:
    """Every condition of the rules, steps (goals, requirements, branches) and cards, by the
    property its path ends at: what a value of that property is compared with."""
    found: dict[str, list[Condition]] = {}
    groups: list[Iterable[Condition]] = [r.when for r in o.rules]
    for s in steps.values():
        groups.append(tuple(c for _pred, c in s.conditions()))
    for svc in o.services.values():
        groups.extend(c.when for c in svc.cards)
        groups.extend(s.when for c in svc.cards for s in c.suggestions)
    groups.extend(p.aggregate.where for p in o.properties.values() if p.aggregate is not None)
    for group in groups:
        for c in group:
            found.setdefault(c.path[-1], []).append(c)
    return {k: tuple(v) for k, v in found.items()}


@dataclass(frozen=True, slots=True)
class MappingCodes:
    """What one ``horis:fromFhir`` mapping recognises a record by (``Ontology.mapping_codes``)."""

    mapping: FhirMapping
    #: its ``horis:coding`` values and the current members of its ``horis:inValueSet`` sets
    codes: frozenset[str]
    #: the code systems of ``codes``
    systems: frozenset[str]

    @staticmethod
    def of(m: FhirMapping, value_sets: Mapping[str, ValueSetDef]) -> MappingCodes:
        codes = frozenset(m.codings).union(
            *(value_sets[url].codes for url in m.value_sets if url in value_sets)
        )
        return MappingCodes(m, codes, frozenset(c.split("|", 1)[0] for c in codes))


@dataclass(frozen=True)
class _Index:
    """Lookup tables computed once from an Ontology's fields."""

    names: dict[str, tuple[str, ...]]
    all_iris: frozenset[str]
    ancestors: dict[str, tuple[str, ...]]
    subtree: dict[str, tuple[str, ...]]
    class_codes: dict[str, str]
    individual_codes: dict[str, str]
    steps: dict[str, StepDef]
    rules_by_property: dict[str, tuple[Rule, ...]]
    #: (class IRI, member codes) of every class with ``horis:inValueSet``, in document order
    value_set_classes: tuple[tuple[str, frozenset[str]], ...] = ()
    #: every "system|code" the deployment names: class and individual codes, value set members,
    #: mapping codings
    known_codes: frozenset[str] = frozenset()
    #: codes only earlier expansions of classes' value sets list → those classes
    earlier: dict[str, tuple[EarlierMember, ...]] = field(default_factory=dict)
    #: codes only earlier expansions of any value set list → those value sets
    earlier_any: dict[str, tuple[EarlierMember, ...]] = field(default_factory=dict)
    #: source codes of the deployment's concept maps → their targets
    mapped: dict[str, tuple[MappedCode, ...]] = field(default_factory=dict)
    #: the code systems of ``known_codes``
    code_systems: frozenset[str] = frozenset()
    #: property IRI → the conditions anywhere in the deployment whose path ends at it
    conditions_on: dict[str, tuple[Condition, ...]] = field(default_factory=dict)
    #: per value set, the ingredient names of each product it lists
    #: (``app.ontology.product_names``) → one listed display with them
    products: dict[str, dict[frozenset[str], str]] = field(default_factory=dict)
    #: each property's ``horis:fromFhir`` mappings by identity → what it recognises a record by
    #: (``Ontology.mapping_codes``): asked for every record a mapping looks at
    mapping_codes: dict[int, MappingCodes] = field(default_factory=dict)
    #: derived JSON Schemas by extracted classes (filled by ``app.ontology.schema``)
    schemas: dict[tuple[str, ...], dict[str, object]] = field(default_factory=dict)

    @staticmethod
    def build(o: Ontology) -> _Index:
        steps = {iri: s for w in o.workflows.values() for iri, s in w.steps.items()}
        iris: list[str] = [
            *o.classes,
            *o.individuals,
            *o.properties,
            *(r.iri for r in o.rules),
            *o.tools,
            *o.workflows,
            *steps,
            *o.services,
        ]
        names: dict[str, list[str]] = {}
        for iri in dict.fromkeys(iris):
            names.setdefault(local_name(iri), []).append(iri)
        ancestors: dict[str, tuple[str, ...]] = {}

        def up(c: str, trail: tuple[str, ...]) -> tuple[str, ...]:
            if c in ancestors:
                return ancestors[c]
            out = [c]
            cls = o.classes.get(c)
            for parent in cls.parents if cls else ():
                if parent not in trail:
                    out.extend(a for a in up(parent, (*trail, c)) if a not in out)
            ancestors[c] = tuple(out)
            return ancestors[c]

        children: dict[str, list[str]] = {}
        for c in o.classes.values():
            up(c.iri, ())
            for parent in c.parents:
                children.setdefault(parent, []).append(c.iri)
        subtree: dict[str, tuple[str, ...]] = {}
        for root in o.classes:
            order: list[str] = []
            stack = [root]
            while stack:
                n = stack.pop()
                if n in order:
                    continue
                order.append(n)
                stack.extend(reversed(children.get(n, [])))
            subtree[root] = tuple(order)
        by_prop: dict[str, list[Rule]] = {}
        for r in o.rules:
            for prop in dict.fromkeys(t.property for t in r.then):
                by_prop.setdefault(prop, []).append(r)
        # a value set a property names as outside its lists (horis:knownOutside) names codes
        # the deployment knows are not its own, not codes it reads
        outside = {u for p in o.properties.values() for u in p.known_outside}
        known = frozenset(
            {
                *(code for c in o.classes.values() for code in c.codes),
                *(code for i in o.individuals.values() for code in i.codes),
                *(
                    code
                    for vs in o.value_sets.values()
                    if vs.url not in outside
                    for code in vs.codes
                ),
                *(code for p in o.properties.values() for m in p.from_fhir for code in m.codings),
            }
        )
        earlier: dict[str, list[EarlierMember]] = {}
        class_codes = {code: c.iri for c in o.classes.values() for code in c.codes}
        for c in o.classes.values():
            for url in c.value_sets:
                current = o.value_sets.get(url)
                for old in o.value_set_history.get(url, ()) if current is not None else ():
                    assert current is not None and old.version is not None
                    for code in old.codes - current.codes:
                        if code in class_codes:
                            continue
                        earlier.setdefault(code, []).append(
                            EarlierMember(
                                class_iri=c.iri,
                                url=url,
                                version=current.version,
                                earlier_version=old.version,
                                derived=old.derived,
                            )
                        )
        earlier_any: dict[str, list[EarlierMember]] = {}
        for url, olds in o.value_set_history.items():
            current = o.value_sets.get(url)
            for old in olds if current is not None else ():
                assert current is not None and old.version is not None
                for code in old.codes - current.codes:
                    earlier_any.setdefault(code, []).append(
                        EarlierMember(
                            class_iri="",
                            url=url,
                            version=current.version,
                            earlier_version=old.version,
                            derived=old.derived,
                        )
                    )
        mapped: dict[str, list[MappedCode]] = {}
        for cm in o.concept_maps.values():
            for source, targets in cm.mappings.items():
                mapped.setdefault(source, []).extend(
                    MappedCode(
                        target=t.target,
                        equivalence=t.equivalence,
                        map_url=cm.url,
                        map_version=cm.version,
                    )
                    for t in targets
                    if t.target
                )
        return _Index(
            earlier={k: tuple(v) for k, v in earlier.items()},
            earlier_any={k: tuple(v) for k, v in earlier_any.items()},
            mapped={k: tuple(v) for k, v in mapped.items()},
            known_codes=known,
            code_systems=frozenset(code.split("|", 1)[0] for code in known),
            products=_products(o, outside),
            mapping_codes={
                id(m): MappingCodes.of(m, o.value_sets)
                for p in o.properties.values()
                for m in p.from_fhir
            },
            conditions_on=_conditions_by_property(o, steps),
            names={k: tuple(v) for k, v in names.items()},
            all_iris=frozenset(iris),
            ancestors=ancestors,
            subtree=subtree,
            class_codes={code: c.iri for c in o.classes.values() for code in c.codes},
            individual_codes={code: i.iri for i in o.individuals.values() for code in i.codes},
            steps=steps,
            rules_by_property={k: tuple(v) for k, v in by_prop.items()},
            value_set_classes=tuple(
                (c.iri, frozenset().union(*(o.value_sets[u].codes for u in c.value_sets)))
                for c in o.classes.values()
                if c.value_sets and all(u in o.value_sets for u in c.value_sets)
            ),
        )
