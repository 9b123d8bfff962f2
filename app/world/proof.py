"""Proof trees: why a fact holds, down to the base facts and where they came from.

A node is a visible fact. A base fact (asserted with api/perception/tool/human provenance) is a
leaf: its proof is itself. A derived fact lists its derivations — the rule, the premise facts
(each a node) and the negative premises (``X was not assigned``). At the root every derivation
is expanded; below it, the earliest derivation is expanded and the others are named, which keeps
the tree readable and finite. For a ``FirstListed`` property the root names the overruled
candidate values and the rules that derived them.

Every node also carries what a clinician reads (``app.clinical_text`` renders it): the
property's ``rdfs:label``, the value as a label (an enumeration member's label, an instance's
class label), the property's UCUM unit, and each rule's label — a humanised local name where the
ontology gives no ``rdfs:label``. ``render()`` keeps the engine's own notation for the audit
trail and the narration Bridge.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from app.ontology.model import AggregateDef, Ontology, Value, humanise, local_name
from app.world.facts import Absence, Fact, FactKey, json_value

if TYPE_CHECKING:
    from app.world.engine import Engine


@dataclass(frozen=True)
class NegativePremise:
    absence: Absence
    label: str
    text: str = ""  # what a clinician reads: "No eGFR on record"


@dataclass(frozen=True)
class Derivation:
    rule: str
    premises: tuple[ProofNode, ...]
    absent: tuple[NegativePremise, ...]
    expanded: bool = True
    rule_label: str = ""  # the rule's rdfs:label, else its humanised name


@dataclass(frozen=True)
class Overruled:
    value: Value
    rules: tuple[str, ...]
    label: str
    text: str = ""  # the value as a clinician reads it
    rule_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProofNode:
    fact: Fact
    label: str  # "heartRate = 130 /min"
    tag: str  # "[api Observation/obs-1 v3]" or "[rule TachyChestPain]"
    derivations: tuple[Derivation, ...] = ()
    overruled: tuple[Overruled, ...] = ()
    #: what a clinician reads: the property's label, the value as text, its UCUM unit, and the
    #: subject's name when it is not the proof's subject
    name: str = ""
    text: str = ""
    unit: str | None = None
    about: str | None = None

    @property
    def is_base(self) -> bool:
        return not self.derivations

    def to_json(self) -> dict[str, Any]:
        f = self.fact
        out: dict[str, Any] = {
            "subject": f.subject,
            "property": local_name(f.property),
            "propertyIri": f.property,
            "value": _json(f.value),
            "label": self.label,
            "name": self.name,
            "valueText": self.text,
            "provenance": f.provenance,
            "tx": f.tx,
        }
        if self.unit:
            out["unit"] = self.unit
        if self.about:
            out["about"] = self.about
        if isinstance(f.value, str) and f.value.startswith(("http://", "https://", "urn:")):
            out["valueIri"] = f.value
        if f.confidence is not None:
            out["confidence"] = f.confidence
        if f.source is not None:
            out["source"] = f.source.to_json()
        if self.derivations:
            out["derivations"] = [
                {
                    "rule": d.rule,
                    "ruleName": local_name(d.rule),
                    "ruleLabel": d.rule_label,
                    "expanded": d.expanded,
                    "premises": [p.to_json() for p in d.premises],
                    "absent": [
                        {
                            "subject": n.absence.subject,
                            "path": [local_name(x) for x in n.absence.path],
                            "label": n.label,
                            "text": n.text,
                        }
                        for n in d.absent
                    ],
                }
                for d in self.derivations
            ]
        if self.overruled:
            out["overruled"] = [
                {
                    "value": _json(o.value),
                    "rules": [local_name(r) for r in o.rules],
                    "ruleIris": list(o.rules),
                    "ruleLabels": list(o.rule_labels),
                    "label": o.label,
                    "valueText": o.text,
                }
                for o in self.overruled
            ]
        return out

    def _render(self, out: list[str], indent: int) -> None:
        pad = "  " * indent
        first = self.derivations[0] if self.derivations else None
        out.append(f"{pad}{self.label}  {self.tag}")
        if first is not None:
            _render_body(first, out, indent + 1)
        for d in self.derivations[1:]:
            out.append(f"{pad}  also [rule {local_name(d.rule)}]")
            if d.expanded:
                _render_body(d, out, indent + 2)
        for o in self.overruled:
            rules = ", ".join(f"rule {local_name(r)}" for r in o.rules)
            out.append(f"{pad}  overrules {o.label}  [{rules}]")

    def leaves(self) -> Iterator[Fact]:
        if self.is_base:
            if self.fact.provenance != "rule":
                yield self.fact
            return
        for d in self.derivations:
            for p in d.premises:
                yield from p.leaves()


def _render_body(d: Derivation, out: list[str], indent: int) -> None:
    for p in d.premises:
        p._render(out, indent)
    for n in d.absent:
        out.append(f"{'  ' * indent}{n.label}")


@dataclass(frozen=True)
class Proof:
    """Why ``subject``'s ``property`` has its values (one node per value; none when unassigned)."""

    subject: str
    property: str
    nodes: tuple[ProofNode, ...]

    def render(self) -> str:
        """Deterministic indented text, one line per fact, premises indented beneath."""
        if not self.nodes:
            return f"{local_name(self.property)} was not assigned"
        out: list[str] = []
        for n in self.nodes:
            n._render(out, 0)
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "property": local_name(self.property),
            "propertyIri": self.property,
            "values": [n.to_json() for n in self.nodes],
        }

    def base_facts(self) -> Iterator[Fact]:
        """The leaves: base facts with their provenance and source, each once, in tree order."""
        seen: set[FactKey] = set()
        for n in self.nodes:
            for f in n.leaves():
                if f.key not in seen:
                    seen.add(f.key)
                    yield f

    @builtins.property
    def value(self) -> Value | None:
        return self.nodes[0].fact.value if self.nodes else None


