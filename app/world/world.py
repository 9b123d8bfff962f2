"""The World: instances and facts behind a gate, kept at the rules' fixed point.

Every change is a transaction: gate each change → apply → rules to a fixed point → commit, or
undo everything (contents, version, indexes) and return the violations. Snapshots are a version
and a mark in the undo history; ``restore`` undoes back to one.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from app.ontology.model import Condition, Ontology, Value
from app.world.decided import Blocker, undecided
from app.world.engine import Engine
from app.world.facts import (
    PROVENANCES,
    AddInstance,
    Assert,
    Change,
    Fact,
    FactKey,
    Instance,
    Provenance,
    Retract,
    Snapshot,
    Source,
    TxResult,
    Violation,
    WorldError,
)
from app.world.gate import check_assert
from app.world.index import OntologyIndex
from app.world.proof import Proof, build_proof
from app.world.store import BaseRecord, Store
from app.world.values import (
    DATATYPES,
    DECIMAL,
    NotOfType,
    normalize,
    parse_decimal_text,
)

_INDEXES: dict[int, tuple[weakref.ref[Ontology], OntologyIndex]] = {}


def ontology_index(onto: Ontology) -> OntologyIndex:
    """The compiled index of ``onto``, built once per Ontology object (and dropped with it).

    Raises ``StratificationError`` when the rules are not stratifiable.
    """
    key = id(onto)
    got = _INDEXES.get(key)
    if got is not None and got[0]() is onto:
        return got[1]
    ix = OntologyIndex(onto)
    _INDEXES[key] = (weakref.ref(onto, lambda _ref: _INDEXES.pop(key, None)), ix)
    return ix


class World:
    """An indexed, rule-maintained store of instances and facts over one ontology."""

    def __init__(self, ontology: Ontology, *, now: datetime | None = None) -> None:
        """``now`` is the run's time (the hook call's): time windows in conditions are measured
        from it. A World without it finds no value inside any window."""
        self.ontology = ontology
        self.now = now
        self._ix = ontology_index(ontology)
        self._st = Store(self._ix.object_properties)
        self._engine = Engine(self._ix, self._st, now)
        self._version = 0
        self._history: list[tuple[int, int, int, list[tuple[Any, ...]]]] = []
        self._marks = 0
        # proofs built at the current state (its mark); any transaction or restore moves the
        # mark and the next proof is built afresh
        self._proofs: dict[tuple[str, str, Value | None], Proof] = {}
        self._proofs_at = 0

    # --- transactions --------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The id of the last committed transaction (0 for an empty World)."""
        return self._version

    def transact(
        self,
        changes: Sequence[Change],
        *,
        provenance: Provenance,
        confidence: float | None = None,
        source: Source | None = None,
    ) -> TxResult:
        """Apply ``changes`` atomically. Instances are added first, then facts in order; each
        change's own ``source``/``confidence`` overrides the transaction's."""
        if provenance not in PROVENANCES:
            raise ValueError(f"unknown provenance {provenance!r}")
        tx = self._version + 1
        st, eng = self._st, self._engine
        st.log = []
        seq0 = st.seq
        eng.begin(tx)
        violations: list[Violation] = []
        for ch in changes:
            if isinstance(ch, AddInstance):
                v = self._add_instance(ch, provenance, source)
                if v is not None:
                    violations.append(v)
        if provenance == "rule":
            violations.append(
                Violation(
                    "rules-only",
                    None,
                    None,
                    None,
                    "provenance 'rule' is reserved to facts the World derives itself",
                )
            )
        for ch in changes:
            if isinstance(ch, Assert):
                conf = ch.confidence if ch.confidence is not None else confidence
                got = check_assert(self._ix, st, ch, provenance, conf)
                if isinstance(got, Violation):
                    violations.append(got)
                    continue
                p, value = got
                rec = BaseRecord(provenance, conf, ch.source or source, tx)
                eng.assert_base((ch.subject, p, value), rec)
            elif isinstance(ch, Retract):
                v = self._retract(ch)
                if v is not None:
                    violations.append(v)
        if not violations:
            violations.extend(eng.run())
        if violations:
            st.undo(st.log)
            st.log = []
            st.seq = seq0
            eng.end()
            return TxResult(False, tx, violations=tuple(violations))
        added, removed = self._delta()
        eng.end()
        self._marks += 1
        self._history.append((self._marks, self._version, seq0, st.log))
        st.log = []
        self._version = tx
        return TxResult(True, tx, tuple(added), tuple(removed))

    def assert_(
        self,
        subject: str,
        property: str,
        value: Value,
        *,
        provenance: Provenance = "api",
        source: Source | None = None,
        confidence: float | None = None,
        unit: str | None = None,
    ) -> TxResult:
        return self.transact(
            [Assert(subject, property, value, source, confidence, unit)], provenance=provenance
        )

    def retract(
        self,
        subject: str,
        property: str,
        value: Value | None = None,
        *,
        provenance: Provenance = "api",
    ) -> TxResult:
        return self.transact([Retract(subject, property, value)], provenance=provenance)

    def add_instance(
        self,
        id: str,
        class_iri: str,
        *,
        provenance: Provenance = "api",
        source: Source | None = None,
    ) -> TxResult:
        return self.transact([AddInstance(id, class_iri, source)], provenance=provenance)

    def _add_instance(
        self, ch: AddInstance, provenance: Provenance, source: Source | None
    ) -> Violation | None:
        cls = self._ix.resolve("class", ch.class_iri)
        if cls is None:
            return Violation(
                "unknown-class", ch.id, None, ch.class_iri, f"no class {ch.class_iri!r}"
            )
        existing = self._st.instances.get(ch.id)
        if existing is not None:
            if existing.class_iri == cls:
                return None
            return Violation(
                "duplicate-instance",
                ch.id,
                None,
                ch.class_iri,
                f"{ch.id} already exists as a {existing.class_iri}",
            )
        self._st.add_instance(Instance(ch.id, cls, provenance, ch.source or source))
        self._engine.dirty_subject(ch.id, cls)
        return None

    def _retract(self, ch: Retract) -> Violation | None:
        p = self._ix.resolve("property", ch.property)
        if p is None:
            return Violation(
                "unknown-property",
                ch.subject,
                ch.property,
                ch.value,
                f"no property {ch.property!r}",
            )
        st = self._st
        if ch.value is None:
            keys = [(ch.subject, p, v) for v in st.values(ch.subject, p)]
            keys = [k for k in keys if k in st.base]
        else:
            raw = ch.value
            rng = self._ix.properties[p].range
            value: Value
            if rng in DATATYPES:
                try:
                    value = normalize(rng, raw)
                except NotOfType:
                    return None  # nothing of that shape can have been stored
            elif isinstance(raw, str):
                in_world = raw in st.instances
                value = raw if in_world else (self._ix.resolve("individual", raw) or raw)
            else:
                return None
            key = (ch.subject, p, value)
            if key not in st.base:
                if st.visible(key):
                    return Violation(
                        "derived",
                        ch.subject,
                        p,
                        ch.value,
                        f"{self._ix.properties[p].name} = {ch.value} is derived by rules; "
                        "retract its premises instead",
                    )
                return None
            keys = [key]
        for key in keys:
            self._engine.retract_base(key)
        return None

    def _delta(self) -> tuple[list[Fact], list[Fact]]:
        eng, st = self._engine, self._st
        added: list[Fact] = []
        removed: list[Fact] = []
        for key, old in eng.before.items():
            if not st.visible(key):
                if old is not None:
                    removed.append(old)
                continue
            if old is None:
                added.append(eng.fact_of(key))
                continue
            rec = st.base.get(key)
            if rec is None:
                same = old.provenance == "rule"
            else:
                same = (old.provenance, old.confidence, old.source, old.tx) == (
                    rec.provenance,
                    rec.confidence,
                    rec.source,
                    rec.tx,
                )
            if not same:
                removed.append(old)
                added.append(eng.fact_of(key))
        return added, removed

    # --- snapshots -----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        mark = self._history[-1][0] if self._history else 0
        return Snapshot(self._version, mark, id(self))

    def restore(self, snapshot: Snapshot) -> None:
        """Undo every transaction committed after ``snapshot``."""
        if snapshot.world != id(self):
            raise WorldError("the snapshot belongs to another World")
        marks = [h[0] for h in self._history]
        if snapshot.mark != 0 and snapshot.mark not in marks:
            raise WorldError(f"snapshot at version {snapshot.version} is no longer in history")
        while self._history and self._history[-1][0] != snapshot.mark:
            _, version, seq0, log = self._history.pop()
            self._st.undo(log)
            self._st.seq = seq0
            self._version = version

    # --- queries -------------------------------------------------------------------------

    def _p(self, property: str) -> str:
        if property in self._ix.properties:
            return property
        p = self._ix.resolve("property", property)
        if p is None:
            raise KeyError(f"no property {property!r}")
        return p

    def values(self, subject: str, property: str) -> tuple[Value, ...]:
        """The visible values, in the order they became visible."""
        return tuple(self._st.values(subject, self._p(property)))

    def value(self, subject: str, property: str) -> Value | None:
        vals = self._st.values(subject, self._p(property))
        return vals[0] if vals else None

    def reach(self, subject: str, path: Sequence[str]) -> tuple[Value, ...]:
        """Distinct values reached from ``subject`` along ``path``."""
        p = tuple(self._p(x) for x in path)
        return tuple(dict.fromkeys(self._st.reach(subject, p)))

    def holds(self, subject: str, conditions: Iterable[Condition]) -> bool:
        """Whether every condition holds on ``subject`` (some reached value satisfies it;
        ``isAssigned false`` holds when nothing is reached)."""
        return not self.failing(subject, conditions, first=True)

    def failing(
        self, subject: str, conditions: Iterable[Condition], *, first: bool = False
    ) -> tuple[Condition, ...]:
        """The conditions that do not hold on ``subject`` (to say what is missing)."""
        out: list[Condition] = []
        for cond in conditions:
            cc = self._ix.compiled(cond)
            if cc.negative:
                ok = not self._st.reaches_any(subject, cc.path)
            else:
                ok = self._engine.chain(subject, cc) is not None
            if not ok:
                out.append(cond)
                if first:
                    break
        return tuple(out)

    def witnesses(
        self, subject: str, property: str, conditions: Iterable[Condition]
    ) -> tuple[Value, ...]:
        """The values of ``property`` on ``subject`` that satisfy every positive condition whose
        path starts with ``property`` (the rest of the path read from the value). Rules hold when
        *some* value satisfies them; this names *all* such values, e.g. every order a rule's
        condition would have accepted, not only the one its justification recorded."""
        p = self._p(property)
        tests: list[tuple[Condition, Any]] = []
        for cond in conditions:
            cc = self._ix.compiled(cond)
            if cc.negative or not cc.path or cc.path[0] != p:
                continue
            tests.append((cond, self._engine.test_of(cc)))
        out: list[Value] = []
        for v in self.values(subject, p):
            ok = True
            for cond, test in tests:
                if len(cond.path) > 1:
                    ok = isinstance(v, str) and self.holds(v, [replace(cond, path=cond.path[1:])])
                else:
                    ok = test(v, self._engine.class_ancestors)
                if not ok:
                    break
            if ok:
                out.append(v)
        return tuple(out)

    def each(
        self,
        focus: str | None,
        paths: Sequence[Sequence[str]],
        where: Sequence[Condition] = (),
    ) -> list[str]:
        """The instances a ``horis:forEach`` is about: those its paths reach from ``focus``
        (their union, each once, in the order the paths reach them: hydration's order) that
        satisfy every ``where`` condition."""
        if focus is None:
            return []
        found: dict[str, None] = {}
        for path in paths:
            for value in self.reach(focus, path):
                if isinstance(value, str) and self.instance(value) is not None:
                    found.setdefault(value, None)
        return [i for i in found if not where or self.holds(i, where)]

    def instances(self, class_iri: str | None = None) -> tuple[Instance, ...]:
        """Instances of ``class_iri`` or any subclass (all instances when None)."""
        insts = self._st.instances
        if class_iri is None:
            return tuple(insts.values())
        cls = self._ix.resolve("class", class_iri) or class_iri
        return tuple(
            i
            for i in insts.values()
            if cls in self._ix.ancestors.get(i.class_iri, frozenset((i.class_iri,)))
        )

    def instance(self, id: str) -> Instance | None:
        return self._st.instances.get(id)

    def is_a(self, value: str, class_iri: str) -> bool:
        """Whether an instance (or individual) is of ``class_iri`` or below."""
        cls = self._ix.resolve("class", class_iri) or class_iri
        return cls in self._engine.class_ancestors(value)

    def fact(self, subject: str, property: str, value: Value) -> Fact | None:
        key: FactKey = (subject, self._p(property), value)
        return self._engine.fact_of(key) if self._st.visible(key) else None

    def facts(self) -> tuple[Fact, ...]:
        """Every visible fact: subjects in the order they were added, properties by IRI, values
        in the order they became visible."""
        st = self._st
        fact_of = self._engine.fact_of
        pos = {s: i for i, s in enumerate(st.instances)}
        keys = sorted(st.sp, key=lambda sp: (pos.get(sp[0], -1), sp[1]))
        return tuple(fact_of((s, p, v)) for (s, p) in keys for v in st.values(s, p))

    def base_facts(self) -> tuple[Fact, ...]:
        st = self._st
        return tuple(self._engine.fact_of(k) for k in st.base)

    def undecided(
        self,
        subject: str,
        goal: Iterable[Condition],
        incomplete: Iterable[str],
        records: Mapping[str, frozenset[str]] | None = None,
    ) -> tuple[Blocker, ...]:
        """Why ``goal`` on ``subject`` is not decided while the ``incomplete`` input properties
        may still change (empty: decided) — ``app.world.decided``. ``records``: for a property
        incomplete on some records only, those records (``Type/id``)."""
        return undecided(self, self._ix, self._st, self._engine, subject, goal, incomplete, records)

    def proof(self, subject: str, property: str, value: Value | None = None) -> Proof:
        """The proof of ``subject``'s ``property`` (of one value when given). A proof is built
        once per state of the World: asked again before the next transaction (a narration, then
        the run's outcome, then its cards), the same proof is returned."""
        mark = self._history[-1][0] if self._history else 0
        if mark != self._proofs_at:
            self._proofs.clear()
            self._proofs_at = mark
        key = (subject, self._p(property), value)
        built = self._proofs.get(key)
        if built is None:
            built = build_proof(self.ontology, self._engine, key[0], key[1], value)
            self._proofs[key] = built
        return built

    # --- serialization -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Instances and base facts (derived facts are recomputed on load), exactly."""

        def enc(v: Value) -> Any:
            return str(v) if isinstance(v, Decimal) else v

        return {
            "version": self._version,
            "ontology": self.ontology.digest,
            **({"now": self.now.isoformat()} if self.now is not None else {}),
            "instances": [
                {
                    "id": i.id,
                    "class": i.class_iri,
                    "provenance": i.provenance,
                    **({"source": i.source.to_json()} if i.source else {}),
                }
                for i in self._st.instances.values()
            ],
            "facts": [
                {
                    "subject": s,
                    "property": p,
                    "value": enc(v),
                    "provenance": rec.provenance,
                    "tx": rec.tx,
                    **({"confidence": rec.confidence} if rec.confidence is not None else {}),
                    **({"source": rec.source.to_json()} if rec.source else {}),
                }
                for (s, p, v), rec in self._st.base.items()
            ],
        }

    @classmethod
    def from_json(
        cls, ontology: Ontology, data: dict[str, Any], *, now: datetime | None = None
    ) -> World:
        """Rebuild a World from ``to_json`` output: every fact passes the gate again and the
        rules run to their fixed point (so a newer ontology re-derives). ``now`` defaults to the
        time the World was saved with. Raises ``WorldError`` with the violations when the data
        no longer fits the ontology."""
        if now is None and isinstance(data.get("now"), str):
            now = datetime.fromisoformat(data["now"])
        world = cls(ontology, now=now)
        st, eng, ix = world._st, world._engine, world._ix
        version = int(data.get("version", 0))
        st.log = []
        eng.begin(version)
        violations: list[Violation] = []
        for i in data.get("instances", []):
            src = Source.from_json(i["source"]) if i.get("source") else None
            v = world._add_instance(AddInstance(i["id"], i["class"], src), i["provenance"], None)
            if v is not None:
                violations.append(v)
        for f in data.get("facts", []):
            p = ix.resolve("property", f["property"])
            value = f["value"]
            if p is not None and ix.properties[p].range == DECIMAL and isinstance(value, str):
                with contextlib.suppress(NotOfType):  # the gate reports it as a range violation
                    value = parse_decimal_text(value)
            src = Source.from_json(f["source"]) if f.get("source") else None
            ch = Assert(f["subject"], f["property"], value, src, f.get("confidence"))
            got = check_assert(ix, st, ch, f["provenance"], f.get("confidence"))
            if isinstance(got, Violation):
                violations.append(got)
                continue
            rec = BaseRecord(f["provenance"], f.get("confidence"), src, int(f.get("tx", version)))
            eng.assert_base((f["subject"], got[0], got[1]), rec)
        if not violations:
            violations.extend(eng.run())
        if violations:
            raise WorldError("the saved World does not fit the ontology", tuple(violations))
        st.log = []
        world._version = version
        return world
