"""What the World precomputes from an ontology: class ancestry, name resolution, compiled rules,
strata and the reader index (which rules read which property at which path position).

Built once per ``Ontology`` object and shared by every World over it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.ontology.model import (
    XSD,
    AggregateDef,
    Condition,
    DatedDef,
    Ontology,
    PropertyDef,
    Rule,
    SharingDef,
    SpanDef,
    Value,
    local_name,
)
from app.world.facts import StratificationError
from app.world.values import DATATYPES, NotOfType, Test, compiled_regex, make_test, normalize
from app.world.windows import WINDOW_OPERATORS


@dataclass(frozen=True, slots=True)
class CompiledCondition:
    condition: Condition
    path: tuple[str, ...]
    negative: bool  # horis:isAssigned false
    test: Test
    #: a time window (withinPast, atMostAgo, atLeastAgo): ``test`` is a stand-in, each World
    #: binds the real test to its own ``now`` (``Engine.test_of``)
    timed: bool = False


@dataclass(frozen=True, slots=True)
class CompiledAggregate:
    """A ``horis:aggregate`` as the engine evaluates it (see ``AggregateDef``)."""

    property: str
    function: str
    over: tuple[tuple[str, ...], ...]
    of: str | None
    where: tuple[CompiledCondition, ...]
    integer: bool  # the property's range is xsd:integer
    span: SpanDef | None = None  # DaysCovered: each kept instance's span and the window
    dated: DatedDef | None = None  # keep an instance dated within a window before the subject's
    sharing: SharingDef | None = None  # keep an instance with a value equal to the subject's


@dataclass(frozen=True, slots=True)
class CompiledRule:
    index: int
    rule: Rule
    about: str
    stratum: int
    conditions: tuple[CompiledCondition, ...]
    conclusions: tuple[tuple[str, Value], ...]
    #: per conclusion: a violation message when the conclusion can never pass the gate
    static_errors: tuple[tuple[str, str, str] | None, ...]
    #: the paths the activation reads (a change along one dirties it)
    reads: tuple[tuple[str, ...], ...] = ()
    #: an aggregate property's computation: its one conclusion's value is computed, not given
    aggregate: CompiledAggregate | None = None


@dataclass(frozen=True, slots=True)
class ReaderGroup:
    """Rules that read property P at path position ``depth`` after ``prefix`` (reversed)."""

    gid: int
    depth: int
    reverse_prefix: tuple[str, ...]
    rules: tuple[int, ...]


def compile_condition(
    cond: Condition, value_sets: dict[str, frozenset[str]] | None = None
) -> CompiledCondition:
    negative = cond.op == "isAssigned" and cond.value is False
    if cond.op in WINDOW_OPERATORS:
        return CompiledCondition(cond, tuple(cond.path), negative, _no_time, timed=True)
    members = (value_sets or {}).get(str(cond.value)) if cond.op == "inValueSet" else None
    test = make_test(cond.op, cond.value, members=members)
    return CompiledCondition(cond, tuple(cond.path), negative, test)


def _no_time(v: Value, anc: Any) -> bool:
    return False


class OntologyIndex:
    """Lookups the World needs on its hot path, derived from one ``Ontology``."""

    def __init__(self, onto: Ontology) -> None:
        # no reference to ``onto`` itself: the index is cached for as long as the ontology lives
        self.namespace = onto.namespace
        self.classes = dict(onto.classes)
        self.individuals = dict(onto.individuals)
        self.properties: dict[str, PropertyDef] = dict(onto.properties)
        self.object_properties = frozenset(
            p.iri for p in onto.properties.values() if p.range not in DATATYPES
        )
        self.ancestors: dict[str, frozenset[str]] = {}
        for c in onto.classes:
            self._ancestors_of(c)
        for ind in onto.individuals.values():
            self._ancestors_of(ind.class_iri)
        self._names: dict[str, dict[str, str | None]] = {}
        for kind, table in (
            ("property", onto.properties),
            ("class", onto.classes),
            ("individual", onto.individuals),
        ):
            names: dict[str, str | None] = {}
            for iri in table:
                name = local_name(iri)
                names[name] = None if name in names and names[name] != iri else iri
            self._names[kind] = names
        self.resolved_props = frozenset(
            p.iri
            for p in onto.properties.values()
            if p.single_valued and p.resolution == "FirstListed"
        )
        # a value set's members: its current expansion and its earlier ones (a code only an
        # earlier expansion lists counts; hydration notes it on the run)
        self.value_sets = {
            url: vs.codes.union(*(old.codes for old in onto.value_set_history.get(url, ())))
            for url, vs in onto.value_sets.items()
        }
        self.condition_cache: dict[Condition, CompiledCondition] = {}
        self.rules, self.recursive = _compile_rules(self, onto.rules, _aggregates(onto))
        self.readers: dict[str, tuple[ReaderGroup, ...]] = _reader_index(self.rules)
        self.strata: tuple[int, ...] = tuple(sorted({r.stratum for r in self.rules}))
        self._applicable: dict[str, tuple[int, ...]] = {}
        self.group_cache: dict[tuple[int, str], tuple[tuple[int, int], ...]] = {}
        self.single_props = frozenset(p.iri for p in onto.properties.values() if p.single_valued)

    # --- classes -----------------------------------------------------------------------

    def _ancestors_of(self, c: str, trail: tuple[str, ...] = ()) -> frozenset[str]:
        got = self.ancestors.get(c)
        if got is not None:
            return got
        out = {c}
        cdef = self.classes.get(c)
        if cdef is not None:
            for parent in cdef.parents:
                if parent not in trail:
                    out |= self._ancestors_of(parent, (*trail, c))
        result = frozenset(out)
        self.ancestors[c] = result
        return result

    def is_subclass(self, c: str, ancestor: str) -> bool:
        return ancestor in self.ancestors.get(c, frozenset((c,)))

    def subclasses(self, c: str) -> tuple[str, ...]:
        return tuple(k for k, anc in self.ancestors.items() if c in anc)

    # --- names -------------------------------------------------------------------------

    def resolve(self, kind: str, name: str) -> str | None:
        """IRI for an IRI or an unambiguous local name of a property/class/individual."""
        table: Any = {
            "property": self.properties,
            "class": self.classes,
            "individual": self.individuals,
        }[kind]
        if name in table:
            return name
        iri = self.namespace + name
        if iri in table:
            return iri
        return self._names[kind].get(name)

    # --- rules -------------------------------------------------------------------------

    def rules_for_class(self, class_iri: str) -> tuple[int, ...]:
        got = self._applicable.get(class_iri)
        if got is None:
            anc = self.ancestors.get(class_iri, frozenset((class_iri,)))
            got = tuple(r.index for r in self.rules if r.about in anc)
            self._applicable[class_iri] = got
        return got

    def group_rules_for_class(
        self, group: ReaderGroup, class_iri: str
    ) -> tuple[tuple[int, int], ...]:
        """(rule index, stratum) of the group's rules that apply to instances of ``class_iri``."""
        key = (group.gid, class_iri)
        got = self.group_cache.get(key)
        if got is None:
            anc = self.ancestors.get(class_iri, frozenset((class_iri,)))
            got = tuple(
                (i, self.rules[i].stratum) for i in group.rules if self.rules[i].about in anc
            )
            self.group_cache[key] = got
        return got

    def compiled(self, cond: Condition) -> CompiledCondition:
        got = self.condition_cache.get(cond)
        if got is None:
            got = compile_condition(cond, self.value_sets)
            self.condition_cache[cond] = got
        return got