#: Keys of a proof's JSON that only say how a reader sees it (labels, units, the source's own
#: date): a label edited, or a run stored before they existed, is the same proof.
PRESENTATION_KEYS = frozenset(
    {"name", "valueText", "unit", "about", "ruleLabel", "ruleLabels", "text", "date"}
)


def proof_core(value: Any) -> Any:
    """A proof's JSON (or any part of it) without its ``PRESENTATION_KEYS``: what replay
    compares."""
    if isinstance(value, dict):
        return {k: proof_core(v) for k, v in value.items() if k not in PRESENTATION_KEYS}
    if isinstance(value, list):
        return [proof_core(v) for v in value]
    return value


def describe_aggregate(
    agg: AggregateDef, name: Callable[[str], str] = local_name, *, words: bool = False
) -> str:
    """``Sum of mme over hasDraftOrder, hasOrder`` (where-filters named by their properties);
    ``name`` names each property (its label, for a clinician), ``words`` the function too
    (``DaysCovered`` → ``Days covered``)."""
    paths = ", ".join(" → ".join(name(p) for p in path) for path in agg.over)
    of = f" of {name(agg.of)}" if agg.of else ""
    kept = {name(c.path[-1]) for c in agg.where}
    where = f" where {', '.join(sorted(kept))}" if kept else ""
    function = humanise(agg.function) if words else agg.function
    return f"{function}{of} over {paths}{where}"


def _json(v: Value) -> Any:
    if isinstance(v, str) and v.startswith(("http://", "https://", "urn:")):
        return local_name(v)
    return json_value(v)


