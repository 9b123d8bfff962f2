"""Shared reading helpers of the compiler: references, literals, conditions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from rdflib import BNode, Literal, URIRef
from rdflib.namespace import RDFS
from rdflib.term import Node

from app.ontology import _values as V
from app.ontology._rdf import Reader, literal_kind, short
from app.ontology.classes import ValueSetDef
from app.ontology.durations import parse_window
from app.ontology.names import HORIS
from app.ontology.rules import OPERATORS, Condition, Operator, Value
from app.ontology.workflows import StepKind


def H(term: str) -> URIRef:
    return URIRef(HORIS + term)


STEP_KINDS: dict[Node, StepKind] = {
    H(k): k
    for k in (
        "Step",
        "PerceptionStep",
        "ReasoningStep",
        "ActionStep",
        "NarrationStep",
        "ProposalStep",
        "WaitStep",
        "ChoiceStep",
        "SubflowStep",
    )
}
KIND_TYPES: dict[Node, str] = {
    H("Class"): "class",
    H("Property"): "property",
    H("Rule"): "rule",
    H("Tool"): "tool",
    H("Workflow"): "workflow",
    H("CdsService"): "service",
    H("CombinedService"): "combined",
    **{t: "step" for t in STEP_KINDS},
}
ANNOTATIONS = frozenset({RDFS.label, RDFS.comment, RDFS.seeAlso, RDFS.isDefinedBy})
ANNOTATION_NAMESPACES = (
    "http://www.w3.org/2004/02/skos/core#",
    "http://purl.org/dc/terms/",
    "http://purl.org/dc/elements/1.1/",
)
CARDINALITIES = ("0..1", "1..1", "0..*", "1..*")
_ORDERED_OPS = ("greaterThan", "atLeast", "lessThan", "atMost")
_WINDOW_OPS = ("withinPast", "atMostAgo", "atLeastAgo")
BINDING_SCHEMES = ("python:", "rust:", "http://", "https://", "mcp://", "fhir:")

KIND_WORDS = {
    "class": "class",
    "individual": "individual",
    "property": "property",
    "rule": "rule",
    "tool": "tool",
    "step": "step",
    "workflow": "workflow",
    "service": "CDS service",
    "combined": "combined CDS service",
    "ontology": "ontology header",
}


class CompilerBase:
    """Typed reads of one node's values; problems go to ``reader.problems``."""

    def __init__(
        self,
        reader: Reader,
        registry: Mapping[str, Callable[..., Any]],
        value_sets: Mapping[str, ValueSetDef] | None = None,
    ) -> None:
        self.r = reader
        self.registry = registry
        self.value_sets: Mapping[str, ValueSetDef] = value_sets or {}
        self.kinds: dict[Node, str] = {}
        self.step_kind: dict[Node, StepKind] = {}
        self.individual_class: dict[Node, Node] = {}

    # --- references and literals ---------------------------------------------------------

    def ref(self, owner: Node, pred: Node, node: Node | None, kinds: tuple[str, ...]) -> str | None:
        """An IRI that must name a declared node of one of ``kinds``."""
        if node is None or node in self.r.unknown:
            return None
        if isinstance(node, URIRef) and self.kinds.get(node) in kinds:
            return str(node)
        what = " or ".join(KIND_WORDS[k] for k in kinds)
        if isinstance(node, URIRef):
            actual = self.kinds.get(node)
            detail = f"it is a {KIND_WORDS[actual]}" if actual else "it is not declared"
            self.r.problem(
                "dangling-reference",
                owner,
                f"{short(node)} must be a declared {what}, but {detail}",
                via=pred,
            )
        else:
            self.r.problem(
                "literal-type", owner, f"expects a {what}, got {literal_kind(node)}", via=pred
            )
        return None

    def refs(self, owner: Node, pred: Node, kinds: tuple[str, ...]) -> tuple[str, ...]:
        out = [self.ref(owner, pred, n, kinds) for n in self.r.members(owner, pred)]
        return tuple(o for o in out if o is not None)

    def type_ref(self, owner: Node, pred: Node, node: Node | None) -> str | None:
        """A class or one of the supported xsd datatypes."""
        if node is None:
            return None
        if node in V.RANGE_DATATYPES:
            return str(node)
        return self.ref(owner, pred, node, ("class",))

    def string(self, owner: Node, pred: Node, *, required: bool = False) -> str | None:
        node = self.r.one(owner, pred)
        if node is None:
            if required:
                self.r.problem("missing", owner, f"needs {short(pred)} (a string)")
            return None
        text = V.as_string(node)
        if text is None:
            self.r.problem(
                "literal-type", owner, f"expects a string, got {literal_kind(node)}", via=pred
            )
        return text

    def strings(self, owner: Node, pred: Node) -> tuple[str, ...]:
        out: list[str] = []
        for node in self.r.members(owner, pred):
            text = V.as_string(node)
            if text is None:
                self.r.problem(
                    "literal-type", owner, f"expects strings, got {literal_kind(node)}", via=pred
                )
            else:
                out.append(text)
        return tuple(out)

    def boolean(self, owner: Node, pred: Node) -> bool | None:
        node = self.r.one(owner, pred)
        if node is None:
            return None
        value = V.as_bool(node)
        if value is None:
            self.r.problem(
                "literal-type", owner, f"expects true or false, got {literal_kind(node)}", via=pred
            )
        return value

    def number(self, owner: Node, pred: Node) -> Decimal | int | None:
        node = self.r.one(owner, pred)
        if node is None:
            return None
        value = V.as_number(node)
        if value is None:
            self.r.problem(
                "literal-type", owner, f"expects a number, got {literal_kind(node)}", via=pred
            )
        return value

    def count(self, owner: Node, pred: Node) -> int | None:
        value = self.number(owner, pred)
        if value is not None and (not isinstance(value, int) or value < 0):
            self.r.problem("literal-type", owner, "expects a whole number ≥ 0", via=pred)
            return None
        return value if isinstance(value, int) else None

    def duration(self, owner: Node, pred: Node) -> float | None:
        node = self.r.one(owner, pred)
        if node is None:
            return None
        value = V.parse_duration(node)
        if value is None:
            self.r.problem(
                "literal-type",
                owner,
                f'expects a duration like "5s", "500ms" or "PT5S", got {literal_kind(node)}',
                via=pred,
            )
        return value

    def constant(self, owner: Node, pred: Node, allowed: tuple[str, ...]) -> str | None:
        node = self.r.one(owner, pred)
        if node is None or node in self.r.unknown:
            return None
        if isinstance(node, URIRef) and str(node).startswith(HORIS):
            name = str(node)[len(HORIS) :]
            if name in allowed:
                return name
        choices = " or ".join(f"horis:{a}" for a in allowed)
        self.r.problem(
            "literal-type", owner, f"expects {choices}, got {literal_kind(node)}", via=pred
        )
        return None

    def value(self, owner: Node, pred: Node, node: Node) -> Value | None:
        """A literal, or an IRI that must name a declared node."""
        if node in self.r.unknown:
            return None
        if isinstance(node, URIRef):
            if node not in self.kinds:
                self.r.problem(
                    "dangling-reference", owner, f"{short(node)} is not declared", via=pred
                )
                return None
            return str(node)
        value = V.as_value(node)
        if value is None:
            self.r.problem(
                "literal-type", owner, f"unsupported value {literal_kind(node)}", via=pred
            )
        return value

    def value_set(self, owner: Node, pred: Node, node: Node) -> str | None:
        """A value set's canonical URL (an IRI or a string) that names a loaded value set."""
        canonical = str(node) if isinstance(node, URIRef) else V.as_string(node)
        if canonical is None:
            self.r.problem(
                "literal-type",
                owner,
                f"expects a value set's canonical URL, got {literal_kind(node)}",
                via=pred,
            )
            return None
        if canonical not in self.value_sets:
            self.r.problem(
                "dangling-reference",
                owner,
                f"no value set with canonical {canonical} was loaded (value sets are FHIR "
                "ValueSet files in the valuesets folder beside the Turtle file)",
                via=pred,
            )
            return None
        return canonical

    def pinned_value_sets(self, owner: Node) -> tuple[str, ...]:
        """``horis:valueSet "<canonical>|<version>"``: each a loaded value set at that version
        (a pin without a version, or to a version the files do not hold, is a load problem)."""
        pred = H("valueSet")
        out: list[str] = []
        for node in self.r.members(owner, pred):
            text = V.as_string(node)
            if text is None:
                self.r.problem(
                    "literal-type",
                    owner,
                    f'expects "<canonical>|<version>", got {literal_kind(node)}',
                    via=pred,
                )
                continue
            url, _, version = text.partition("|")
            if not version:
                self.r.problem(
                    "value-set",
                    owner,
                    f"{url} is not pinned: write its version as {url}|<version> (an answer "
                    "must name the expansion it came from)",
                    via=pred,
                )
                continue
            vs = self.value_sets.get(url)
            if vs is None:
                self.value_set(owner, pred, Literal(url))  # says it is not loaded
                continue
            if vs.version != version:
                self.r.problem(
                    "value-set",
                    owner,
                    f"{url} is pinned to version {version}, but {vs.source} is version "
                    f"{vs.version}",
                    via=pred,
                )
                continue
            out.append(f"{url}|{version}")
        return tuple(out)

    def value_set_refs(self, owner: Node, pred: Node) -> tuple[str, ...]:
        out = [self.value_set(owner, pred, n) for n in self.r.members(owner, pred)]
        return tuple(o for o in out if o is not None)

    def label(self, node: Node) -> str | None:
        labels = self.r.peek(node, RDFS.label)
        return str(labels[0]) if labels else None

    # --- conditions and rules ------------------------------------------------------------

    def conditions(self, owner: Node, pred: Node) -> tuple[Condition, ...]:
        out = [self.condition(n) for n in self.r.members(owner, pred)]
        return tuple(c for c in out if c is not None)

    def condition(self, node: Node) -> Condition | None:
        r = self.r
        if not isinstance(node, BNode):
            r.problem("literal-type", node, "a condition must be a blank node [ … ]")
            return None
        props = r.objects(node, H("property"))
        paths = r.objects(node, H("path"))
        path: list[str] = []
        if len(props) + len(paths) != 1:
            r.problem("missing", node, "a condition needs exactly one horis:property or horis:path")
            self.r.dismissed.add(node)
            return None
        if props:
            p = self.ref(node, H("property"), props[0], ("property",))
            path = [p] if p else []
        else:
            items = r.items(paths[0]) if r.is_list(paths[0]) else [paths[0]]
            path = [p for p in (self.ref(node, H("path"), i, ("property",)) for i in items) if p]
            if not items:
                r.problem("missing", node, "horis:path must list at least one property")
        ops = [op for op in OPERATORS if r.peek(node, H(op))]
        if len(ops) != 1:
            names = ", ".join(f"horis:{o}" for o in ops) or "none"
            r.problem("missing", node, f"a condition needs exactly one operator (found {names})")
            self.r.dismissed.add(node)
            return None
        op: Operator = ops[0]
        raw = r.one(node, H(op))
        assert raw is not None
        value = self._operand(node, op, raw)
        if value is None or len(path) == 0:
            return None
        name, where = r.locate(node)
        return Condition(
            path=tuple(path), op=op, value=value, node=f"{name} {where}" if where else name
        )

    def _operand(self, node: Node, op: Operator, raw: Node) -> Value | tuple[Value, ...] | None:
        r, pred = self.r, H(op)
        if op in ("in", "notIn"):
            if not r.is_list(raw):
                r.problem("literal-type", node, "expects a list ( … )", via=pred)
                return None
            values = [self.value(node, pred, i) for i in r.items(raw)]
            return tuple(v for v in values if v is not None)
        if op == "isAssigned":
            flag = V.as_bool(raw)
            if flag is None:
                r.problem(
                    "literal-type",
                    node,
                    f"expects true or false, got {literal_kind(raw)}",
                    via=pred,
                )
            return flag
        if op == "matches":
            text = V.as_string(raw)
            if text is None or not V.valid_regex(text):
                r.problem("literal-type", node, "expects a regular expression string", via=pred)
                return None
            return text
        if op == "isA":
            if isinstance(raw, URIRef) and raw in self.kinds:
                return str(raw)
            r.problem(
                "dangling-reference",
                node,
                f"{literal_kind(raw)} is not a declared class",
                via=pred,
            )
            return None
        if op == "inValueSet":
            return self.value_set(node, pred, raw)
        if op in _WINDOW_OPS:
            text = V.as_string(raw)
            if text is None or parse_window(text) is None:
                r.problem(
                    "literal-type",
                    node,
                    f'expects an ISO 8601 duration of whole units like "P90D", "P2Y" or "PT24H", '
                    f"got {literal_kind(raw)}",
                    via=pred,
                )
                return None
            return text
        if op in _ORDERED_OPS:
            num = V.as_number(raw)
            if num is not None:
                return num
            time = V.as_time(raw)
            if time is None:
                r.problem(
                    "literal-type",
                    node,
                    f"expects a number or dateTime, got {literal_kind(raw)}",
                    via=pred,
                )
            return time
        return self.value(node, pred, raw)