def _static_error(index: OntologyIndex, prop_iri: str, value: Value) -> tuple[str, str, str] | None:
    """(code, value repr, message) when a rule conclusion can never pass the gate."""
    prop = index.properties.get(prop_iri)
    if prop is None:
        return ("unknown-property", repr(value), f"rule concludes unknown property {prop_iri}")
    if prop.range in DATATYPES:
        try:
            v = normalize(prop.range, value)
        except NotOfType as exc:
            return ("range", repr(value), str(exc))
        if isinstance(v, int | Decimal) and not isinstance(v, bool):
            if prop.min is not None and v < prop.min:
                return ("min", repr(value), f"{value} is below the minimum {prop.min}")
            if prop.max is not None and v > prop.max:
                return ("max", repr(value), f"{value} is above the maximum {prop.max}")
        if (
            prop.pattern is not None
            and isinstance(v, str)
            and compiled_regex(prop.pattern).fullmatch(v) is None
        ):
            return ("pattern", repr(value), f"{value!r} does not match {prop.pattern}")
        if prop.one_of and value not in prop.one_of:
            return ("oneOf", repr(value), f"{value!r} is not one of the listed values")
        return None
    if prop.one_of:
        if value not in prop.one_of:
            return ("oneOf", repr(value), f"{value!r} is not one of {prop.name}'s values")
        return None
    ind = index.individuals.get(str(value))
    if ind is None or not index.is_subclass(ind.class_iri, prop.range):
        return ("range", repr(value), f"{value!r} is not an individual of {prop.range}")
    return None


