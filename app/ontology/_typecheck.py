"""Type checks shared by verification: classes, properties and aggregates, rules, tools (those of
conditions and values, which these build on, are ``app.ontology._typecheck_conditions``).

See ``app.ontology.verify`` for the whole list of checks.
"""

from __future__ import annotations

from app.ontology._typecheck_conditions import DATES, NUMBERS, ConditionChecker
from app.ontology.classes import DatedDef, PropertyDef, SharingDef, SpanDef
from app.ontology.names import XSD, local_name
from app.ontology.templates import template_args


class TypeChecker(ConditionChecker):
    """Checks that do not depend on workflow structure; ``run_types`` runs them all."""

    def run_types(self) -> None:
        self._codes()
        self._names()
        for p in self.o.properties.values():
            self._property(p)
        for r in self.o.rules:
            for c in r.when:
                self._condition(c, r.about, r.iri)
            for t in r.then:
                prop = self.o.properties.get(t.property)
                if prop is None:
                    self.add("type-check", r.iri, f"concludes undeclared {t.property}")
                    continue
                self.check_domain(prop, r.about, r.iri, "horis:then")
                self._value_fits(prop, t.value, r.iri, "horis:then", "horis:value")
        self._stratification()
        for tool in self.o.tools.values():
            self._tool(tool.iri)

    # --- classes, properties and aggregates ----------------------------------------------

    def _names(self) -> None:
        """``horis:namedBy``: a text property that the class's instances carry."""
        for c in self.o.classes.values():
            prop = self.o.properties.get(c.named_by) if c.named_by else None
            if prop is None:
                continue
            if prop.range != XSD + "string" or prop.domain not in self.o.ancestors(c.iri):
                self.add(
                    "type-check",
                    c.iri,
                    f"horis:namedBy {prop.name} must be an xsd:string property of {c.name} "
                    "(or of a class above it)",
                )

    def _codes(self) -> None:
        """A coding must map to one class (and one individual), or FHIR data would be ambiguous."""
        for table in (self.o.classes, self.o.individuals):
            owners: dict[str, str] = {}
            for node in table.values():
                for code in node.codes:
                    first = owners.setdefault(code, node.iri)
                    if first != node.iri:
                        self.add(
                            "type-check",
                            node.iri,
                            f'horis:code "{code}" is also the code of {local_name(first)}; '
                            "a coding must name one class",
                        )

    def _property(self, p: PropertyDef) -> None:
        numeric = p.range in NUMBERS
        if (p.min is not None or p.max is not None) and not numeric:
            self.add(
                "type-check", p.iri, "horis:min/horis:max need an xsd:decimal or xsd:integer range"
            )
        if p.min is not None and p.max is not None and p.min > p.max:
            self.add("type-check", p.iri, f"horis:min {p.min} is above horis:max {p.max}")
        if p.unit is not None and not numeric:
            self.add("type-check", p.iri, "horis:unit needs a numeric range")
        if p.pattern is not None and p.range != XSD + "string":
            self.add("type-check", p.iri, "horis:pattern needs an xsd:string range")
        if p.is_object:
            rng = self.o.classes.get(p.range)
            if rng is not None and rng.one_of:
                extra = [v for v in p.one_of if v not in rng.one_of]
                if extra:
                    names = ", ".join(local_name(e) for e in extra)
                    self.add(
                        "type-check",
                        p.iri,
                        f"horis:oneOf lists {names}, which the range class's horis:oneOf does not",
                    )
            for v in p.one_of:
                cls = self.o.class_of(v)
                if cls is None or not self.o.is_subclass(cls, p.range):
                    self.add(
                        "type-check",
                        p.iri,
                        f"horis:oneOf member {local_name(v)} is not an individual of the range "
                        f"{local_name(p.range)}",
                    )
        if p.resolution == "FirstListed" and not p.one_of:
            self.add(
                "type-check",
                p.iri,
                "horis:resolution horis:FirstListed needs a horis:oneOf list (on the property or "
                "its range class) to say which value comes first",
            )
        for inverse in p.inverse_of:
            q = self.o.properties.get(inverse)
            if q is None:
                continue
            if not (p.is_object and q.is_object):
                self.add(
                    "type-check",
                    p.iri,
                    f"horis:inverseOf {q.name}: both properties must hold instances (object "
                    "properties)",
                )
            elif not (self._related(p.domain, q.range) and self._related(p.range, q.domain)):
                self.add(
                    "type-check",
                    p.iri,
                    f"horis:inverseOf {q.name} needs the reverse classes: {p.name} goes from "
                    f"{local_name(p.domain)} to {local_name(p.range)}, {q.name} from "
                    f"{local_name(q.domain)} to {local_name(q.range)}",
                )
        for m in p.from_fhir:
            if m.transform == "PeriodDays" and p.range not in NUMBERS:
                self.add(
                    "type-check",
                    p.iri,
                    "horis:transform horis:PeriodDays yields a number of days: the range must "
                    "be xsd:integer or xsd:decimal",
                )
            for a in m.codes_imply:
                if not (p.unit or "").endswith("/" + a):
                    self.add(
                        "type-check",
                        p.iri,
                        f'horis:codesImply "{a}" must end the property\'s horis:unit as "/{a}" '
                        f"(its unit is {p.unit!r})",
                    )
        if p.aggregate is not None:
            self._aggregate(p)
        if p.rules_only and p.from_fhir:
            self.add(
                "type-check",
                p.iri,
                "is horis:assignedBy horis:RulesOnly yet has horis:fromFhir; remove one",
            )

    def _aggregate(self, p: PropertyDef) -> None:
        """An aggregate's paths, filters and value types (``horis:aggregate``)."""
        agg = p.aggregate
        assert agg is not None
        where = "horis:aggregate"
        if self.o.rules_for(p.iri):
            self.add("type-check", p.iri, "an aggregate is computed: no rule may conclude it")
        if not p.single_valued:
            self.add("type-check", p.iri, 'an aggregate holds one value: cardinality "0..1"')
        ends: list[PropertyDef] = []
        for path in agg.over:
            current, last = p.domain, None
            for i, iri in enumerate(path):
                prop = self.o.properties.get(iri)
                if prop is None:
                    return
                self.check_domain(prop, current, p.iri, f"{where}/horis:over")
                if i < len(path) - 1 and not prop.is_object:
                    self.add(
                        "type-check",
                        p.iri,
                        f"horis:over continues after {prop.name}, whose values are literals",
                        where,
                    )
                    return
                current, last = prop.range, prop
            if last is not None:
                ends.append(last)
        for end in ends:
            if (agg.where or agg.of) and not end.is_object:
                self.add(
                    "type-check",
                    p.iri,
                    f"horis:over ends at {end.name}, whose values are literals: horis:where and "
                    "horis:of read instances",
                    where,
                )
                return
            for c in agg.where:
                self.condition_on(c, end.range, p.iri, f"{where}/horis:where")
        of = self.o.properties.get(agg.of) if agg.of else None
        if of is not None:
            for end in ends:
                self.check_domain(of, end.range, p.iri, f"{where}/horis:of")
        kinds = {of.range} if of is not None else {e.range for e in ends}
        if agg.function != "Count" and agg.of is not None and of is not None and of.is_object:
            self.add("type-check", p.iri, f"horis:of {of.name} holds instances, not values", where)
            return
        if agg.dated is not None:
            self._dated(p, agg.dated, ends, where)
        if agg.sharing is not None:
            self._sharing(p, agg.sharing, ends, where)
        if agg.span is not None:
            self._span(p, agg.span, ends, where)
        elif agg.function == "Count":
            if p.range != XSD + "integer":
                self.add("type-check", p.iri, "a Count is a whole number: range xsd:integer")
        elif agg.function == "Sum":
            if not kinds <= set(NUMBERS) or p.range not in NUMBERS:
                self.add(
                    "type-check",
                    p.iri,
                    "a Sum adds numbers: the values summed and the property must be xsd:decimal "
                    "or xsd:integer",
                )
            elif p.range == XSD + "integer" and kinds != {XSD + "integer"}:
                self.add(
                    "type-check",
                    p.iri,
                    "a Sum of decimals is not a whole number: range xsd:decimal",
                )
        else:
            ordered = kinds <= set(NUMBERS) or (len(kinds) == 1 and kinds <= set(DATES))
            if not ordered or not (
                p.range in kinds or (kinds <= set(NUMBERS) and p.range == XSD + "decimal")
            ):
                names = ", ".join(sorted(local_name(k) for k in kinds))
                self.add(
                    "type-check",
                    p.iri,
                    f"a {agg.function} keeps one of the values ({names}): they must be numbers "
                    "or dates, and the property of their type",
                )

    def _dated(self, p: PropertyDef, dated: DatedDef, ends: list[PropertyDef], where: str) -> None:
        """horis:dated compares a date of each reached instance with a date of the subject."""
        prop = self.o.properties.get(dated.property)
        anchor = self.o.properties.get(dated.anchor)
        if anchor is not None:
            self.check_domain(anchor, p.domain, p.iri, f"{where}/horis:dated/horis:anchor")
            if anchor.range not in DATES:
                self.add("type-check", p.iri, f"horis:anchor {anchor.name} must be a date", where)
        if prop is None:
            return
        if prop.range not in DATES:
            self.add("type-check", p.iri, f"horis:dated {prop.name} must be a date", where)
        for end in ends:
            if not end.is_object:
                self.add(
                    "type-check",
                    p.iri,
                    f"horis:over ends at {end.name}, whose values are literals: horis:dated "
                    "reads instances",
                    where,
                )
                return
            self.check_domain(prop, end.range, p.iri, f"{where}/horis:dated")

    def _sharing(
        self, p: PropertyDef, sharing: SharingDef, ends: list[PropertyDef], where: str
    ) -> None:
        """horis:sharing compares a value of each reached instance with one of the subject."""
        prop = self.o.properties.get(sharing.property)
        anchor = self.o.properties.get(sharing.anchor)
        if anchor is not None:
            self.check_domain(anchor, p.domain, p.iri, f"{where}/horis:sharing/horis:anchor")
        if prop is None:
            return
        if anchor is not None and prop.range != anchor.range:
            self.add(
                "type-check",
                p.iri,
                f"horis:sharing compares {prop.name} ({local_name(prop.range)}) with "
                f"{anchor.name} ({local_name(anchor.range)}): they must have one range",
                where,
            )
        for end in ends:
            if not end.is_object:
                self.add(
                    "type-check",
                    p.iri,
                    f"horis:over ends at {end.name}, whose values are literals: horis:sharing "
                    "reads instances",
                    where,
                )
                return
            self.check_domain(prop, end.range, p.iri, f"{where}/horis:sharing")

    def _span(self, p: PropertyDef, span: SpanDef, ends: list[PropertyDef], where: str) -> None:
        """A DaysCovered aggregate counts whole days of spans read from instances."""
        if p.range != XSD + "integer":
            self.add("type-check", p.iri, "DaysCovered counts whole days: range xsd:integer")
        if p.aggregate is not None and p.aggregate.of is not None:
            self.add("type-check", p.iri, "DaysCovered reads spans, not horis:of", where)
        expected = (
            ("horis:start", span.start, DATES),
            ("horis:end", span.end, DATES),
            ("horis:lengthDays", span.length, NUMBERS),
        )
        for term, iri, kinds in expected:
            prop = self.o.properties.get(iri) if iri else None
            if prop is None:
                continue
            if prop.range not in kinds:
                what = "a date" if kinds is DATES else "a number"
                self.add("type-check", p.iri, f"{term} {prop.name} must be {what}", where)
            for end in ends:
                if not end.is_object:
                    self.add(
                        "type-check",
                        p.iri,
                        f"horis:over ends at {end.name}, whose values are literals: spans are "
                        "read from instances",
                        where,
                    )
                    return
                self.check_domain(prop, end.range, p.iri, f"{where}/{term}")

    def _related(self, a: str, b: str) -> bool:
        return self.o.is_subclass(a, b) or self.o.is_subclass(b, a)

    # --- rules ---------------------------------------------------------------------------

    def _stratification(self) -> None:
        edges: dict[str, set[str]] = {}
        negative: list[tuple[str, str, str]] = []  # (premise, conclusion, rule)
        for r in self.o.rules:
            for t in r.then:
                for c in r.when:
                    for premise in c.path:
                        edges.setdefault(premise, set()).add(t.property)
                        if c.op == "isAssigned" and c.value is False:
                            negative.append((premise, t.property, r.iri))
        for premise, conclusion, rule in negative:
            if premise == conclusion or _reaches(edges, conclusion, premise):
                self.add(
                    "stratification",
                    rule,
                    f"negation cycle: {local_name(conclusion)} depends on {local_name(premise)} "
                    f"not being assigned, and {local_name(premise)} depends on "
                    f"{local_name(conclusion)}; break the cycle (rules must be stratifiable)",
                )
        self._world_strata({p.node for p in self.problems if p.code == "stratification"})

    def _world_strata(self, reported: set[str]) -> None:
        """The World's own stratification (``app.world.world.ontology_index``), so that what
        verifies also builds a World: it also refuses a cycle through reading a single-valued
        ``horis:FirstListed`` property, whose value must be final before a rule reads it. A
        cycle already reported above as a negation cycle is not reported twice. Imported here:
        ``app.world`` imports ``app.ontology.model``, so a module-level import would be a cycle.
        """
        from app.world.facts import StratificationError
        from app.world.world import ontology_index

        try:
            ontology_index(self.o)
        except StratificationError as exc:
            if reported.intersection(exc.rules):
                return
            for rule in exc.rules:
                self.add(
                    "stratification",
                    rule,
                    f"the World refuses these rules ({exc}); a rule may not read a single-valued "
                    "horis:FirstListed property that its own conclusions feed back into: read a "
                    "property outside the cycle, or break the cycle",
                )
        except Exception:  # anything else is reported by the other checks; a World needs both
            return

    # --- tools ---------------------------------------------------------------------------

    def _tool(self, iri: str) -> None:
        t = self.o.tools[iri]
        names = [a.name for a in t.args]
        for dup in {n for n in names if names.count(n) > 1}:
            self.add("type-check", iri, f'argument "{dup}" is declared twice')
        for e in t.effects:
            prop = self.o.properties.get(e.property)
            if prop is None:
                continue
            if prop.rules_only:
                self.add(
                    "type-check",
                    iri,
                    f"an effect asserts {prop.name}, which is horis:assignedBy horis:RulesOnly",
                )
            if e.now and prop.range not in DATES:
                self.add(
                    "type-check",
                    iri,
                    f"horis:value horis:now needs a dateTime property, not {prop.name}",
                )
            if (
                e.type is not None
                and e.type != prop.range
                and not (e.type in self.o.classes and self.o.is_subclass(e.type, prop.range))
            ):
                self.add(
                    "type-check",
                    iri,
                    f"effect type {local_name(e.type)} does not fit {prop.name} "
                    f"({local_name(prop.range)})",
                )
        commits = t.commits
        if commits is not None and commits.operation != "create" and commits.value_arg not in names:
            self.add(
                "type-check",
                iri,
                f'horis:commits names horis:valueArg "{commits.value_arg}", which is not an '
                "argument of the tool",
            )
        if commits is not None and commits.template is not None:
            for name in template_args(commits.template):
                if name not in names:
                    self.add(
                        "type-check",
                        iri,
                        f'horis:template uses argument "{name}", which is not an argument of '
                        "the tool",
                    )


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    todo = [start]
    while todo:
        n = todo.pop()
        if n == goal:
            return True
        if n in seen:
            continue
        seen.add(n)
        todo.extend(edges.get(n, ()))
    return False
