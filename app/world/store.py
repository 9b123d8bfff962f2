"""The indexed fact store with an undo log.

Every mutation goes through a method here that appends its inverse to the current log, so a
transaction (or a run of them) can be undone exactly: contents, sequence numbers and counters.

Layout:
- ``sp[(subject, property)]`` → visible values, each with the sequence number that orders them;
- ``rev[(property, value)]`` → subjects, for object properties (reverse path navigation);
- ``base[key]`` → the base assertion (provenance, confidence, source, tx);
- ``support[key]`` → the rule activations currently deriving the key (truth maintenance);
- ``acts[(rule index, subject)]`` → the witness of a holding activation;
- ``cand[(subject, property)]`` → derived candidate values of a FirstListed property.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

from app.ontology.model import Value
from app.world.facts import FactKey, Instance, Justification, Provenance, Source

ActKey: TypeAlias = tuple[int, str]
Chain: TypeAlias = tuple[FactKey, ...]


@dataclass(frozen=True, slots=True)
class BaseRecord:
    provenance: Provenance
    confidence: float | None
    source: Source | None
    tx: int


@dataclass(frozen=True, slots=True)
class Act:
    """A holding rule activation: when it was established and what it rests on."""

    seq: int
    premises: Chain
    absent: tuple[tuple[str, tuple[str, ...]], ...]
    justification: Justification
    #: an aggregate's computed conclusion (rules conclude what they declare)
    concl: tuple[tuple[str, Value], ...] | None = None


_V_ADD, _V_DEL, _BASE, _S_ADD, _S_DEL, _ACT, _INST, _C_ADD, _C_DEL = range(9)


class Store:
    def __init__(self, object_properties: frozenset[str]) -> None:
        self.object_properties = object_properties
        self.sp: dict[tuple[str, str], dict[Value, int]] = {}
        self.rev: dict[tuple[str, Value], dict[str, None]] = {}
        self.vtx: dict[FactKey, int] = {}
        self.base: dict[FactKey, BaseRecord] = {}
        self.support: dict[FactKey, dict[ActKey, None]] = {}
        self.acts: dict[ActKey, Act] = {}
        self.cand: dict[tuple[str, str], dict[Value, None]] = {}
        self.instances: dict[str, Instance] = {}
        self.by_class: dict[str, dict[str, None]] = {}
        self.seq = 0
        self.log: list[tuple[Any, ...]] = []

    # --- reads -------------------------------------------------------------------------

    def values(self, s: str, p: str) -> list[Value]:
        vals = self.sp.get((s, p))
        if not vals:
            return []
        if len(vals) == 1:
            return list(vals)
        return sorted(vals, key=vals.__getitem__)

    def visible(self, key: FactKey) -> bool:
        vals = self.sp.get((key[0], key[1]))
        return vals is not None and key[2] in vals

    def reaches_any(self, s: str, path: tuple[str, ...]) -> bool:
        if len(path) == 1:
            return bool(self.sp.get((s, path[0])))
        return next(self.reach(s, path), None) is not None

    def reach(self, s: str, path: tuple[str, ...]) -> Iterator[Value]:
        """Values at the end of ``path`` from ``s`` (may repeat when paths converge)."""
        frontier: list[Value] = [s]
        last = len(path) - 1
        for k, p in enumerate(path):
            nxt: list[Value] = []
            for node in frontier:
                if not isinstance(node, str) or isinstance(node, bool):
                    continue
                vals = self.sp.get((node, p))
                if vals:
                    nxt.extend(self.values(node, p) if len(vals) > 1 else vals)
            if k == last:
                yield from nxt
                return
            frontier = nxt

    def reverse(self, nodes: list[str], reverse_prefix: tuple[str, ...]) -> list[str]:
        """Subjects that reach any of ``nodes`` by following ``reverse_prefix`` backwards."""
        frontier = nodes
        rev = self.rev
        for p in reverse_prefix:
            nxt: dict[str, None] = {}
            for n in frontier:
                subs = rev.get((p, n))
                if subs:
                    nxt.update(subs)
            if not nxt:
                return []
            frontier = list(nxt)
        return frontier

    # --- mutations (logged) --------------------------------------------------------------

    def add_visible(self, key: FactKey, tx: int, seq: int | None = None) -> None:
        s, p, v = key
        if seq is None:
            self.seq += 1
            seq = self.seq
        vals = self.sp.get((s, p))
        if vals is None:
            self.sp[(s, p)] = {v: seq}
        else:
            vals[v] = seq
        if p in self.object_properties:
            subs = self.rev.get((p, v))
            if subs is None:
                self.rev[(p, v)] = {s: None}
            else:
                subs[s] = None
        self.vtx[key] = tx
        self.log.append((_V_ADD, key))

    def remove_visible(self, key: FactKey) -> int:
        s, p, v = key
        vals = self.sp[(s, p)]
        seq = vals.pop(v)
        if not vals:
            del self.sp[(s, p)]
        if p in self.object_properties:
            subs = self.rev[(p, v)]
            del subs[s]
            if not subs:
                del self.rev[(p, v)]
        tx = self.vtx.pop(key)
        self.log.append((_V_DEL, key, seq, tx))
        return seq

    def set_base(self, key: FactKey, rec: BaseRecord | None) -> None:
        old = self.base.get(key)
        if rec is None:
            del self.base[key]
        else:
            self.base[key] = rec
        self.log.append((_BASE, key, old))

    def add_support(self, key: FactKey, act: ActKey) -> None:
        sup = self.support.get(key)
        if sup is None:
            self.support[key] = {act: None}
        else:
            sup[act] = None
        self.log.append((_S_ADD, key, act))

    def del_support(self, key: FactKey, act: ActKey) -> None:
        sup = self.support[key]
        del sup[act]
        if not sup:
            del self.support[key]
        self.log.append((_S_DEL, key, act))

    def set_act(self, act: ActKey, value: Act | None) -> None:
        old = self.acts.get(act)
        if value is None:
            del self.acts[act]
        else:
            self.acts[act] = value
        self.log.append((_ACT, act, old))

    def add_cand(self, sp: tuple[str, str], v: Value) -> None:
        c = self.cand.get(sp)
        if c is None:
            self.cand[sp] = {v: None}
        else:
            c[v] = None
        self.log.append((_C_ADD, sp, v))

    def del_cand(self, sp: tuple[str, str], v: Value) -> None:
        c = self.cand[sp]
        del c[v]
        if not c:
            del self.cand[sp]
        self.log.append((_C_DEL, sp, v))

    def add_instance(self, inst: Instance) -> None:
        self.instances[inst.id] = inst
        self.by_class.setdefault(inst.class_iri, {})[inst.id] = None
        self.log.append((_INST, inst.id))

    # --- undo --------------------------------------------------------------------------

    def undo(self, entries: list[tuple[Any, ...]]) -> None:
        """Apply the inverses of ``entries`` newest first; nothing is logged."""
        log = self.log
        self.log = []
        try:
            for e in reversed(entries):
                op = e[0]
                if op == _V_ADD:
                    self.remove_visible(e[1])
                elif op == _V_DEL:
                    self.add_visible(e[1], e[3], e[2])
                elif op == _BASE:
                    if e[2] is None:
                        del self.base[e[1]]
                    else:
                        self.base[e[1]] = e[2]
                elif op == _S_ADD:
                    self.del_support(e[1], e[2])
                elif op == _S_DEL:
                    self.add_support(e[1], e[2])
                elif op == _ACT:
                    if e[2] is None:
                        del self.acts[e[1]]
                    else:
                        self.acts[e[1]] = e[2]
                elif op == _C_ADD:
                    self.del_cand(e[1], e[2])
                elif op == _C_DEL:
                    self.add_cand(e[1], e[2])
                elif op == _INST:
                    inst = self.instances.pop(e[1])
                    ids = self.by_class[inst.class_iri]
                    del ids[e[1]]
                    if not ids:
                        del self.by_class[inst.class_iri]
        finally:
            self.log = log