def _aggregates(onto: Ontology) -> list[PropertyDef]:
    return [p for p in onto.properties.values() if p.aggregate is not None]


def _aggregate_reads(agg: AggregateDef) -> tuple[tuple[str, ...], ...]:
    """Every path an aggregate reads from its subject: the paths it follows, its filters'
    paths and the property it reads on each reached value."""
    reads: list[tuple[str, ...]] = []
    for path in agg.over:
        reads.append(path)
        reads.extend(path + tuple(c.path) for c in agg.where)
        if agg.of is not None:
            reads.append((*path, agg.of))
        for relation in (agg.dated, agg.sharing):
            if relation is not None:
                reads.append((relation.anchor,))
                reads.append((*path, relation.property))
        if agg.span is not None:
            for p in (agg.span.start, agg.span.end, agg.span.length):
                if p is not None:
                    reads.append((*path, p))
    return tuple(dict.fromkeys(reads))


def _compile_rules(
    index: OntologyIndex,
    rules: tuple[Rule, ...],
    aggregates: list[PropertyDef] = (),  # type: ignore[assignment]
) -> tuple[tuple[CompiledRule, ...], frozenset[str]]:
    ordered = sorted(rules, key=lambda r: r.order)
    strata, recursive = stratify(index, ordered, aggregates)
    out = []
    for i, rule in enumerate(ordered):
        conclusions = tuple((c.property, c.value) for c in rule.then)
        conds = tuple(index.compiled(c) for c in rule.when)
        stratum = min((strata.get(p, 0) for p, _ in conclusions), default=0)
        errors = tuple(_static_error(index, p, v) for p, v in conclusions)
        reads = tuple(cc.path for cc in conds)
        out.append(CompiledRule(i, rule, rule.about, stratum, conds, conclusions, errors, reads))
    for prop in aggregates:
        agg = prop.aggregate
        assert agg is not None
        # the synthetic rule of an aggregate is named by its property (proofs show it as such)
        rule = Rule(iri=prop.iri, name=prop.name, about=prop.domain, when=(), then=())
        compiled = CompiledAggregate(
            property=prop.iri,
            function=agg.function,
            over=agg.over,
            of=agg.of,
            where=tuple(index.compiled(c) for c in agg.where),
            integer=prop.range == XSD + "integer",
            span=agg.span,
            dated=agg.dated,
            sharing=agg.sharing,
        )
        out.append(
            CompiledRule(
                len(out),
                rule,
                prop.domain,
                strata.get(prop.iri, 0),
                (),
                (),
                (),
                _aggregate_reads(agg),
                compiled,
            )
        )
    return tuple(out), recursive


