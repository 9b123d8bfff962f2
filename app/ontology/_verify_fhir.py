"""Verification of what an ontology says about FHIR: units, FHIRPath, resource types, codes.

Each of these, when wrong, fails silently at run time: a unit that is not UCUM refuses every
reading, a misspelt element reads nothing, a coding under a wrong system URI matches nothing.
Verification names the node and, where it can, what was most likely meant.

- ``horis:unit`` is valid (case-sensitive) UCUM; a UCUM code a mapping tests a Quantity for is
  valid and converts to the property's unit; a mapping that reads a Quantity into a property
  with no ``horis:unit`` is refused (its values would be compared whatever their unit).
- ``horis:resourceType`` is an R4B resource type; ``horis:fhirPath`` and ``horis:where`` parse
  and name only elements that exist (``app.ontology._fhirpath``), read on the resource and,
  for a coded mapping of a type with coded components, on the component too (hydration reads
  a matching component of a panel with the same path); ``horis:where`` is a boolean; what
  ``horis:fhirPath`` yields fits the property (a CodeableConcept for an object property, a
  date for ``horis:YearsSince``, a Quantity or number for a number …); ``horis:text`` paths
  and ``horis:commits`` elements likewise.
- every code system (``horis:code``, ``horis:coding``, ``horis:codeSystem``,
  ``horis:closedOver``) is an absolute URI, and not a near miss of a canonical one
  (``code_systems.json``); a property ``horis:closedOver`` systems has code lists in one of
  them (else every code would be read as none of ours).
"""

from __future__ import annotations

import difflib
import json
import re
from functools import cache
from importlib import resources

from app.ontology._fhir_model import closest, closest_resource_type, is_resource_type, type_info
from app.ontology._fhirpath import check_path
from app.ontology._typecheck import TypeChecker
from app.ontology.classes import FhirMapping, PropertyDef
from app.ontology.errors import ProblemCode
from app.ontology.names import XSD, local_name
from app.ucum import convertible, is_ucum, suggest

