"""The compiler from a merged graph (``_rdf.Reader``) to the model's frozen values."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, cast

from rdflib import BNode, URIRef
from rdflib.namespace import OWL, RDF, RDFS
from rdflib.term import Node

from app.ontology import _values as V
from app.ontology._compile_base import (
    ANNOTATION_NAMESPACES,
    ANNOTATIONS,
    CARDINALITIES,
    KIND_TYPES,
    KIND_WORDS,
    STEP_KINDS,
    H,
)
from app.ontology._compile_flow import FlowCompiler
from app.ontology._compile_tools import ToolCompiler
from app.ontology._rdf import literal_kind, short
from app.ontology.classes import (
    AggregateDef,
    Cardinality,
    ClassDef,
    DatedDef,
    FhirMapping,
    Individual,
    PropertyDef,
    SharingDef,
    SpanDef,
)
from app.ontology.durations import parse_window
from app.ontology.names import HORIS, local_name
from app.ontology.rules import Conclusion, Rule


class Compiler(FlowCompiler, ToolCompiler):
    """Reads every kind of node; problems go to ``reader.problems``."""

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
        combined = {str(n): self._combined(n) for n in self._of("combined")}
        self._check_override_reasons(services, individuals)
        for n in self._of("ontology"):
            self.r.consume_all(n, [OWL.versionInfo, OWL.imports, RDF.type])
        self._leftovers()
        return {
            "value_sets": dict(self.value_sets),
            "classes": classes,
            "individuals": individuals,
            "properties": properties,
            "rules": rules,
            "tools": tools,
            "workflows": workflows,
            "services": services,
            "combined": combined,
            "unreachable_steps": tuple(
                iri for iri in steps if not any(iri in w.steps for w in workflows.values())
            ),
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
                if t in KIND_TYPES:
                    found.append(KIND_TYPES[t])
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
                    self.r.dismissed.add(s)
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
        pins = self.pinned_value_sets(node)
        return ClassDef(
            iri=str(node),
            name=local_name(str(node)),
            parents=parents,
            codes=self._codes(node),
            one_of=one_of,
            label=self.label(node),
            value_sets=(
                *self.value_set_refs(node, H("inValueSet")),
                *(pin.split("|", 1)[0] for pin in pins),
            ),
            pinned=pins,
            named_by=self.ref(node, H("namedBy"), self.r.one(node, H("namedBy")), ("property",)),
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
        if cardinality not in CARDINALITIES:
            r.problem(
                "literal-type",
                node,
                f'cardinality "{cardinality}" must be one of {", ".join(CARDINALITIES)}',
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
        absent_means = self.constant(node, H("absentMeans"), ("None", "Unknown", "Unread"))
        if absent_means == "None" and cardinality in ("0..1", "1..1"):
            r.problem(
                "literal-type",
                node,
                "horis:absentMeans horis:None (closed world) is for record lists (cardinality "
                '"0..*" or "1..*"): a single value that is not there is unknown, not none',
                via=H("absentMeans"),
            )
            absent_means = "Unknown"
        aggregate = self._aggregate(node)
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
            rules_only=self.constant(node, H("assignedBy"), ("RulesOnly",)) == "RulesOnly"
            or aggregate is not None,
            resolution=cast(
                Any, self.constant(node, H("resolution"), ("Reject", "FirstListed")) or "Reject"
            ),
            from_fhir=tuple(self._mapping(m) for m in r.objects(node, H("fromFhir"))),
            label=self.label(node),
            absent_means=cast(Any, absent_means),
            inverse_of=self.refs(node, H("inverseOf"), ("property",)),
            aggregate=aggregate,
            closed_over=self.strings(node, H("closedOver")),
            known_outside=self.value_set_refs(node, H("knownOutside")),
        )

    def _aggregate(self, node: Node) -> AggregateDef | None:
        r = self.r
        agg = r.one(node, H("aggregate"))
        if agg is None:
            return None
        function = self.constant(agg, H("function"), ("Count", "Sum", "Min", "Max", "DaysCovered"))
        if function is None and not r.peek(agg, H("function")):
            r.problem(
                "missing",
                agg,
                "an aggregate needs horis:function (Count, Sum, Min, Max or DaysCovered)",
            )
        over: list[tuple[str, ...]] = []
        for head in r.objects(agg, H("over")):
            items = r.items(head) if r.is_list(head) else [head]
            path = tuple(
                p for p in (self.ref(agg, H("over"), i, ("property",)) for i in items) if p
            )
            if len(path) == len(items) and path:
                over.append(path)
        if not r.peek(agg, H("over")):
            r.problem(
                "missing", agg, "an aggregate needs horis:over ( properties ) to reach values"
            )
        of = self.ref(agg, H("of"), r.one(agg, H("of")), ("property",))
        span = self._span(agg, function)
        if function is None or not over or (function == "DaysCovered" and span is None):
            return None
        return AggregateDef(
            function=cast(Any, function),
            over=tuple(over),
            of=of,
            where=self.conditions(agg, H("where")),
            span=span,
            dated=self._dated(agg),
            sharing=self._sharing(agg),
        )

    def _sharing(self, agg: Node) -> SharingDef | None:
        """``horis:sharing [ horis:property P ; horis:anchor A ]``."""
        r = self.r
        node = r.one(agg, H("sharing"))
        if node is None:
            return None
        prop = self.ref(node, H("property"), r.one(node, H("property")), ("property",))
        anchor = self.ref(node, H("anchor"), r.one(node, H("anchor")), ("property",))
        for term, found in (("property", prop), ("anchor", anchor)):
            if found is None and not r.peek(node, H(term)):
                r.problem("missing", node, f"horis:sharing needs horis:{term}")
        if prop is None or anchor is None:
            return None
        return SharingDef(property=prop, anchor=anchor)

    def _dated(self, agg: Node) -> DatedDef | None:
        """``horis:dated [ horis:property P ; horis:anchor A ; horis:windowFrom ;
        horis:windowTo ]``: the window, before the subject's A, a kept instance's P lies in."""
        r = self.r
        node = r.one(agg, H("dated"))
        if node is None:
            return None
        prop = self.ref(node, H("property"), r.one(node, H("property")), ("property",))
        anchor = self.ref(node, H("anchor"), r.one(node, H("anchor")), ("property",))
        window_from = self._window(node, "windowFrom")
        window_to = self._window(node, "windowTo")
        for term, found in (("property", prop), ("anchor", anchor), ("windowFrom", window_from)):
            if found is None and not r.peek(node, H(term)):
                r.problem("missing", node, f"horis:dated needs horis:{term}")
        if prop is None or anchor is None or window_from is None:
            return None
        return DatedDef(
            property=prop, anchor=anchor, window_from=window_from, window_to=window_to or "P0D"
        )

    def _span(self, agg: Node, function: str | None) -> SpanDef | None:
        """``horis:start``, ``horis:end`` or ``horis:lengthDays``, ``horis:windowFrom`` and
        ``horis:windowTo`` of a DaysCovered aggregate (and of no other)."""
        r = self.r
        terms = ("start", "end", "lengthDays", "windowFrom", "windowTo")
        if function != "DaysCovered":
            for term in terms:
                if r.peek(agg, H(term)):
                    r.problem(
                        "not-understood",
                        agg,
                        f"horis:{term} belongs to a DaysCovered aggregate",
                        via=H(term),
                    )
            return None
        refs = {
            t: self.ref(agg, H(t), r.one(agg, H(t)), ("property",))
            for t in ("start", "end", "lengthDays")
        }
        windows = {t: self._window(agg, t) for t in ("windowFrom", "windowTo")}
        ok = True
        if refs["start"] is None:
            r.problem("missing", agg, "DaysCovered needs horis:start (a date property)")
            ok = False
        if (refs["end"] is None) == (refs["lengthDays"] is None):
            r.problem("missing", agg, "DaysCovered needs one of horis:end or horis:lengthDays")
            ok = False
        if windows["windowFrom"] is None:
            if not r.peek(agg, H("windowFrom")):
                r.problem("missing", agg, 'DaysCovered needs horis:windowFrom (e.g. "P10D")')
            ok = False
        if not ok or refs["start"] is None or windows["windowFrom"] is None:
            return None
        return SpanDef(
            start=refs["start"],
            end=refs["end"],
            length=refs["lengthDays"],
            window_from=windows["windowFrom"],
            window_to=windows["windowTo"] or "P0D",
        )

    def _window(self, agg: Node, term: str) -> str | None:
        node = self.r.one(agg, H(term))
        if node is None:
            return None
        text = V.as_string(node)
        if text is None or parse_window(text) is None:
            self.r.problem(
                "literal-type",
                agg,
                f'expects an ISO 8601 duration of whole units like "P10D" or "P3M", '
                f"got {literal_kind(node)}",
                via=H(term),
            )
            return None
        return text

    def _mapping(self, node: Node) -> FhirMapping:
        codings = self.strings(node, H("coding"))
        implied = self.strings(node, H("codesImply"))
        for a in implied:
            if not re.fullmatch(r"\{[^{}]+\}", a):
                self.r.problem(
                    "literal-type",
                    node,
                    f'horis:codesImply "{a}" must be a UCUM annotation like "{{1.73_m2}}"',
                    via=H("codesImply"),
                )
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
            transform=cast(Any, self.constant(node, H("transform"), ("YearsSince", "PeriodDays"))),
            max_age=self._max_age(node),
            value_sets=self.value_set_refs(node, H("inValueSet")),
            via=self._via(node),
            missing_excludes=self.strings(node, H("missingExcludes")),
            upper_bound_when=self.string(node, H("upperBoundWhen")),
            codes_imply=implied,
        )

    def _via(self, node: Node) -> str | None:
        via = self.string(node, H("via"))
        if via is not None and not V.valid_member_path(via):
            self.r.problem(
                "literal-type",
                node,
                f'horis:via "{via}" must be an element path like "medicationReference"',
                via=H("via"),
            )
            return None
        return via

    def _max_age(self, node: Node) -> float | None:
        raw = self.r.one(node, H("maxAge"))
        if raw is None:
            return None
        seconds = V.parse_iso_duration(raw)
        if seconds is not None and seconds > 0:
            return seconds
        if V.is_calendar_duration(raw):
            why = 'years and months have no fixed length: write days ("P365D", "P90D")'
        else:
            why = 'expects a positive ISO 8601 duration like "PT6H" or "P90D"'
        self.r.problem("literal-type", node, f"{why}, got {literal_kind(raw)}", via=H("maxAge"))
        return None

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
            label=self.label(node),
        )

    # --- what nothing read ---------------------------------------------------------------

    def _leftovers(self) -> None:
        r = self.r
        for s, p, o in r.triples():
            if (s, p, o) in r.consumed or p in ANNOTATIONS or s in r.dismissed:
                continue
            if str(p).startswith(ANNOTATION_NAMESPACES):
                continue
            kind = self.kinds.get(s)
            if kind == "step":
                what = f"a {self.step_kind[s]}"
            elif kind:
                what = f"a {KIND_WORDS[kind]}"
            elif isinstance(s, BNode):
                what = "this blank node"
            else:
                what = "an undeclared node (add its rdf:type, or fix the spelling of its IRI)"
            r.problem("not-understood", s, f"{short(p)} does not apply to {what}", via=None)