def stratify(
    index: OntologyIndex,
    rules: list[Rule],
    aggregates: list[PropertyDef] = (),  # type: ignore[assignment]
) -> tuple[dict[str, int], frozenset[str]]:
    """Property strata, and the properties on a positive cycle (that need delete-rederive).

    Reading a property through ``isAssigned false``, or reading a single-valued ``FirstListed``
    property at all, needs the property complete: the reader sits in a strictly higher stratum.
    So does an aggregate: every property it reads sits strictly below it.
    """
    edges: dict[str, dict[str, list[tuple[bool, str]]]] = {}
    nodes: set[str] = set()
    for prop in aggregates:
        assert prop.aggregate is not None
        nodes.add(prop.iri)
        for path in _aggregate_reads(prop.aggregate):
            for p in path:
                nodes.add(p)
                edges.setdefault(p, {}).setdefault(prop.iri, []).append((True, prop.iri))
    for rule in rules:
        for concl in rule.then:
            nodes.add(concl.property)
            for cond in rule.when:
                negative_cond = cond.op == "isAssigned" and cond.value is False
                for p in cond.path:
                    nodes.add(p)
                    neg = negative_cond or p in index.resolved_props
                    edges.setdefault(p, {}).setdefault(concl.property, []).append((neg, rule.iri))
    sccs = _tarjan(sorted(nodes), edges)
    comp = {n: i for i, scc in enumerate(sccs) for n in scc}
    recursive: set[str] = set()
    for scc in sccs:
        members = set(scc)
        bad: list[str] = []
        cyclic = len(scc) > 1
        for a in scc:
            for b, labels in edges.get(a, {}).items():
                if b in members:
                    cyclic = True
                    bad.extend(r for neg, r in labels if neg)
        if bad:
            names = tuple(dict.fromkeys(bad))
            raise StratificationError(
                "rules are not stratifiable: "
                + ", ".join(local_name(r) for r in names)
                + " read through negation (isAssigned false), a FirstListed property or an"
                " aggregate what they themselves conclude (cycle through "
                + ", ".join(sorted(local_name(p) for p in scc))
                + ")",
                names,
            )
        if cyclic:
            recursive |= members
    # Tarjan yields components in reverse topological order: dependencies come later.
    preds: dict[str, list[tuple[str, bool]]] = {}
    for a, targets in edges.items():
        for b, labels in targets.items():
            preds.setdefault(b, []).append((a, any(neg for neg, _ in labels)))
    stratum_of_comp: dict[int, int] = {}
    for ci in reversed(range(len(sccs))):
        best = 0
        for n in sccs[ci]:
            for a, neg in preds.get(n, ()):
                if comp[a] != ci:
                    best = max(best, stratum_of_comp[comp[a]] + (1 if neg else 0))
        stratum_of_comp[ci] = best
    return {n: stratum_of_comp[comp[n]] for n in nodes}, frozenset(recursive)


def _tarjan(nodes: list[str], edges: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Strongly connected components, iteratively, in reverse topological order."""
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index_of:
            continue
        work: list[tuple[str, Any]] = [(root, iter(sorted(edges.get(root, {}))))]
        index_of[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index_of:
                    index_of[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index_of[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == node:
                        break
                out.append(scc)
    return out


def _reader_index(rules: tuple[CompiledRule, ...]) -> dict[str, tuple[ReaderGroup, ...]]:
    groups: dict[str, dict[tuple[int, tuple[str, ...]], list[int]]] = {}
    for r in rules:
        for path in r.reads:
            for depth, p in enumerate(path):
                key = (depth, tuple(reversed(path[:depth])))
                members = groups.setdefault(p, {}).setdefault(key, [])
                if r.index not in members:
                    members.append(r.index)
    out: dict[str, tuple[ReaderGroup, ...]] = {}
    gid = 0
    for p, g in groups.items():
        lst: list[ReaderGroup] = []
        for (d, pre), rs in g.items():
            lst.append(ReaderGroup(gid, d, pre, tuple(rs)))
            gid += 1
        out[p] = tuple(lst)
    return out