#: Quantity and its specializations: hydration converts any of them by its UCUM code
_QUANTITY = frozenset({"Quantity", "Duration", "Age", "Count", "Distance", "SimpleQuantity"})
_FITS: dict[str, frozenset[str]] = {
    XSD + "decimal": _QUANTITY | {"decimal", "integer", "unsignedInt", "positiveInt"},
    XSD + "integer": _QUANTITY | {"integer", "unsignedInt", "positiveInt", "decimal"},
    XSD + "string": frozenset({"string", "code", "markdown", "uri", "url", "canonical", "id"})
    | {"Coding", "CodeableConcept"},  # read as "system|code" values
    XSD + "boolean": frozenset({"boolean"}),
    XSD + "dateTime": frozenset({"dateTime", "instant", "date"}),
    XSD + "date": frozenset({"date", "dateTime"}),
}
_TEXT = frozenset({"string", "code", "markdown", "uri", "url", "canonical", "id"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:\S+$")


class FhirChecker(TypeChecker):
    """The FHIR-facing checks; ``run_fhir`` runs them all."""

    def run_fhir(self) -> None:
        for p in self.o.properties.values():
            if p.unit is not None:
                self._unit(p)
            for i, m in enumerate(p.from_fhir):
                self._mapping(p, m, f"horis:fromFhir[{i + 1}]")
        for s in self.o.services.values():
            for i, t in enumerate(s.text):
                where = f"horis:text[{i + 1}]"
                if self._resource_type(s.iri, t.resource_type, where):
                    result = self._path(s.iri, t.fhir_path, t.resource_type, where)
                    if result is not None and not result & _TEXT:
                        self.add(
                            "fhir-path",
                            s.iri,
                            f"horis:fhirPath {t.fhir_path!r} yields {_names(result)}, not text: "
                            "only strings become the run's free text",
                            where,
                        )
        for tool in self.o.tools.values():
            if tool.commits is not None:
                self._commit(tool.iri, tool.commits.resource_type, tool.commits.element)
                if tool.commits.code_system is not None:
                    at = "horis:commits/horis:codeSystem"
                    self._system(tool.iri, tool.commits.code_system, at)
        for table in (self.o.classes, self.o.individuals):
            for node in table.values():
                for code in node.codes:
                    self._system(node.iri, code.partition("|")[0], "horis:code")
        for p in self.o.properties.values():
            for system in p.closed_over:
                self._system(p.iri, system, "horis:closedOver")
            listed = self._listed_systems(p) if p.closed_over else set()
            # no list at all: nothing in this deployment reads the property's codes; a property
            # of a shared file may be closed over systems some deployments list and others not
            if listed and not listed.intersection(p.closed_over):
                self.add(
                    "code-system",
                    p.iri,
                    f"horis:closedOver {', '.join(map(repr, p.closed_over))}: none of this "
                    "property's code lists (the classes of its range, the value sets its "
                    "conditions test) has a code of those systems, so every such code would be "
                    "read as none of ours; close it over a system its lists are complete in "
                    f"({', '.join(sorted(listed))})",
                    "horis:closedOver",
                )

    def _listed_systems(self, p: PropertyDef) -> set[str]:
        """The code systems of the codes that classify ``p``'s values: its range tree's codes
        and value sets, and the value sets its ``inValueSet`` conditions test."""
        canonicals: set[str] = set()
        codes: set[str] = set()
        if p.is_object:
            for iri in self.o.subclasses(p.range):
                c = self.o.classes.get(iri)
                if c is not None:
                    codes.update(c.codes)
                    canonicals.update(c.value_sets)
        canonicals.update(str(c.value) for c in self.o.conditions_on(p.iri) if c.op == "inValueSet")
        for url in canonicals:
            vs = self.o.value_sets.get(url)
            if vs is not None:
                codes.update(vs.codes)
        return {code.partition("|")[0] for code in codes}

    # --- units -----------------------------------------------------------------------------

    def _unit(self, p: PropertyDef) -> None:
        unit = p.unit or ""
        if is_ucum(unit):
            return
        hint = suggest(unit)
        self.add(
            "unit",
            p.iri,
            f"horis:unit {unit!r} is not a UCUM unit (UCUM is case-sensitive), so no reading "
            "could be converted to it"
            + (f": UCUM for {hint.meaning} is {hint.code!r}" if hint else ""),
            "horis:unit",
            suggestion=hint.code if hint else None,
        )

    # --- mappings --------------------------------------------------------------------------

    def _mapping(self, p: PropertyDef, m: FhirMapping, at: str) -> None:
        for coding in m.codings:
            self._system(p.iri, coding.partition("|")[0], f"{at}/horis:coding")
        if not self._resource_type(p.iri, m.resource_type, f"{at}/horis:resourceType"):
            return
        units: list[str] = []
        before = len(self.problems)
        if m.via is not None:
            yields = self._via(p, m, at)
        else:
            yields = self._path(p.iri, m.fhir_path, m.resource_type, f"{at}/horis:fhirPath", units)
        component = _coded_component(m.resource_type)
        if (
            (m.codings or m.value_sets)
            and m.via is None
            and component is not None
            and len(self.problems) == before
        ):
            # hydration reads the same path on a component whose code matches (a panel's part)
            found = self._path(
                p.iri, m.fhir_path, component, f"{at}/horis:fhirPath", units, m.resource_type
            )
            yields = None if found is None or yields is None else yields | found
        if m.where is not None:
            found = self._path(p.iri, m.where, m.resource_type, f"{at}/horis:where", units)
            if found is not None and "boolean" not in found:
                self.add(
                    "fhir-path",
                    p.iri,
                    f"horis:where {m.where!r} yields {_names(found)}, not a boolean: it never "
                    "holds, so no resource is read",
                    f"{at}/horis:where",
                )
        if yields:
            self._fits(p, m, frozenset(yields), at)
        for unit in units:
            if p.unit is not None and is_ucum(p.unit) and not convertible(unit, p.unit):
                self.add(
                    "unit",
                    p.iri,
                    f"the mapping tests for readings in {unit!r}, which cannot be converted to "
                    f"the property's unit {p.unit!r}: every such reading would be refused",
                    at,
                )

    def _via(self, p: PropertyDef, m: FhirMapping, at: str) -> set[str] | None:
        """``horis:via`` names a Reference of the resource; the path is read on what it names
        (any of the types the R4B model lets it reference)."""
        info = type_info(m.resource_type)
        element = info.elements.get(m.via or "") if info else None
        if info is None or element is None or element.types != ("Reference",):
            hint = closest(
                m.via or "",
                [
                    e.name
                    for e in (info.elements.values() if info else ())
                    if e.types == ("Reference",)
                ],
            )
            self.add(
                "fhir-path",
                p.iri,
                f"horis:via {m.via!r} is not a Reference element of {m.resource_type}"
                + (f": did you mean {hint!r}?" if hint else ""),
                f"{at}/horis:via",
                suggestion=hint,
            )
            return None
        results = [(t, check_path(m.fhir_path, t)) for t in element.targets if type_info(t)]
        fine = [r for _t, r in results if not r.findings]
        if fine or not results:
            types = [r.types for r in fine]
            return None if not types or any(t is None for t in types) else set().union(*types)  # type: ignore[arg-type]
        target, first = results[0]
        for f in first.findings:
            self.add(
                "fhir-path",
                p.iri,
                f"{m.fhir_path!r} (read on the {target} {m.via} names): {f.message}",
                f"{at}/horis:fhirPath",
                suggestion=f.suggestion,
            )
        return None

    def _fits(self, p: PropertyDef, m: FhirMapping, yields: frozenset[str], at: str) -> None:
        what = f"horis:fhirPath {m.fhir_path!r} yields {_names(yields)}"
        if m.transform == "YearsSince":
            if not yields & {"date", "dateTime"}:
                self._misfit(p, f"{what}; horis:YearsSince needs a date", at)
            if p.unit is not None and is_ucum(p.unit) and not convertible("a", p.unit):
                self.add(
                    "unit",
                    p.iri,
                    f"horis:YearsSince yields years, but {p.name} is in {p.unit!r}: use 'a'",
                    "horis:unit",
                    suggestion="a",
                )
            return
        if m.transform == "PeriodDays":
            if "Period" not in yields:
                self._misfit(p, f"{what}; horis:PeriodDays needs a Period", at)
            return
        if p.is_object:
            coded = any(
                (c := self.o.classes.get(iri)) is not None and bool(c.codes or c.value_sets)
                for iri in self.o.subclasses(p.range)
            )
            # a range no code decides takes every selected resource, whatever the path yields
            if coded and m.context_key is None and "CodeableConcept" not in yields:
                self._misfit(
                    p,
                    f"{what}; an object property needs a CodeableConcept (its codings select "
                    f"the class under {local_name(p.range)})",
                    at,
                )
            return
        fits = _FITS.get(p.range)
        if fits is not None and not yields & fits:
            self._misfit(p, f"{what}, which never fits {p.name} ({local_name(p.range)})", at)
        elif yields & _QUANTITY and p.unit is None:
            self._misfit(
                p,
                f"{what} but {p.name} declares no horis:unit: readings in any unit would be "
                "compared as plain numbers; add the UCUM unit the rules' thresholds are in",
                at,
                code="unit",
            )

    def _misfit(
        self, p: PropertyDef, message: str, at: str, code: ProblemCode = "fhir-path"
    ) -> None:
        self.add(code, p.iri, message, f"{at}/horis:fhirPath" if code == "fhir-path" else at)

    # --- shared pieces -----------------------------------------------------------------------

    def _resource_type(self, node: str, name: str, where: str) -> bool:
        if is_resource_type(name):
            return True
        hint = closest_resource_type(name)
        self.add(
            "fhir-path",
            node,
            f"{name!r} is not a FHIR R4B resource type"
            + (f": did you mean {hint!r}?" if hint else ""),
            where,
            suggestion=hint,
        )
        return False

    def _path(
        self,
        node: str,
        expression: str,
        root: str,
        where: str,
        units: list[str] | None = None,
        resource: str | None = None,
    ) -> set[str] | None:
        """Check one expression read on ``root``; the types it yields (None: not known)."""
        result = check_path(expression, root)
        on = f" (read on a matching {root} of a coded {resource})" if resource else ""
        for f in result.findings:
            self.add(
                "fhir-path",
                node,
                f"{expression!r}{on}: {f.message}",
                where,
                suggestion=f.suggestion,
            )
        if units is not None:
            units.extend(result.units)
        return None if result.types is None else set(result.types)

    def _commit(self, tool: str, resource_type: str, element: str) -> None:
        where = "horis:commits"
        if not self._resource_type(tool, resource_type, f"{where}/horis:resourceType"):
            return
        info = type_info(resource_type)
        if element and info is not None and element not in info.elements:
            hint = closest(element, info.elements)
            self.add(
                "fhir-path",
                tool,
                f"horis:element {element!r} is not an element of {resource_type}"
                + (f": did you mean {hint!r}?" if hint else ""),
                f"{where}/horis:element",
                suggestion=hint,
            )

    def _system(self, node: str, system: str, where: str) -> None:
        known, namespaces = _code_systems()
        if system in known or any(system.startswith(n) for n in namespaces):
            return
        hint = _near_miss(system, known, namespaces)
        if hint is not None:
            self.add(
                "code-system",
                node,
                f"code system {system!r} is not the canonical URI of {known.get(hint, 'it')}: "
                f"FHIR data says {hint!r}, so this never matches; did you mean {hint!r}?",
                where,
                suggestion=hint,
            )
        elif not _SCHEME.match(system):
            self.add(
                "code-system",
                node,
                f"code system {system!r} is not an absolute URI (FHIR systems are URIs such as "
                "'http://loinc.org' or 'urn:oid:…'), so it never matches a FHIR coding",
                where,
            )


def _near_miss(system: str, known: dict[str, str], namespaces: tuple[str, ...]) -> str | None:
    """The canonical URI ``system`` misspells: another scheme, a ``www.``, a trailing slash,
    another case, or one transposed or wrong character (``http://lonic.org``)."""
    key = _normal(system)
    normals = {_normal(k): k for k in known}
    if key in normals:
        return normals[key]
    by_name = {name.lower(): uri for uri, name in known.items()}
    if system.strip().lower() in by_name:
        return by_name[system.strip().lower()]
    rest = re.sub(r"^[A-Za-z][A-Za-z0-9+.\-]*://(www\.)?", "", system.strip()).rstrip("/")
    for n in namespaces:
        if rest.lower().startswith(_normal(n) + "/"):
            return n + rest[len(_normal(n)) + 1 :]
    for k, canonical in normals.items():
        if len(k) == len(key) and difflib.SequenceMatcher(None, k, key).ratio() >= 0.85:
            return canonical
    return None


def _coded_component(resource_type: str) -> str | None:
    """The type of ``component`` when it carries its own ``code`` (Observation's panels)."""
    info = type_info(resource_type)
    element = info.elements.get("component") if info else None
    if element is None:
        return None
    part = type_info(element.types[0])
    return element.types[0] if part is not None and "code" in part.elements else None


@cache
def _code_systems() -> tuple[dict[str, str], tuple[str, ...]]:
    text = resources.files("app.ontology").joinpath("code_systems.json").read_text("utf-8")
    data = json.loads(text)
    return dict(data["systems"]), tuple(data["namespaces"])


def _normal(uri: str) -> str:
    text = uri.strip().lower()
    text = re.sub(r"^[a-z][a-z0-9+.\-]*://", "", text)
    text = text.removeprefix("www.")
    return text.rstrip("/")


def _names(types: frozenset[str] | set[str]) -> str:
    return " or ".join(sorted(t for t in types if " " not in t)) or "nothing"
