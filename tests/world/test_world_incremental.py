"""The incrementally maintained World equals a from-scratch fixed point, after any sequence of
asserts and retracts over any stratifiable rule set, and every proof rests on present base facts."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ontology.model import AggregateDef, Condition, Rule
from app.world import AddInstance, Assert, Retract, World
from app.world.naive import naive_fixpoint
from tests.support.depth import examples
from tests.world.builders import cls, cond, individual, iri, ontology, prop, rule

BASE_INT = ("b0", "b1")
DERIVED_LEVEL = {"d0": 0, "d1": 1, "grade": 1, "d2": 2, "score": 2}
#: aggregates read levels 0 and 1; rules of level 2 read them (positively or negated)
AGGREGATE_LEVEL = {"cnt": 1.5, "tot": 1.5, "lo": 1.5, "sumd1": 1.5}
NODES = ("n0", "n1", "n2", "n3", "n4")
GRADES = ("L1", "L2", "L3")


def _vocabulary() -> tuple[list[Any], list[Any], list[Any]]:
    classes = [cls("Node"), cls("A", "Node"), cls("B", "Node"), cls("Level", one_of=GRADES)]
    props = [
        prop("b0", "Node", "xsd:integer"),
        prop("b1", "Node", "xsd:integer"),
        prop("link", "Node", "Node"),
        prop("d0", "Node", "xsd:integer"),
        prop("d1", "Node", "xsd:integer"),
        prop("d2", "Node", "xsd:integer"),
        prop("grade", "Node", "Level", cardinality="0..1", one_of=GRADES, resolution="FirstListed"),
        prop("score", "Node", "xsd:integer", cardinality="0..1"),
        prop(
            "cnt",
            "Node",
            "xsd:integer",
            cardinality="0..1",
            rules_only=True,
            aggregate=AggregateDef(
                function="Count",
                over=((iri("link"),), (iri("link"), iri("link"))),
                where=(cond("d0", "isAssigned", True), cond("b1", "isAssigned", False)),
            ),
        ),
        prop(
            "tot",
            "Node",
            "xsd:integer",
            cardinality="0..1",
            rules_only=True,
            aggregate=AggregateDef(function="Sum", over=((iri("link"),),), of=iri("b0")),
        ),
        prop(
            "lo",
            "Node",
            "xsd:integer",
            cardinality="0..1",
            rules_only=True,
            aggregate=AggregateDef(function="Min", over=((iri("link"), iri("b1")), (iri("b1"),))),
        ),
        prop(
            "sumd1",
            "Node",
            "xsd:integer",
            cardinality="0..1",
            rules_only=True,
            aggregate=AggregateDef(
                function="Max",
                over=((iri("link"),),),
                of=iri("d1"),
                where=(cond("grade", "isAssigned", True),),
            ),
        ),
    ]
    return classes, props, [individual(g, "Level") for g in GRADES]


@st.composite
def conditions(draw: st.DrawFn, level: int) -> Condition:
    positive_derived = [p for p, lv in DERIVED_LEVEL.items() if lv <= level and p != "grade"]
    positive_derived = [p for p in positive_derived if p != "score"]
    lower = [p for p, lv in DERIVED_LEVEL.items() if lv < level and p != "score"]
    kind = draw(st.sampled_from(["base", "basepath", "isA", "derived", "neg", "grade", "agg"]))
    if kind == "agg" and level >= 2:
        op = draw(st.sampled_from(["greaterThan", "atLeast", "lessThan", "atMost", "is"]))
        p = draw(st.sampled_from(list(AGGREGATE_LEVEL)))
        path = draw(st.sampled_from([(p,), ("link", p)]))
        if draw(st.booleans()):
            return cond(path, "isAssigned", draw(st.booleans()))
        return cond(path, op, draw(st.integers(0, 4)))
    if kind == "base":
        op = draw(st.sampled_from(["greaterThan", "atLeast", "lessThan", "atMost", "is", "isNot"]))
        return cond(draw(st.sampled_from(BASE_INT)), op, draw(st.integers(0, 3)))
    if kind == "basepath":
        return cond(("link", draw(st.sampled_from(BASE_INT))), "atLeast", draw(st.integers(0, 3)))
    if kind == "isA":
        return cond("link", "isA", draw(st.sampled_from(["A", "B", "Node"])))
    if kind == "derived":
        p = draw(st.sampled_from(positive_derived))
        path = draw(st.sampled_from([(p,), ("link", p)]))
        if draw(st.booleans()):
            return cond(path, "isAssigned", True)
        return cond(path, "in", (1, 2) if draw(st.booleans()) else (draw(st.integers(1, 2)),))
    if kind == "grade" and level > DERIVED_LEVEL["grade"]:
        return cond("grade", "is", draw(st.sampled_from(GRADES)))
    options = ["b0", "b1", "link", *lower]
    p = draw(st.sampled_from(options))
    path = draw(st.sampled_from([(p,), ("link", p)])) if p != "link" else ("link",)
    return cond(path, "isAssigned", False)


@st.composite
def rules(draw: st.DrawFn) -> list[Rule]:
    out = []
    for i in range(draw(st.integers(1, 7))):
        concl = draw(st.sampled_from(list(DERIVED_LEVEL)))
        level = DERIVED_LEVEL[concl]
        value: Any = draw(st.sampled_from(GRADES)) if concl == "grade" else draw(st.integers(1, 2))
        when = draw(st.lists(conditions(level), min_size=0, max_size=3))
        about = draw(st.sampled_from(["Node", "A"]))
        out.append(rule(f"R{i}", about, when, [(concl, value)]))
    if draw(st.booleans()):
        # positive recursion through links: reachability must vanish with its seed
        out.append(rule("Seed", "Node", [cond("b0", "atLeast", 1)], [("d0", 1)]))
        out.append(rule("Reach", "Node", [cond(("link", "d0"), "isAssigned", True)], [("d0", 1)]))
    if draw(st.booleans()):
        out.append(rule("Reach1", "Node", [cond(("link", "d1"), "in", (1, 2))], [("d1", 2)]))
    return out


op_strategy = st.tuples(
    st.sampled_from(["assert", "assert", "retract"]),
    st.sampled_from(NODES),
    st.sampled_from(["b0", "b1", "link"]),
    st.integers(0, 4),
)


def _value(p: str, n: int) -> Any:
    return NODES[n] if p == "link" else n % 4


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rule_set=rules(),
    classes=st.lists(st.sampled_from(["Node", "A", "B"]), min_size=5, max_size=5),
    ops=st.lists(st.lists(op_strategy, min_size=1, max_size=3), min_size=1, max_size=14),
    snap_at=st.integers(0, 14),
    late=st.tuples(st.integers(0, 14), st.sampled_from(["Node", "A", "B"])),
)
def test_incremental_equals_from_scratch(
    rule_set: list[Rule],
    classes: list[str],
    ops: list[list[tuple[str, str, str, int]]],
    snap_at: int,
    late: tuple[int, str],
) -> None:
    c, p, inds = _vocabulary()
    onto = ontology(c, p, rule_set, inds)
    world = World(onto)
    instances = {n: iri(k) for n, k in zip(NODES, classes, strict=True)}
    base: set[tuple[str, str, Any]] = set()
    first = world.transact([AddInstance(n, k) for n, k in instances.items()], provenance="api")
    expected, conflicts = naive_fixpoint(onto, instances, base)
    assert first.ok == (not conflicts)
    if not first.ok:
        return
    snapshot = None
    for i, batch in enumerate(ops):
        if i == snap_at:
            snapshot = (world.snapshot(), world.facts(), world.version)
        if i == late[0]:
            # an instance arriving later: rules that hold on absences alone must fire for it
            added = world.transact([AddInstance("late", iri(late[1]))], provenance="api")
            instances["late"] = iri(late[1])
            expected, conflicts = naive_fixpoint(onto, instances, base)
            assert added.ok == (not conflicts)
            if not added.ok:
                del instances["late"]
        changes: list[Any] = []
        new_base = set(base)
        for kind, s, pname, n in batch:
            key = (s, iri(pname), _value(pname, n))
            if kind == "assert":
                changes.append(Assert(s, iri(pname), key[2]))
                new_base.add(key)
            else:
                changes.append(Retract(s, iri(pname), key[2]))
                new_base.discard(key)
        before = world.facts()
        version = world.version
        result = world.transact(changes, provenance="api")
        expected, conflicts = naive_fixpoint(onto, instances, new_base)
        if conflicts:
            assert not result.ok
            assert {v.code for v in result.violations} == {"conflict"}
            assert world.facts() == before
            assert world.version == version
            continue
        assert result.ok, result.violations
        base = new_base
        got = {(f.subject, f.property, f.value) for f in world.facts()}
        assert got == expected
    present_base = {f.key for f in world.base_facts()}
    assert present_base == base
    for f in world.facts():
        proof = world.proof(f.subject, f.property, f.value)
        assert len(proof.nodes) == 1
        leaves = list(proof.base_facts())
        assert all(leaf.key in present_base for leaf in leaves)
        for j in f.justifications:
            for premise in j.premises:
                assert world.fact(*premise) is not None
            for absent in j.absent:
                assert world.reach(absent.subject, absent.path) == ()
        if f.provenance == "rule":
            assert proof.nodes[0].derivations
    again = World.from_json(onto, world.to_json())
    assert {f.key for f in again.facts()} == {f.key for f in world.facts()}
    if snapshot is not None:
        world.restore(snapshot[0])
        assert world.facts() == snapshot[1]
        assert world.version == snapshot[2]
