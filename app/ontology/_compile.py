"""The compiler from a merged graph (``_rdf.Reader``) to the model's frozen values."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, cast

from rdflib import BNode, Literal, URIRef
from rdflib.namespace import OWL, RDF, RDFS
from rdflib.term import Node

from app.ontology import _values as V
from app.ontology._rdf import Reader, literal_kind, short
from app.ontology.model import (
    HORIS,
    OPERATORS,
    AdapterCommit,
    ArgBinding,
    Branch,
    CandidateQuery,
    CardDecl,
    Cardinality,
    CdsServiceDef,
    ClassDef,
    Conclusion,
    Condition,
    EffectDecl,
    FhirMapping,
    Individual,
    Operator,
    PrefetchTemplate,
    PropertyDef,
    Rule,
    StepDef,
    StepKind,
    SubflowOutcome,
    SuggestionDecl,
    TextSource,
    ToolArg,
    ToolDef,
    Value,
    WorkflowDef,
    local_name,
)


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
_KIND_TYPES: dict[Node, str] = {
    H("Class"): "class",
    H("Property"): "property",
    H("Rule"): "rule",
    H("Tool"): "tool",
    H("Workflow"): "workflow",
    H("CdsService"): "service",
    **{t: "step" for t in STEP_KINDS},
}
_ANNOTATIONS = frozenset({RDFS.label, RDFS.comment, RDFS.seeAlso, RDFS.isDefinedBy})
_ANNOTATION_NAMESPACES = (
    "http://www.w3.org/2004/02/skos/core#",
    "http://purl.org/dc/terms/",
    "http://purl.org/dc/elements/1.1/",
)
_CARDINALITIES = ("0..1", "1..1", "0..*", "1..*")
_ORDERED_OPS = ("greaterThan", "atLeast", "lessThan", "atMost")
_BINDING_SCHEMES = ("python:", "rust:", "http://", "https://", "mcp://", "fhir:")


class Compiler:
    """Reads every kind of node; problems go to ``reader.problems``."""

    def __init__(self, reader: Reader, registry: Mapping[str, Callable[..., Any]]) -> None:
        self.r = reader
        self.registry = registry
        self.kinds: dict[Node, str] = {}
        self.step_kind: dict[Node, StepKind] = {}
        self.individual_class: dict[Node, Node] = {}

    # --- entry ---------------------------------------------------------------------------

    def compile(self) -> dict[str, Any]:
        self._classify()
        classes = {str(n): self._class(n) for n in self._of("class")}
        individuals = {str(n): self._individual(n) for n in self._of("individual")}
        properties = {str(n): self._property(n) for n in self._of("property")}
        rule_nodes = sorted(self._of("rule"), key=self.r.position)
        rules = tuple(self._rule(n, i) for i, n in enumerate(rule_nodes))
        tools = {str(n): self._tool(n) for n in self._of("tool")}
        steps = {str(n): self._step(n) for n in self._of("step")}
        workflows = {str(n): self._workflow(n, steps) for n in self._of("workflow")}
        services = {str(n): self._service(n) for n in self._of("service")}
        for n in self._of("ontology"):
            self.r.consume_all(n, [OWL.versionInfo, OWL.imports, RDF.type])
        self._leftovers()
        return {
            "classes": classes,
            "individuals": individuals,
            "properties": properties,
            "rules": rules,
            "tools": tools,
            "workflows": workflows,
            "services": services,
        }

    def _of(self, kind: str) -> list[Node]:
        return sorted((n for n, k in self.kinds.items() if k == kind), key=self.r.position)

    # --- classification ------------------------------------------------------------------

    def _classify(self) -> None:
        r = self.r
        subjects = [s for s in r.subjects() if isinstance(s, URIRef)]
        # Classes first: roots by type, subclasses by rdfs:subClassOf (resolved transitively).
        for s in subjects:
            types = r.peek(s, RDF.type)
            if H("Class") in types or r.peek(s, RDFS.subClassOf):
                self.kinds[s] = "class"
        for s in subjects:
            types = r.peek(s, RDF.type)
            found: list[str] = []
            for t in types:
                if t in _KIND_TYPES:
                    found.append(_KIND_TYPES[t])
                    if t in STEP_KINDS and (s not in self.step_kind or self.step_kind[s] == "Step"):
                        self.step_kind[s] = STEP_KINDS[t]
                    r.consumed.add((s, RDF.type, t))
                elif t == OWL.Ontology:
                    found.append("ontology")
                    r.consumed.add((s, RDF.type, t))
                elif isinstance(t, URIRef) and self.kinds.get(t) == "class":
                    found.append("individual")
                    self.individual_class[s] = t
                    r.consumed.add((s, RDF.type, t))
                elif isinstance(t, URIRef) and not str(t).startswith(HORIS):
                    r.problem(
                        "dangling-reference",
                        s,
                        f"rdf:type {short(t)} is not a declared class "
                        "(declare it with `a horis:Class` or fix the spelling)",
                    )
            if self.kinds.get(s) == "class":
                found.append("class")
            distinct = list(dict.fromkeys(found))
            if len(distinct) > 1:
                r.problem("duplicate", s, f"is declared as several kinds: {', '.join(distinct)}")
            if distinct:
                self.kinds.setdefault(s, distinct[0])
        # Members of an enumeration class are its individuals even without rdf:type.
        for c in self._of("class"):
            for holder in r.peek(c, H("oneOf")):
                for member in self._peek_items(holder):
                    if isinstance(member, URIRef) and member not in self.kinds:
                        self.kinds[member] = "individual"
                        self.individual_class[member] = c

    def _peek_items(self, head: Node) -> list[Node]:
        out: list[Node] = []
        seen: set[Node] = set()
        while head != RDF.nil and head not in seen:
            seen.add(head)
            first, rest = self.r.peek(head, RDF.first), self.r.peek(head, RDF.rest)
            if len(first) != 1 or len(rest) != 1:
                break
            out.append(first[0])
            head = rest[0]
        return out

    # --- references and literals ---------------------------------------------------------

    def ref(self, owner: Node, pred: Node, node: Node | None, kinds: tuple[str, ...]) -> str | None:
        """An IRI that must name a declared node of one of ``kinds``."""
        if node is None:
            return None
        if isinstance(node, URIRef) and self.kinds.get(node) in kinds:
            return str(node)
        what = " or ".join(_KIND_WORDS[k] for k in kinds)
        if isinstance(node, URIRef):
            actual = self.kinds.get(node)
            detail = f"it is a {_KIND_WORDS[actual]}" if actual else "it is not declared"
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
        if node is None:
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

    def label(self, node: Node) -> str | None:
        labels = self.r.peek(node, RDFS.label)
        return str(labels[0]) if labels else None

    # --- classes, individuals, properties ------------------------------------------------

    def _codes(self, node: Node) -> tuple[str, ...]:
        codes = self.strings(node, H("code"))
        for code in codes:
            if not V.valid_coding(code):
                self.r.problem(
                    "literal-type", node, f'code "{code}" must be "system|code"', via=H("code")
                )
        return codes

    def _class(self, node: Node) -> ClassDef:
        parents = self.refs(node, RDFS.subClassOf, ("class",))
        one_of = self.refs(node, H("oneOf"), ("individual",))
        return ClassDef(
            iri=str(node),
            name=local_name(str(node)),
            parents=parents,
            codes=self._codes(node),
            one_of=one_of,
            label=self.label(node),
        )

    def _individual(self, node: Node) -> Individual:
        return Individual(
            iri=str(node),
            name=local_name(str(node)),
            class_iri=str(self.individual_class[node]),
            codes=self._codes(node),
            label=self.label(node),
        )

    def _property(self, node: Node) -> PropertyDef:
        r = self.r
        domain = self.ref(node, H("domain"), r.one(node, H("domain")), ("class",))
        range_node = r.one(node, H("range"))
        rng = self.type_ref(node, H("range"), range_node)
        if domain is None and not r.peek(node, H("domain")):
            r.problem("missing", node, "needs horis:domain (the class that carries it)")
        if range_node is None:
            r.problem("missing", node, "needs horis:range (an xsd datatype or a class)")
        cardinality = self.string(node, H("cardinality")) or "0..*"
        if cardinality not in _CARDINALITIES:
            r.problem(
                "literal-type",
                node,
                f'cardinality "{cardinality}" must be one of {", ".join(_CARDINALITIES)}',
                via=H("cardinality"),
            )
            cardinality = "0..*"
        pattern = self.string(node, H("pattern"))
        if pattern is not None and not V.valid_regex(pattern):
            r.problem("literal-type", node, "is not a valid regular expression", via=H("pattern"))
        one_of: tuple[str, ...] = ()
        if r.peek(node, H("oneOf")):
            if rng is not None and rng.startswith(V.XSD_NS):
                one_of = self.strings(node, H("oneOf"))
            else:
                one_of = self.refs(node, H("oneOf"), ("individual",))
        elif rng is not None and isinstance(range_node, URIRef):
            one_of = tuple(
                str(m)
                for h in r.peek(range_node, H("oneOf"))
                for m in self._peek_items(h)
                if isinstance(m, URIRef)
            )
        minimum = self.number(node, H("min"))
        maximum = self.number(node, H("max"))
        return PropertyDef(
            iri=str(node),
            name=local_name(str(node)),
            domain=domain or "",
            range=rng or "",
            cardinality=cast(Cardinality, cardinality),
            min=Decimal(minimum) if minimum is not None else None,
            max=Decimal(maximum) if maximum is not None else None,
            unit=self.string(node, H("unit")),
            pattern=pattern,
            one_of=one_of,
            rules_only=self.constant(node, H("assignedBy"), ("RulesOnly",)) == "RulesOnly",
            resolution=cast(
                Any, self.constant(node, H("resolution"), ("Reject", "FirstListed")) or "Reject"
            ),
            from_fhir=tuple(self._mapping(m) for m in r.objects(node, H("fromFhir"))),
            label=self.label(node),
        )

    def _mapping(self, node: Node) -> FhirMapping:
        codings = self.strings(node, H("coding"))
        for c in codings:
            if not V.valid_coding(c):
                self.r.problem(
                    "literal-type", node, f'coding "{c}" must be "system|code"', via=H("coding")
                )
        return FhirMapping(
            resource_type=self.string(node, H("resourceType"), required=True) or "",
            fhir_path=self.string(node, H("fhirPath"), required=True) or "",
            codings=codings,
            where=self.string(node, H("where")),
            pick=cast(Any, self.constant(node, H("pick"), ("Latest", "All")) or "Latest"),
            context_key=self.string(node, H("fromContext")),
            transform=cast(Any, self.constant(node, H("transform"), ("YearsSince",))),
        )

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

    def _rule(self, node: Node, order: int) -> Rule:
        r = self.r
        about = self.ref(node, H("about"), r.one(node, H("about")), ("class",))
        if not r.peek(node, H("about")):
            r.problem("missing", node, "needs horis:about (the class of the rule's subject)")
        when = self.conditions(node, H("when"))
        if not r.peek(node, H("when")):
            r.problem("missing", node, "needs horis:when ( … conditions … )")
        then: list[Conclusion] = []
        for c in r.members(node, H("then")):
            prop = self.ref(c, H("property"), r.one(c, H("property")), ("property",))
            raw = r.one(c, H("value"))
            if raw is None:
                r.problem("missing", c, "a conclusion needs horis:value")
                continue
            value = self.value(c, H("value"), raw)
            if prop is not None and value is not None:
                then.append(Conclusion(property=prop, value=value))
        if not r.peek(node, H("then")):
            r.problem("missing", node, "needs horis:then [ horis:property P ; horis:value V ]")
        return Rule(
            iri=str(node),
            name=local_name(str(node)),
            about=about or "",
            when=when,
            then=tuple(then),
            order=order,
        )

    # --- tools ---------------------------------------------------------------------------

    def _tool(self, node: Node) -> ToolDef:
        r = self.r
        arg_nodes = [a for t in r.objects(node, H("takes")) for a in r.members(t, H("arg"))]
        arg_nodes += r.members(node, H("arg"))
        args: list[ToolArg] = []
        for a in arg_nodes:
            name = self.string(a, H("name"), required=True)
            typ = self.type_ref(a, H("type"), r.one(a, H("type")))
            if not r.peek(a, H("type")):
                r.problem("missing", a, "an argument needs horis:type")
            if name and typ:
                args.append(ToolArg(name=name, type=typ))
        effect_nodes = [e for t in r.objects(node, H("effect")) for e in r.members(t, H("asserts"))]
        effect_nodes += r.members(node, H("asserts"))
        effects: list[EffectDecl] = []
        for e in effect_nodes:
            prop = self.ref(e, H("property"), r.one(e, H("property")), ("property",))
            now = self.constant(e, H("value"), ("now",)) == "now"
            typ = self.type_ref(e, H("type"), r.one(e, H("type")))
            if not now and typ is None and not r.peek(e, H("type")):
                r.problem("missing", e, "an effect needs horis:value horis:now or horis:type T")
            if prop:
                effects.append(EffectDecl(property=prop, type=typ, now=now))
        binding = self.string(node, H("binding"), required=True) or ""
        commits = self._commits(node)
        if binding:
            self._check_binding(node, binding, commits is not None)
        return ToolDef(
            iri=str(node),
            name=local_name(str(node)),
            args=tuple(args),
            effects=tuple(effects),
            binding=binding,
            timeout=self.duration(node, H("timeout")) or 5.0,
            idempotent=bool(self.boolean(node, H("idempotent"))),
            retries=self.count(node, H("retries")),
            commits=commits,
        )

    def _commits(self, node: Node) -> AdapterCommit | None:
        c = self.r.one(node, H("commits"))
        if c is None:
            return None
        self.constant(c, H("operation"), ("Update",))  # the only operation, and the default
        return AdapterCommit(
            resource_type=self.string(c, H("resourceType"), required=True) or "",
            element=self.string(c, H("element"), required=True) or "",
            value_arg=self.string(c, H("valueArg"), required=True) or "",
            code_system=self.string(c, H("codeSystem")),
            operation="update",
            scope=self.string(c, H("scope"), required=True) or "",
        )

    def _check_binding(self, node: Node, binding: str, commits: bool) -> None:
        problem = _binding_problem(binding, self.registry, commits)
        if problem:
            self.r.problem("binding", node, problem, via=H("binding"))

    # --- steps and workflows -------------------------------------------------------------

    def _edge(self, node: Node, pred: str) -> str | None:
        return self.ref(node, H(pred), self.r.one(node, H(pred)), ("step",))

    def _step(self, node: Node) -> StepDef:
        r, kind = self.r, self.step_kind[node]
        f: dict[str, Any] = {
            "terminal": bool(self.boolean(node, H("terminal"))),
            "next": self._edge(node, "next"),
            "requires": self.conditions(node, H("requires")),
            "on_unsatisfied": self._edge(node, "onUnsatisfied"),
        }
        if kind in ("PerceptionStep", "NarrationStep", "ProposalStep"):
            f["model"] = self.string(node, H("model"))
        if kind in ("PerceptionStep", "ProposalStep"):
            conf = self.number(node, H("confidence"))
            if conf is not None and not 0 <= conf <= 1:
                r.problem(
                    "literal-type", node, "confidence must be between 0 and 1", via=H("confidence")
                )
            f["confidence"] = float(conf) if conf is not None else None
            f["fallback"] = self._edge(node, "fallback")
        if kind in ("PerceptionStep", "ActionStep"):
            f["retries"] = self.count(node, H("retries"))
        if kind == "PerceptionStep":
            f["extracts"] = self.refs(node, H("extracts"), ("class",))
        elif kind == "ReasoningStep":
            f["goal"] = self.conditions(node, H("goal"))
            f["on_unreachable"] = self._edge(node, "onUnreachable")
        elif kind == "ActionStep":
            f["tool"] = self.ref(node, H("tool"), r.one(node, H("tool")), ("tool",))
            if not r.peek(node, H("tool")):
                r.problem("missing", node, "an ActionStep needs horis:tool")
            f["bindings"] = tuple(self._bind(b) for b in r.objects(node, H("bind")))
            f["on_error"] = self._edge(node, "onError")
        elif kind == "NarrationStep":
            target = r.one(node, H("narrates"))
            if target is not None:
                f["narrates"] = self.ref(
                    target, H("property"), r.one(target, H("property")), ("property",)
                )
            f["audience"] = self.string(node, H("audience"))
            f["style"] = self.string(node, H("style"))
            f["required"] = bool(self.boolean(node, H("required")))
        elif kind == "ProposalStep":
            cand = r.one(node, H("candidates"))
            if cand is not None:
                path_nodes = r.members(cand, H("path"))
                f["candidates"] = CandidateQuery(
                    path=tuple(
                        p
                        for p in (self.ref(cand, H("path"), i, ("property",)) for i in path_nodes)
                        if p
                    ),
                    class_iri=self.ref(cand, H("class"), r.one(cand, H("class")), ("class",)),
                    where=self.conditions(cand, H("where")),
                )
            f["rank_by"] = self.string(node, H("rankBy"))
            f["selects"] = self.ref(node, H("selects"), r.one(node, H("selects")), ("property",))
        elif kind == "WaitStep":
            f["awaits"] = self.refs(node, H("awaits"), ("property",))
            f["timeout"] = self.duration(node, H("timeout"))
            f["on_timeout"] = self._edge(node, "onTimeout")
        elif kind == "ChoiceStep":
            branches: list[Branch] = []
            for b in r.members(node, H("branches")):
                nxt = self._edge(b, "next")
                when = self.conditions(b, H("when"))
                if not r.peek(b, H("next")):
                    r.problem("missing", b, "a branch needs horis:next")
                if nxt:
                    branches.append(Branch(when=when, next=nxt))
            f["branches"] = tuple(branches)
            f["otherwise"] = self._edge(node, "otherwise")
        elif kind == "SubflowStep":
            f["workflow"] = self.ref(node, H("workflow"), r.one(node, H("workflow")), ("workflow",))
            outcomes: list[SubflowOutcome] = []
            for o in r.objects(node, H("outcome")):
                term, nxt = self._edge(o, "terminal"), self._edge(o, "next")
                if term and nxt:
                    outcomes.append(SubflowOutcome(terminal=term, next=nxt))
            f["outcomes"] = tuple(outcomes)
            f["otherwise"] = self._edge(node, "otherwise")
        return StepDef(iri=str(node), name=local_name(str(node)), kind=kind, **f)

    def _bind(self, node: Node) -> ArgBinding:
        arg = self.string(node, H("arg"), required=True) or ""
        prop = self.ref(node, H("property"), self.r.one(node, H("property")), ("property",))
        focus = bool(self.boolean(node, H("focus")))
        if (prop is None) == (not focus) and not self.r.peek(node, H("property")):
            self.r.problem("missing", node, "a binding needs horis:property P or horis:focus true")
        return ArgBinding(arg=arg, property=prop, focus=focus)

    def _workflow(self, node: Node, steps: dict[str, StepDef]) -> WorkflowDef:
        r = self.r
        start = self.ref(node, H("startsAt"), r.one(node, H("startsAt")), ("step",))
        if not r.peek(node, H("startsAt")):
            r.problem("missing", node, "needs horis:startsAt (its first step)")
        reached: dict[str, StepDef] = {}
        todo = [start] if start else []
        while todo:
            iri = todo.pop(0)
            if iri in reached or iri not in steps:
                continue
            reached[iri] = steps[iri]
            todo.extend(steps[iri].edges())
        version = r.one(node, H("version"))
        return WorkflowDef(
            iri=str(node),
            name=local_name(str(node)),
            starts_at=start or "",
            steps=reached,
            decides=self.ref(node, H("decides"), r.one(node, H("decides")), ("property",)),
            focus=self.ref(node, H("focus"), r.one(node, H("focus")), ("class",)),
            version=str(version) if isinstance(version, Literal) else "0",
        )

    # --- CDS services --------------------------------------------------------------------

    def _service(self, node: Node) -> CdsServiceDef:
        r = self.r
        prefetch = tuple(
            PrefetchTemplate(
                key=self.string(p, H("key"), required=True) or "",
                query=self.string(p, H("query"), required=True) or "",
            )
            for p in r.objects(node, H("prefetch"))
        )
        text = tuple(
            TextSource(
                resource_type=self.string(t, H("resourceType"), required=True) or "",
                fhir_path=self.string(t, H("fhirPath"), required=True) or "",
            )
            for t in r.objects(node, H("text"))
        )
        cards = tuple(self._card(c, i) for i, c in enumerate(r.objects(node, H("card"))))
        workflow = self.ref(node, H("workflow"), r.one(node, H("workflow")), ("workflow",))
        if not r.peek(node, H("workflow")):
            r.problem("missing", node, "a CDS service needs horis:workflow")
        return CdsServiceDef(
            iri=str(node),
            id=self.string(node, H("id"), required=True) or "",
            hook=self.string(node, H("hook"), required=True) or "",
            title=self.string(node, H("title")) or "",
            description=self.string(node, H("description"), required=True) or "",
            workflow=workflow or "",
            prefetch=prefetch,
            usage_requirements=self.string(node, H("usageRequirements")),
            text=text,
            cards=cards,
        )

    def _card(self, node: Node, order: int) -> CardDecl:
        r = self.r
        indicator = self.string(node, H("indicator"), required=True) or "info"
        if indicator not in ("info", "warning", "critical"):
            r.problem("literal-type", node, 'indicator must be "info", "warning" or "critical"')
            indicator = "info"
        behavior = self.string(node, H("selectionBehavior"))
        if behavior not in (None, "at-most-one", "any"):
            r.problem("literal-type", node, 'selectionBehavior must be "at-most-one" or "any"')
            behavior = None
        suggestions: list[SuggestionDecl] = []
        for s in r.objects(node, H("suggest")):
            action = self.string(s, H("actionType"), required=True) or "create"
            if action not in ("create", "update", "delete"):
                r.problem("literal-type", s, 'actionType must be "create", "update" or "delete"')
                action = "create"
            suggestions.append(
                SuggestionDecl(
                    label=self.string(s, H("label"), required=True) or "",
                    action_type=cast(Any, action),
                    cites=self.ref(s, H("cites"), r.one(s, H("cites")), ("property",)),
                    description=self.string(s, H("description")),
                )
            )
        return CardDecl(
            indicator=cast(Any, indicator),
            summary=self.string(node, H("summary"), required=True) or "",
            when=self.conditions(node, H("when")),
            terminal=self._edge(node, "terminal"),
            suggestions=tuple(suggestions),
            selection_behavior=cast(Any, behavior),
            order=order,
        )

    # --- what nothing read ---------------------------------------------------------------

    def _leftovers(self) -> None:
        r = self.r
        for s, p, o in r.triples():
            if (s, p, o) in r.consumed or p in _ANNOTATIONS:
                continue
            if str(p).startswith(_ANNOTATION_NAMESPACES):
                continue
            kind = self.kinds.get(s)
            if kind == "step":
                what = f"a {self.step_kind[s]}"
            elif kind:
                what = f"a {_KIND_WORDS[kind]}"
            elif isinstance(s, BNode):
                what = "this blank node"
            else:
                what = "an undeclared node (add its rdf:type, or fix the spelling of its IRI)"
            r.problem("not-understood", s, f"{short(p)} does not apply to {what}", via=None)


_KIND_WORDS = {
    "class": "class",
    "individual": "individual",
    "property": "property",
    "rule": "rule",
    "tool": "tool",
    "step": "step",
    "workflow": "workflow",
    "service": "CDS service",
    "ontology": "ontology header",
}


def _binding_problem(
    binding: str, registry: Mapping[str, Callable[..., Any]], commits: bool
) -> str | None:
    """Why a tool binding cannot be used, or None."""
    if not binding.startswith(_BINDING_SCHEMES):
        return (
            f'binding "{binding}" must start with python:, rust:, http(s)://, mcp:// '
            "or be fhir:commit"
        )
    if binding.startswith("fhir:"):
        if binding != "fhir:commit":
            return f'unknown FHIR binding "{binding}" (only "fhir:commit")'
        if not commits:
            return 'binding "fhir:commit" needs horis:commits [ … ] saying what is written'
        return None
    scheme, _, name = binding.partition(":")
    if scheme == "rust":
        if name not in registry and binding not in registry:
            return f'rust:{name} is not registered (register a callable under "{name}")'
        return None
    if scheme == "python":
        if name in registry or binding in registry:
            return None
        module, _, attr = name.rpartition(".")
        if not module:
            return f'python binding "{name}" must be a dotted path module.function'
        try:
            target = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            return f"python:{name} cannot be imported ({exc})"
        except AttributeError:
            return f"module {module} has no attribute {attr!r}"
        if not callable(target):
            return f"python:{name} is not callable"
        return None
    if scheme == "mcp":
        server, _, tool = binding[len("mcp://") :].partition("/")
        if not server or not tool:
            return f'MCP binding "{binding}" must be mcp://server/tool'
        return None
    rest = binding.split("://", 1)[1]
    if not rest:
        return f'HTTP binding "{binding}" has no host'
    return None
