"""Incremental rule evaluation with truth maintenance.

Rules are single-subject: an *activation* is (rule, subject). A holding activation records one
witness — the chain of facts behind each positive condition and the paths a negative condition
found empty — and supports its conclusions. A changed fact dirties only the activations whose
rules read its property at some path position and whose subject reaches it (found by walking
the reverse index back along the path prefix).

Strata are processed lowest first. Within a stratum, delete-and-rederive keeps support
well-founded: an activation whose witness no longer holds is deleted; its conclusions lose that
support; a conclusion on a recursive property is removed even if other support remains and is
restored once the deletions settle (so a cycle cannot keep itself alive); then dirty activations
are re-evaluated and new facts propagate until nothing changes. Witnesses are only replaced when
they stop holding, so every witness rests on facts that existed before it — proofs stay acyclic.
"""

from __future__ import annotations

from datetime import datetime

from app.ontology.model import Condition, Value, local_name
from app.world.aggregate import Witness, aggregate_witness
from app.world.facts import Absence, Fact, FactKey, Justification, Violation
from app.world.index import CompiledCondition, CompiledRule, OntologyIndex
from app.world.store import Act, ActKey, BaseRecord, Chain, Store
from app.world.values import Test
from app.world.windows import window_test

_EMPTY: frozenset[str] = frozenset()


def _seq(act: Act) -> int:
    return act.seq


def _conclusions(
    rule: CompiledRule, computed: tuple[tuple[str, Value], ...] | None
) -> tuple[tuple[str, Value], ...]:
    """What an activation concludes: an aggregate its computed value, a rule its declaration."""
    return computed if computed is not None else rule.conclusions


