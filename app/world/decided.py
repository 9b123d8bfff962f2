"""Decidedness: whether a goal that holds (or does not) could change if the incomplete inputs were
complete (docs/world.md, "Decided and undecided").

A conclusion is *decided* when no input that is not complete could change it:

- no rule that could overrule it (a ``FirstListed`` value listed before it) or conflict with it (a
  ``Reject`` single-valued property's other value) could still fire: each of its conditions
  either holds now, or depends on an incomplete input; one that reads only complete inputs and
  fails now rules the rule out;
- no negative premise (``isAssigned false``) and no aggregate in its proof reads an incomplete
  input (more data could make the absence false or the count different);
- no single-valued reading it rests on has an incomplete input (a newer reading may replace it).

A positive premise read from an incomplete input stays true with more data (a heart rate of 160
measured is 160 measured), so it does not block alone. A condition reached through records (a
path through the focus's conditions, orders, encounters) is judged record by record: it could
come to hold only through a new record (the link's own input is incomplete) or a record whose
rules are not ruled out by its complete data — an unread element of a record that cannot change
the decision does not make it undecided. An aggregate a rule tests only for a bound it can
only move past with more records (``atLeast`` on a Count or DaysCovered) is not undone by more
records. A goal that does not hold is undecided
when an incomplete input could make it hold. Sound, not complete: where a fact has several
derivations the first is examined, so a run may be called undecided when a second derivation
would have carried it; it is never called decided when an input could change it.

Pure: reads the World's store and index, changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from app.ontology.model import Condition, Ontology, SpanDef, Value, local_name
from app.ontology.workflows import ActionStep
from app.world.aggregate import outside_window
from app.world.facts import FactKey

if TYPE_CHECKING:
    from app.world.engine import Engine
    from app.world.index import CompiledCondition, CompiledRule, OntologyIndex
    from app.world.store import Store

#: which way a value may move without changing the rule that reads it: "up" when the rule tests
#: only a lower bound of it, "down" only an upper bound, None otherwise
Direction = Literal["up", "down"] | None

#: how an incomplete input could change the conclusion
How = Literal["overrule", "conflict", "absence", "aggregate", "reading", "goal"]


@dataclass(frozen=True, kw_only=True)
class Blocker:
    """One reason the conclusion is not decided: the incomplete input ``input`` could change
    ``concerns`` (a property of ``subject``) ``how``, through ``rule`` when a rule is involved."""

    input: str  # the incomplete input's property IRI
    concerns: str  # the property of the conclusion it could change
    subject: str
    how: How
    rule: str | None = None
    #: overrule/conflict: the value the rule would conclude
    value: Value | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "input": local_name(self.input),
            "inputIri": self.input,
            "concerns": local_name(self.concerns),
            "subject": self.subject,
            "how": self.how,
        }
        if self.rule is not None:
            out["rule"] = local_name(self.rule)
            out["ruleIri"] = self.rule
        if self.value is not None:
            out["value"] = local_name(self.value) if isinstance(self.value, str) else self.value
        return out


def _bound_tested(rule: CompiledRule, s: str, premise: FactKey) -> Direction:
    """How ``rule`` on ``s`` tests the value of ``premise``: "up" when every condition reading
    that property is a lower bound of it on ``s`` itself (``atLeast``, ``greaterThan``),
    "down" when every one is an upper bound, None otherwise (a path, another test)."""
    subject, p, _ = premise
    reading = [cc for cc in rule.conditions if cc.path[-1] == p]
    if subject != s or any(len(cc.path) > 1 or cc.negative for cc in reading):
        return None
    ops = {cc.condition.op for cc in reading}
    if ops and ops <= {"atLeast", "greaterThan"}:
        return "up"
    if ops and ops <= {"atMost", "lessThan"}:
        return "down"
    return None


class _Deps:
    """Which properties each property depends on: through the rules and aggregates that derive
    it, the ActionSteps whose tools assert it (their bound arguments, ``forEach`` paths and
    ``where`` conditions) and its ``horis:inverseOf`` properties (hydration reads one to assert
    the other). Computed once per ontology as a fixed point, so rule cycles are whole."""

    def __init__(self, ix: OntologyIndex, ontology: Ontology) -> None:
        self.by_conclusion: dict[str, list[CompiledRule]] = {}
        #: a property a tool asserts → what the steps calling that tool read
        self.by_tool: dict[str, set[str]] = {}
        direct: dict[str, set[str]] = {}
        for rule in ix.rules:
            concluded = (
                (rule.aggregate.property,)
                if rule.aggregate is not None
                else tuple(p for p, _ in rule.conclusions)
            )
            read = {p for path in rule.reads for p in path}
            read |= {p for cc in rule.conditions for p in cc.path}
            for p in dict.fromkeys(concluded):
                self.by_conclusion.setdefault(p, []).append(rule)
                direct.setdefault(p, set()).update(read)
        for wf in ontology.workflows.values():
            for step in wf.steps.values():
                if not isinstance(step, ActionStep):
                    continue
                tool = ontology.tools.get(step.tool or "")
                if tool is None or not tool.effects:
                    continue
                read = {b.property for b in step.bindings if b.property is not None}
                read |= {p for path in step.for_each for p in path}
                read |= {p for cond in step.each_where for p in cond.path}
                for effect in tool.effects:
                    direct.setdefault(effect.property, set()).update(read)
                    self.by_tool.setdefault(effect.property, set()).update(read)
        for prop in ix.properties.values():
            for q in prop.inverse_of:
                direct.setdefault(prop.iri, set()).add(q)
                direct.setdefault(q, set()).add(prop.iri)
        closure = {p: {p, *reads} for p, reads in direct.items()}
        changed = True
        while changed:
            changed = False
            for p, reads in closure.items():
                grown = set(reads)
                for q in reads:
                    grown |= closure.get(q, set())
                if len(grown) != len(reads):
                    closure[p] = grown
                    changed = True
        self._closure = {p: frozenset(reads) for p, reads in closure.items()}

    def of(self, prop: str) -> frozenset[str]:
        return self._closure.get(prop) or frozenset((prop,))

    def rule_reads(self, rule: CompiledRule) -> set[str]:
        out: set[str] = set()
        for path in rule.reads:
            out |= self.path(path)
        for cc in rule.conditions:
            out |= self.path(cc.path)
        return out

    def path(self, path: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for p in path:
            out |= self.of(p)
        return out


def _deps(ix: OntologyIndex, ontology: Ontology) -> _Deps:
    """The dependencies of ``ontology``, kept on its index (which lives as long as it does)."""
    held = ix.__dict__.get("_decided_deps")
    if not isinstance(held, _Deps):
        held = _Deps(ix, ontology)
        ix.__dict__["_decided_deps"] = held
    return held


class Judged(Protocol):
    """What the check asks of the World it judges (``app.world.world.World``), besides its
    index, store and engine: its ontology, class membership and whether conditions hold."""

    ontology: Ontology

    def is_a(self, value: str, class_iri: str) -> bool: ...

    def holds(self, subject: str, conditions: Iterable[Condition]) -> bool: ...

    def values(self, subject: str, property: str) -> tuple[Value, ...]: ...

    def instance(self, id: str) -> object | None: ...


class _Check:
    def __init__(
        self,
        world: Judged,
        ix: OntologyIndex,
        st: Store,
        engine: Engine,
        incomplete: frozenset[str],
        focus: str,
        records: Mapping[str, frozenset[str]],
    ) -> None:
        self.world = world
        self.focus = focus
        # a record is an instance named by its resource id, or by Type/id when that id is taken
        self.records = {
            p: frozenset({*refs, *(r.split("/", 1)[1] for r in refs)})
            for p, refs in records.items()
        }
        self.ix = ix
        self.st = st
        self.engine = engine
        self.deps = _deps(ix, world.ontology)
        self.incomplete = incomplete
        self.seen: dict[tuple[FactKey, Direction], tuple[Blocker, ...]] = {}
        #: (subject, path) pairs whose reach is being judged: a rule cycle stops there
        self.exploring: set[tuple[str, tuple[str, ...]]] = set()

    def touched(self, path: Iterable[str]) -> list[str]:
        return sorted(self.deps.path(path) & self.incomplete)

    def incomplete_on(self, s: str, q: str) -> bool:
        """Whether input ``q`` read on ``s`` is incomplete: on any subject when it is
        incomplete as a whole or ``s`` is the focus; on a record, only when one of its reasons
        names that record (a sprained ankle without a category leaves no other condition's
        category incomplete)."""
        if q not in self.incomplete:
            return False
        named = self.records.get(q)
        return named is None or s == self.focus or s in named

    def is_input(self, q: str) -> bool:
        """Whether ``q`` is read from the data itself (nothing derives it)."""
        return self.deps.of(q) == frozenset((q,))

    def touched_on(self, s: str, path: tuple[str, ...]) -> list[str]:
        """``touched(path)``, where a path of one input read on ``s`` itself is judged on
        ``s``'s own record."""
        if len(path) == 1 and self.is_input(path[0]):
            return [path[0]] if self.incomplete_on(s, path[0]) else []
        return self.touched(path)

    def tool_open(self, s: str, p: str) -> list[str]:
        """The incomplete inputs a tool's answer ``p`` on ``s`` rests on: everything its calls
        read, the inputs read on ``s``'s own record judged on it."""
        out: list[str] = []
        for q in sorted(self.deps.path(self.deps.by_tool[p]) & self.incomplete):
            if self.is_input(q) and not self.incomplete_on(s, q):
                continue
            out.append(q)
        return out

    # --- a fact that holds ---------------------------------------------------------------

    def fact(self, key: FactKey, rising: Direction = None) -> tuple[Blocker, ...]:
        """What could undo the fact ``key``. ``rising`` says how the rule that reads it tests
        it: ``"up"`` when only a lower bound matters (``atLeast 21``), ``"down"`` an upper
        one; an aggregate whose value can only move that way with more data is then not
        undone by more records (a count of 27 days stays at least 21)."""
        memo = (key, rising)
        if memo in self.seen:
            return self.seen[memo]
        self.seen[memo] = ()  # a cycle adds nothing new
        s, p, v = key
        out = list(self.rivals(s, p, v))
        support = self.st.support.get(key)
        if key in self.st.base:
            prop = self.ix.properties.get(p)
            if self.incomplete_on(s, p) and prop is not None and prop.single_valued:
                out.append(Blocker(input=p, concerns=p, subject=s, how="reading"))
        elif support:
            out.extend(self.derivations(s, p, list(support), rising))
        found = tuple(dict.fromkeys(out))
        self.seen[memo] = found
        return found

    def derivations(
        self, s: str, p: str, acts: list[tuple[int, str]], rising: Direction = None
    ) -> list[Blocker]:
        """The blockers of the first derivation; none when any derivation stands whole."""
        first: list[Blocker] | None = None
        for a in acts:
            act = self.st.acts.get(a)
            if act is None:
                continue
            rule = self.ix.rules[a[0]]
            found: list[Blocker] = []
            if rule.aggregate is not None:
                found.extend(
                    Blocker(input=q, concerns=p, subject=s, how="aggregate", rule=rule.rule.iri)
                    for q in self.aggregate_open(s, rule, rising)
                )
            for subject, path in act.absent:
                # the absence holds unless the path could gain a value, record by record
                found.extend(
                    Blocker(
                        input=b.input,
                        concerns=p,
                        subject=subject,
                        how="absence",
                        rule=rule.rule.iri,
                    )
                    for b in self.through(subject, tuple(path), p)
                )
            for premise in act.premises:
                found.extend(self.fact(premise, _bound_tested(rule, s, premise)))
            if not found:
                return []
            if first is None:
                first = found
        return first or []

    def rivals(self, s: str, p: str, v: Value) -> Iterable[Blocker]:
        """Rules that could still conclude a value of ``p`` on ``s`` that would overrule ``v``
        (FirstListed: listed before it) or conflict with it (single-valued: any other)."""
        prop = self.ix.properties.get(p)
        if prop is None:
            return
        if prop.resolution == "FirstListed":
            order = prop.one_of
            rank = order.index(v) if v in order else len(order)
            beats: set[Value] | None = set(order[:rank])
            how: How = "overrule"
        elif prop.single_valued:
            beats = None  # any other value conflicts
            how = "conflict"
        else:
            return
        for rule in self.deps.by_conclusion.get(p, ()):
            if rule.aggregate is not None:
                continue
            for cp, cv in rule.conclusions:
                if cp != p or cv == v or (beats is not None and cv not in beats):
                    continue
                if not self.world.is_a(s, rule.about):
                    continue
                for q in self.could_fire(rule, s):
                    yield Blocker(
                        input=q, concerns=p, subject=s, how=how, rule=rule.rule.iri, value=cv
                    )

    def could_fire(self, rule: CompiledRule, s: str) -> list[str]:
        """The incomplete inputs on which ``rule`` firing on ``s`` depends; empty when a condition
        that reads only complete inputs rules it out (or it fires already)."""
        return self.could_hold(s, rule.conditions)

    def aggregate_open(self, s: str, rule: CompiledRule, rising: Direction = None) -> list[str]:
        """The incomplete inputs through which ``rule``'s aggregate on ``s`` could change. A
        Count, Sum, Min, Max or DaysCovered over records with a positive filter is judged
        record by record (a record counted now stays counted): a new record along a path, a
        record not counted now that could come to pass the filter — unless its known span
        covers no day of the window — or the summed value or span of one counted. Any other
        aggregate (a dated or shared relation) is judged by everything it reads. Where the
        rule reading it tests only a bound the value can move past in one way (``rising``) and
        the aggregate only moves that way with more records (Count, DaysCovered and Max up, Min
        down), a new record or one that could come to count does not block: only a counted
        record whose value or span could change does."""
        agg = rule.aggregate
        assert agg is not None
        grows = (rising == "up" and agg.function in ("Count", "DaysCovered", "Max")) or (
            rising == "down" and agg.function == "Min"
        )
        spans = agg.function == "DaysCovered" and agg.span is not None
        if (
            (agg.function not in ("Count", "Sum", "Min", "Max") and not spans)
            or (not spans and (agg.function == "Count") != (agg.of is None))
            or (spans and agg.of is not None)
            or agg.dated is not None
            or agg.sharing is not None
            or (agg.span is not None and not spans)
            or any(cc.negative for cc in agg.where)
        ):
            return sorted(self.deps.rule_reads(rule) & self.incomplete)
        out: list[str] = []
        concerns = agg.property
        for path in agg.over:
            nodes = [s]
            for prop in path:
                reached: list[str] = []
                for node in nodes:
                    if not grows:
                        out.extend(b.input for b in self.could_become(node, (prop,), concerns))
                    reached.extend(
                        v
                        for v in self.world.values(node, prop)
                        if isinstance(v, str) and self.world.instance(v) is not None
                    )
                nodes = list(dict.fromkeys(reached))
            for record in nodes:
                if all(self.world.holds(record, [cc.condition]) for cc in agg.where):
                    # counted now, and stays counted; a summed value or a span could change
                    if agg.of is not None:
                        out.extend(self.value_open(record, agg.of))
                    if agg.span is not None:
                        out.extend(self.span_open(record, agg.span, gaining=not grows))
                    continue
                if grows:
                    continue  # it could only add to the value, which the rule reads one way
                opened = self.could_hold(record, agg.where)
                if (
                    opened
                    and agg.span is not None
                    and not self.span_open(record, agg.span)
                    and outside_window(self.engine, record, agg.span)
                ):
                    continue  # its known span covers no day of the window: it adds none
                out.extend(opened)
        return list(dict.fromkeys(out))

    def span_open(self, record: str, span: SpanDef, *, gaining: bool = True) -> list[str]:
        """The incomplete inputs through which a record's span could change, judged on the
        record: a start, end or length it could gain (unless ``gaining`` is False: a span
        that can only grow, where only growth does not matter), or one it has that could be
        undone. A start measured with a length moves the whole span when an earlier one is
        gained (it could leave the window): such a start is judged as gaining even then,
        unless it is single-valued (a second start would be a conflict, judged apart)."""
        out: list[str] = []
        for p in (span.start, span.end, span.length):
            if p is None:
                continue
            prop = self.ix.properties.get(p)
            moves = p == span.start and span.length is not None
            if gaining or (moves and not (prop is not None and prop.single_valued)):
                out.extend(b.input for b in self.could_become(record, (p,), p))
            for v in self.world.values(record, p):
                out.extend(b.input for b in self.fact((record, p, v)))
        return list(dict.fromkeys(out))

    def value_open(self, s: str, p: str) -> list[str]:
        """The incomplete inputs through which the value of ``p`` on ``s`` could change: a
        tool's answer by what its calls read, an input by ``s``'s own record, anything derived
        by everything it reads."""
        if p in self.deps.by_tool:
            return self.tool_open(s, p)
        if self.is_input(p):
            return [p] if self.incomplete_on(s, p) else []
        return self.touched((p,))

    def could_hold(self, s: str, conditions: Iterable[CompiledCondition]) -> list[str]:
        """The incomplete inputs on which every one of ``conditions`` holding on ``s`` depends;
        empty when one that reads only complete inputs fails (or they all hold already)."""
        open_inputs: list[str] = []
        for cc in conditions:
            touched = self.touched_on(s, cc.path)
            if not touched:
                if not self.world.holds(s, [cc.condition]):
                    return []
                continue
            if cc.negative and self.held_for_good(s, cc.path):
                # an absence that fails now could come to hold only by losing every value the
                # path reaches; one reached through facts no incomplete input can undo stays
                return []
            if not cc.negative and not self.world.holds(s, [cc.condition]):
                # it could come to hold only through a value the property could gain: its own
                # input, a rule deriving it that is not ruled out, or — reached through
                # records — a new record or one that could come to satisfy the rest
                reach = [b.input for b in self.through(s, cc.path, cc.path[-1])]
                if not reach:
                    return []
                open_inputs.extend(reach)
                continue
            open_inputs.extend(touched)
        return list(dict.fromkeys(open_inputs))

    def held_for_good(self, s: str, path: tuple[str, ...]) -> bool:
        """Whether ``path`` on ``s`` reaches a value through facts that no incomplete input
        could retract (each fact without blockers, ``fact``): more data only adds facts, so an
        absence on that path cannot come to hold."""
        nodes: list[Value] = [s]
        for prop in path:
            reached: list[Value] = []
            for node in nodes:
                if not isinstance(node, str):
                    continue
                reached.extend(
                    v for v in self.world.values(node, prop) if not self.fact((node, prop, v))
                )
            if not reached:
                return False
            nodes = list(dict.fromkeys(reached))
        return True

    def through(self, s: str, path: tuple[str, ...], concerns: str) -> list[Blocker]:
        """The incomplete inputs through which ``path`` on ``s`` could reach a value it does
        not reach now, record by record: the first link could gain a record (its own inputs,
        its rules), or a record it links to now could gain the rest of the path. A record
        whose complete data rule the rest out (a sprained ankle for a rule on substance
        misuse) does not block, whatever else about it is incomplete."""
        key = (s, path)
        if key in self.exploring:
            return []  # a rule cycle: what it could add is found where it was entered
        self.exploring.add(key)
        try:
            return self._through(s, path, concerns)
        finally:
            self.exploring.discard(key)

    def _through(self, s: str, path: tuple[str, ...], concerns: str) -> list[Blocker]:
        head, rest = path[0], path[1:]
        out = self.could_become(s, (head,), concerns)
        if rest:
            for v in self.world.values(s, head):
                if isinstance(v, str) and self.world.instance(v) is not None:
                    out.extend(self.could_become(v, rest, concerns))
        return list(dict.fromkeys(out))

    def could_become(self, s: str, path: tuple[str, ...], concerns: str) -> list[Blocker]:
        """The incomplete inputs through which ``path`` on ``s`` could gain a value: the
        property's own input (on ``s``'s own record), the inputs of a tool asserting it, and the
        inputs of each rule deriving it that is not ruled out. A longer path is walked record
        by record (``through``)."""
        if len(path) > 1:
            return self.through(s, path, concerns)
        p = path[0]
        out: list[Blocker] = []
        if self.incomplete_on(s, p):
            out.append(Blocker(input=p, concerns=concerns, subject=s, how="goal"))
        if p in self.deps.by_tool:  # a tool's answer: judged by everything its calls read
            out.extend(
                Blocker(input=q, concerns=concerns, subject=s, how="goal")
                for q in self.tool_open(s, p)
            )
        for rule in self.deps.by_conclusion.get(p, ()):
            if not self.world.is_a(s, rule.about):
                continue
            reads = (
                self.aggregate_open(s, rule)
                if rule.aggregate is not None
                else self.could_fire(rule, s)
            )
            out.extend(
                Blocker(input=q, concerns=concerns, subject=s, how="goal", rule=rule.rule.iri)
                for q in reads
            )
        return out

    # --- a goal --------------------------------------------------------------------------

    def goal(self, s: str, goal: Iterable[Condition]) -> list[Blocker]:
        out: list[Blocker] = []
        for cond in goal:
            cc = self.ix.compiled(cond)
            concerns = cc.path[-1]
            if cc.negative or not self.world.holds(s, [cond]):
                # nothing reached now, or the condition fails: could more data change that?
                out.extend(self.could_become(s, cc.path, concerns))
                continue
            chain = self.engine.chain(s, cc)
            for key in chain or ():
                out.extend(self.fact(key))
        return list(dict.fromkeys(out))


def undecided(
    world: Judged,
    ix: OntologyIndex,
    st: Store,
    engine: Engine,
    subject: str,
    goal: Iterable[Condition],
    incomplete: Iterable[str],
    records: Mapping[str, frozenset[str]] | None = None,
) -> tuple[Blocker, ...]:
    """Why the ``goal`` on ``subject`` is not decided given the ``incomplete`` input properties
    (empty: decided); ``records`` narrows a property of a record to the records it is
    incomplete on. See the module docstring for the rules."""
    missing = frozenset(incomplete)
    if not missing:
        return ()
    check = _Check(world, ix, st, engine, missing, subject, records or {})
    return tuple(check.goal(subject, goal))