class _Builder:
    def __init__(self, ontology: Ontology, engine: Engine, subject: str) -> None:
        self.ontology = ontology
        self.eng = engine
        self.subject = subject
        self.rule_labels = {r.iri: r.label for r in ontology.rules if r.label}

    def value_text(self, p: str, v: Value) -> str:
        prop = self.eng.ix.properties.get(p)
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, Decimal | int):
            text = str(v)
        elif v in self.eng.st.instances:
            inst = self.eng.st.instances[v]
            return f"→ {v} isA {local_name(inst.class_iri)}"
        elif v in self.eng.ix.individuals:
            ind = self.eng.ix.individuals[v]
            return f"= {ind.label or local_name(v)}"
        else:
            text = str(v)
        unit = f" {prop.unit}" if prop is not None and prop.unit else ""
        return f"= {text}{unit}"

    def label(self, s: str, p: str, v: Value) -> str:
        prefix = "" if s == self.subject else f"{s}."
        return f"{prefix}{local_name(p)} {self.value_text(p, v)}"

    # --- what a clinician reads -----------------------------------------------------------

    def name(self, iri: str) -> str:
        """A property's, class's or individual's ``rdfs:label``, else its humanised name."""
        ix = self.eng.ix
        node = ix.properties.get(iri) or ix.classes.get(iri) or ix.individuals.get(iri)
        label = getattr(node, "label", None)
        return str(label) if label else humanise(iri)

    def clinical_value(self, v: Value) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, Decimal | int):
            return str(v)
        if v in self.eng.st.instances:
            return self.instance_name(v)
        if v in self.eng.ix.individuals:
            return self.name(v)
        return str(v)

    def instance_name(self, iri: str) -> str:
        """An instance as a reader knows it: the value of its class's ``horis:namedBy``
        property (a drug's name), else its class's label."""
        cls = self.eng.st.instances[iri].class_iri
        ontology = self.ontology
        for c in ontology.ancestors(cls):
            named_by = getattr(ontology.classes.get(c), "named_by", None)
            found = self.eng.st.values(iri, named_by) if named_by else ()
            if found:
                return str(found[0])
        return self.name(cls)

    def about(self, s: str) -> str | None:
        if s == self.subject:
            return None
        return self.instance_name(s) if s in self.eng.st.instances else s

    def rule_label(self, rule: str) -> str:
        prop = self.eng.ix.properties.get(rule)
        if prop is not None and prop.aggregate is not None:
            return describe_aggregate(prop.aggregate, self.name, words=True)
        found = self.rule_labels.get(rule)
        return found or humanise(rule)

    def absent_text(self, a: Absence) -> str:
        """``eGFR: none on record``; ``Drafted for (Medication order): none on record``."""
        what = " → ".join(self.name(p) for p in a.path)
        about = self.about(a.subject)
        who = f" ({about})" if about else ""
        none = "none" if what.endswith("on record") else "none on record"
        return f"{what[:1].upper() + what[1:] if what[1:2].islower() else what}{who}: {none}"

    def clinical(self, key: FactKey) -> dict[str, Any]:
        s, p, v = key
        prop = self.eng.ix.properties.get(p)
        return {
            "name": self.name(p),
            "text": self.clinical_value(v),
            "unit": prop.unit if prop is not None and isinstance(v, Decimal | int) else None,
            "about": self.about(s),
        }

    def tag(self, fact: Fact) -> str:
        if fact.provenance == "rule":
            if fact.justifications:
                rule = fact.justifications[0].rule
                prop = self.eng.ix.properties.get(rule)
                if prop is not None and prop.aggregate is not None:
                    return f"[{describe_aggregate(prop.aggregate)}]"
                return f"[rule {local_name(rule)}]"
            return "[rule]"
        parts: list[str] = [fact.provenance]
        if fact.source is not None:
            ref = fact.source.reference
            if fact.source.version_id:
                ref += f" v{fact.source.version_id}"
            parts.append(" " + ref)
        if fact.confidence is not None:
            parts.append(f", confidence {fact.confidence:g}")
        return "[" + "".join(parts) + "]"

    def node(self, key: FactKey, expand_all: bool, trail: frozenset[FactKey]) -> ProofNode:
        fact = self.eng.fact_of(key)
        label = self.label(*key)
        clinical = self.clinical(key)
        if fact.provenance != "rule" or key in trail:
            return ProofNode(fact, label, self.tag(fact), **clinical)
        trail = trail | {key}
        derivations = []
        for i, j in enumerate(fact.justifications):
            if i > 0 and not expand_all:
                derivations.append(
                    Derivation(j.rule, (), (), expanded=False, rule_label=self.rule_label(j.rule))
                )
                continue
            premises = tuple(self.node(k, False, trail) for k in j.premises)
            absent = tuple(
                NegativePremise(
                    a,
                    ("" if a.subject == self.subject else f"{a.subject}.")
                    + " → ".join(local_name(x) for x in a.path)
                    + " was not assigned",
                    self.absent_text(a),
                )
                for a in j.absent
            )
            derivations.append(
                Derivation(j.rule, premises, absent, rule_label=self.rule_label(j.rule))
            )
        return ProofNode(fact, label, self.tag(fact), tuple(derivations), **clinical)

    def overruled(self, s: str, p: str, winner: Value) -> tuple[Overruled, ...]:
        st, ix = self.eng.st, self.eng.ix
        cands = st.cand.get((s, p))
        if not cands:
            return ()
        out = []
        order = ix.properties[p].one_of
        for v in sorted(cands, key=lambda x: order.index(x) if x in order else len(order)):
            if v == winner:
                continue
            acts = sorted(st.support.get((s, p, v), ()), key=lambda a: st.acts[a].seq)
            rules = tuple(ix.rules[a[0]].rule.iri for a in acts)
            out.append(
                Overruled(
                    v,
                    rules,
                    self.label(s, p, v),
                    self.clinical_value(v),
                    tuple(self.rule_label(r) for r in rules),
                )
            )
        return tuple(out)


def build_proof(
    ontology: Ontology, engine: Engine, subject: str, property: str, value: Value | None
) -> Proof:
    b = _Builder(ontology, engine, subject)
    values = engine.st.values(subject, property)
    if value is not None:
        values = [v for v in values if v == value]
    nodes = []
    for v in values:
        node = b.node((subject, property, v), True, frozenset())
        over = b.overruled(subject, property, v)
        if over:
            node = replace(node, overruled=over)
        nodes.append(node)
    return Proof(subject, property, tuple(nodes))