class Engine:
    def __init__(self, index: OntologyIndex, store: Store, now: datetime | None = None) -> None:
        self.ix = index
        self.st = store
        self.now = now
        self._timed: dict[Condition, Test] = {}
        self.tx = 0
        self.dirty: dict[int, dict[ActKey, None]] = {}
        self.overdeleted: dict[int, dict[FactKey, None]] = {}
        self.touched_resolved: dict[tuple[str, str], None] = {}
        self.touched_single: dict[tuple[str, str], None] = {}
        self.violations: list[Violation] = []
        self.before: dict[FactKey, Fact | None] = {}

    def end(self) -> None:
        """Drop the transaction's bookkeeping (so a large load is not paid for by the next)."""
        self.begin(self.tx)

    def begin(self, tx: int) -> None:
        self.tx = tx
        self.dirty = {}
        self.overdeleted = {}
        self.touched_resolved = {}
        self.touched_single = {}
        self.violations = []
        self.before = {}

    # --- lookups -------------------------------------------------------------------------

    def test_of(self, cc: CompiledCondition) -> Test:
        """The condition's test; a time window's is bound to this World's ``now``."""
        if not cc.timed:
            return cc.test
        got = self._timed.get(cc.condition)
        if got is None:
            window = window_test(cc.condition.op, str(cc.condition.value), self.now)
            got = self._timed[cc.condition] = lambda v, anc: window(v)
        return got

    def class_ancestors(self, v: str) -> frozenset[str]:
        inst = self.st.instances.get(v)
        if inst is not None:
            return self.ix.ancestors.get(inst.class_iri, frozenset((inst.class_iri,)))
        ind = self.ix.individuals.get(v)
        if ind is not None:
            return self.ix.ancestors.get(ind.class_iri, frozenset((ind.class_iri,)))
        return _EMPTY

    def fact_of(self, key: FactKey) -> Fact:
        st = self.st
        rec = st.base.get(key)
        sup = st.support.get(key)
        justs: tuple[Justification, ...] = ()
        if sup:
            acts = st.acts
            if len(sup) == 1:
                justs = (acts[next(iter(sup))].justification,)
            else:
                justs = tuple(act.justification for act in sorted((acts[a] for a in sup), key=_seq))
        s, p, v = key
        if rec is not None:
            return Fact(s, p, v, rec.provenance, rec.confidence, rec.source, rec.tx, justs)
        return Fact(s, p, v, "rule", None, None, st.vtx.get(key, self.tx), justs)

    def _touch(self, key: FactKey) -> None:
        if key not in self.before:
            self.before[key] = self.fact_of(key) if self.st.visible(key) else None

    # --- events --------------------------------------------------------------------------

    def dirty_readers(self, s: str, p: str) -> None:
        groups = self.ix.readers.get(p)
        if not groups:
            return
        st = self.st
        dirty = self.dirty
        instances = st.instances
        cache = self.ix.group_cache
        for g in groups:
            roots = (s,) if g.depth == 0 else st.reverse([s], g.reverse_prefix)
            for root in roots:
                inst = instances.get(root)
                if inst is None:
                    continue
                applicable = cache.get((g.gid, inst.class_iri))
                if applicable is None:
                    applicable = self.ix.group_rules_for_class(g, inst.class_iri)
                for rid, stratum in applicable:
                    d = dirty.get(stratum)
                    if d is None:
                        dirty[stratum] = {(rid, root): None}
                    else:
                        d[(rid, root)] = None

    def dirty_subject(self, s: str, class_iri: str) -> None:
        """A new instance: every rule about its class may hold (e.g. on absences alone)."""
        rules = self.ix.rules
        for rid in self.ix.rules_for_class(class_iri):
            self.dirty.setdefault(rules[rid].stratum, {})[(rid, s)] = None

    def _show(self, key: FactKey) -> None:
        self.st.add_visible(key, self.tx)
        self.dirty_readers(key[0], key[1])
        if key[1] in self.ix.single_props:
            self.touched_single[(key[0], key[1])] = None

    def _hide(self, key: FactKey) -> None:
        self.st.remove_visible(key)
        self.dirty_readers(key[0], key[1])

    # --- base changes --------------------------------------------------------------------

    def assert_base(self, key: FactKey, rec: BaseRecord) -> None:
        st = self.st
        if st.base.get(key) == rec:
            return
        self._touch(key)
        st.set_base(key, rec)
        if not st.visible(key):
            self._show(key)
        elif key[1] in self.ix.resolved_props:
            self.touched_resolved[(key[0], key[1])] = None

    def retract_base(self, key: FactKey) -> None:
        st = self.st
        if key not in st.base:
            return
        self._touch(key)
        st.set_base(key, None)
        p = key[1]
        if p in self.ix.resolved_props:
            cands = st.cand.get((key[0], p))
            if cands and key[2] in cands:
                self.touched_resolved[(key[0], p)] = None
            else:
                self._hide(key)
            return
        sup = st.support.get(key)
        if not sup:
            self._hide(key)
        elif p in self.ix.recursive:
            self._hide(key)
            for a in sup:
                stratum = self.ix.rules[a[0]].stratum
                self.overdeleted.setdefault(stratum, {})[key] = None

    # --- the fixed point -----------------------------------------------------------------

    def run(self) -> list[Violation]:
        self._resolve()
        while self.dirty or self.overdeleted:
            k = min(set(self.dirty) | set(self.overdeleted))
            self._stratum(k)
            self._resolve()
        self._check_conflicts()
        return self.violations

    def _stratum(self, k: int) -> None:
        st = self.st
        seen: dict[ActKey, None] = {}
        while True:
            batch = self.dirty.pop(k, None)
            if not batch:
                break
            for a in batch:
                seen[a] = None
                act = st.acts.get(a)
                if act is not None and not self._valid(a, act):
                    self._delete(a)
        for key in self.overdeleted.pop(k, {}):
            if key in st.support and not st.visible(key):
                self._touch(key)
                self._show(key)
        batch2: dict[ActKey, None] | None = seen
        while batch2:
            for a in batch2:
                if a in st.acts:
                    continue
                w = self._evaluate(a)
                if w is not None:
                    self._establish(a, w[0], w[1], w[2])
            batch2 = self.dirty.pop(k, None)

    def _valid(self, a: ActKey, act: Act) -> bool:
        rule = self.ix.rules[a[0]]
        if rule.aggregate is not None:
            # an aggregate stays only while recomputing it gives the same value from the same facts
            return self._evaluate(a) == (act.premises, act.absent, act.concl)
        sp = self.st.sp
        for s, p, v in act.premises:
            vals = sp.get((s, p))
            if vals is None or v not in vals:
                return False
        return all(not self.st.reaches_any(s, path) for s, path in act.absent)

    def _evaluate(self, a: ActKey) -> Witness | None:
        rule = self.ix.rules[a[0]]
        s = a[1]
        if rule.aggregate is not None:
            return aggregate_witness(self, s, rule.aggregate)
        prem: list[FactKey] = []
        absent: list[tuple[str, tuple[str, ...]]] = []
        for cc in rule.conditions:
            if cc.negative:
                if self.st.reaches_any(s, cc.path):
                    return None
                absent.append((s, cc.path))
            else:
                chain = self.chain(s, cc)
                if chain is None:
                    return None
                prem.extend(chain)
        return tuple(dict.fromkeys(prem)), tuple(absent), None

    def chain(self, s: str, cc: CompiledCondition) -> Chain | None:
        """The first chain of facts from ``s`` along the condition's path whose last value
        satisfies it (values in assertion order), or None."""
        path = cc.path
        if len(path) == 1:
            p = path[0]
            vals = self.st.sp.get((s, p))
            if not vals:
                return None
            test = self.test_of(cc)
            anc = self.class_ancestors
            for v in vals if len(vals) == 1 else self.st.values(s, p):
                if test(v, anc):
                    return ((s, p, v),)
            return None
        return self._dfs(s, cc, 0)

    def _dfs(self, node: str, cc: CompiledCondition, k: int) -> Chain | None:
        p = cc.path[k]
        vals = self.st.values(node, p)
        last = k == len(cc.path) - 1
        for v in vals:
            if last:
                if self.test_of(cc)(v, self.class_ancestors):
                    return ((node, p, v),)
            elif isinstance(v, str):
                rest = self._dfs(v, cc, k + 1)
                if rest is not None:
                    return ((node, p, v), *rest)
        return None

    def _establish(
        self,
        a: ActKey,
        premises: Chain,
        absent: tuple[tuple[str, tuple[str, ...]], ...],
        concl: tuple[tuple[str, Value], ...] | None = None,
    ) -> None:
        st = self.st
        ix = self.ix
        rule = ix.rules[a[0]]
        s = a[1]
        st.seq += 1
        just = Justification(
            rule.rule.iri, s, premises, tuple(Absence(x, path) for x, path in absent)
        )
        st.set_act(a, Act(st.seq, premises, absent, just, concl))
        for i, (p, v) in enumerate(_conclusions(rule, concl)):
            err = rule.static_errors[i] if i < len(rule.static_errors) else None
            if err is not None:
                self.violations.append(
                    Violation(err[0], s, p, v, f"rule {rule.rule.name}: {err[2]}")  # type: ignore[arg-type]
                )
                continue
            prop = ix.properties[p]
            if prop.domain not in self.class_ancestors(s):
                self.violations.append(
                    Violation(
                        "domain",
                        s,
                        p,
                        v,
                        f"rule {rule.rule.name} concludes {prop.name} on {s}, "
                        f"which is not a {local_name(prop.domain)}",
                    )
                )
                continue
            key = (s, p, v)
            self._touch(key)
            st.add_support(key, a)
            if p in ix.resolved_props:
                cands = st.cand.get((s, p))
                if cands is None or v not in cands:
                    st.add_cand((s, p), v)
                self.touched_resolved[(s, p)] = None
            elif not st.visible(key):
                self._show(key)

    def _delete(self, a: ActKey) -> None:
        st = self.st
        ix = self.ix
        rule = ix.rules[a[0]]
        s = a[1]
        keys = []
        for p, v in _conclusions(rule, st.acts[a].concl):
            key = (s, p, v)
            sup = st.support.get(key)
            if sup is not None and a in sup:
                self._touch(key)
                keys.append(key)
        st.set_act(a, None)
        for key in keys:
            p, v = key[1], key[2]
            st.del_support(key, a)
            if p in ix.resolved_props:
                if key not in st.support:
                    st.del_cand((s, p), v)
                self.touched_resolved[(s, p)] = None
            elif key in st.base or not st.visible(key):
                continue
            elif key not in st.support:
                self._hide(key)
            elif p in ix.recursive:
                self._hide(key)
                self.overdeleted.setdefault(rule.stratum, {})[key] = None

    # --- resolution and conflicts --------------------------------------------------------

    def _resolve(self) -> None:
        """Decide the visible value of touched FirstListed properties: base values stay, and of
        the derived candidates the one listed first in oneOf wins."""
        st = self.st
        while self.touched_resolved:
            touched = self.touched_resolved
            self.touched_resolved = {}
            for s, p in touched:
                winner = self.winner(s, p)
                current = st.values(s, p)
                desired = [v for v in current if (s, p, v) in st.base]
                if winner is not None and winner not in desired:
                    desired.append(winner)
                for v in current:
                    if v not in desired:
                        self._touch((s, p, v))
                        self._hide((s, p, v))
                for v in desired:
                    if v not in current:
                        self._touch((s, p, v))
                        self._show((s, p, v))
                if len(desired) > 1:
                    self.touched_single[(s, p)] = None

    def winner(self, s: str, p: str) -> Value | None:
        cands = self.st.cand.get((s, p))
        if not cands:
            return None
        order = self.ix.properties[p].one_of
        rank = {v: i for i, v in enumerate(order)}
        return min(cands, key=lambda v: rank.get(v, len(order)))  # type: ignore[arg-type]

    def _check_conflicts(self) -> None:
        st = self.st
        for s, p in self.touched_single:
            vals = st.values(s, p)
            if len(vals) < 2:
                continue
            prop = self.ix.properties[p]
            rules = sorted(
                {self.ix.rules[a[0]].rule.name for v in vals for a in st.support.get((s, p, v), ())}
            )
            shown = ", ".join(local_name(v) if isinstance(v, str) else str(v) for v in vals)
            self.violations.append(
                Violation(
                    "conflict",
                    s,
                    p,
                    tuple(vals),
                    f"{prop.name} of {s} is single-valued but derivations disagree: {shown}"
                    + (f" (rules {', '.join(rules)})" if rules else ""),
                )
            )
