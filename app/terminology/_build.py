"""Reads a FHIR terminology package's NamingSystems and CodeSystems into one compact index.

The index is plain JSON data (``IndexData``): the package's name and version, every alias of a
code system mapped to its canonical URI, and per code system the displays of its codes and the
parents of each code. ``python -m app.terminology build`` writes it beside the package at install
time, so a process reads one small file instead of ~1,500 resources.

Aliases come from the package's data, in tiers; a higher tier is never overridden by a lower one
and an alias two entries of one tier give different targets is left out (ambiguous):

1. every CodeSystem ``url`` is canonical as it stands;
2. every NamingSystem's ``uniqueId`` (types ``uri`` and ``oid``) names the NamingSystem's
   preferred URI;
3. every CodeSystem ``identifier`` (an OID, or a URI such as an old one) names that
   CodeSystem's ``url``;
4. the URIs FHIR STU3 published HL7 code systems under, derived by the rule in ``_stu3_uri``;
5. the v2 table list (CodeSystem ``v2-tables``): each table's code-system OID, table OID and
   older URIs name the code system the list gives for that table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, TypedDict

#: Bumped whenever the shape of ``IndexData`` changes; an index of another format is rebuilt.
INDEX_FORMAT: Final = 1
INDEX_FILE: Final = "horismos-index.json"

_OID_PREFIX: Final = "urn:oid:"
_TERMINOLOGY_CS: Final = "http://terminology.hl7.org/CodeSystem/"
#: OID arcs HL7 assigns to the code systems of one family: the FHIR core specification's, HL7
#: v3's and HL7 v2's. Where FHIR STU3 published each family is the rule in ``_stu3_uri``.
_FHIR_CORE_ARC: Final = "2.16.840.1.113883.4.642."
_V3_ARC: Final = "2.16.840.1.113883.5."
_V2_ARC: Final = "2.16.840.1.113883.18."
#: Concept properties that state the hierarchy (FHIR's concept-properties code system).
_PARENT_URI: Final = "http://hl7.org/fhir/concept-properties#parent"
_CHILD_URI: Final = "http://hl7.org/fhir/concept-properties#child"


class PackageData(TypedDict):
    """One FHIR package an index was built from."""

    name: str
    version: str
    date: str | None


class CodeSystemData(TypedDict):
    """What the index keeps of one CodeSystem."""

    version: str | None
    #: The hierarchy is known when the CodeSystem lists every code (``content`` complete) and
    #: its nesting means is-a (``hierarchyMeaning`` is-a or absent).
    hierarchy: bool
    case_sensitive: bool
    #: every code → its display ("" when the CodeSystem gives none)
    display: dict[str, str]
    #: code → its direct parents; codes without a parent are left out.
    parents: dict[str, list[str]]


class IndexData(TypedDict):
    """The whole index, as written to ``horismos-index.json``."""

    format: int
    packages: list[PackageData]
    #: every system name the packages know (an alias or a canonical URI) → its canonical URI
    aliases: dict[str, str]
    code_systems: dict[str, CodeSystemData]
    #: How many resources were read, and how many aliases were left out as ambiguous.
    counts: dict[str, int]


def build_index(package_dirs: Iterable[Path]) -> IndexData:
    """The index of the FHIR packages at ``package_dirs`` (each the folder holding
    ``package.json``)."""
    packages: list[PackageData] = []
    code_systems: list[dict[str, Any]] = []
    naming_systems: list[dict[str, Any]] = []
    for folder in package_dirs:
        manifest = _read(folder / "package.json")
        packages.append(
            PackageData(
                name=str(manifest["name"]),
                version=str(manifest["version"]),
                date=manifest.get("date"),
            )
        )
        code_systems += [_read(path) for path in sorted(folder.glob("CodeSystem-*.json"))]
        naming_systems += [_read(path) for path in sorted(folder.glob("NamingSystem-*.json"))]
    code_systems = [cs for cs in code_systems if cs.get("resourceType") == "CodeSystem"]
    naming_systems = [ns for ns in naming_systems if ns.get("resourceType") == "NamingSystem"]

    urls = {str(cs["url"]) for cs in code_systems if "url" in cs}
    aliases = _Aliases()
    aliases.add_tier((url, url) for url in urls)
    aliases.add_tier(pair for ns in naming_systems for pair in _naming_system_aliases(ns, urls))
    aliases.add_tier(pair for cs in code_systems for pair in _identifier_aliases(cs))
    aliases.add_tier(pair for cs in code_systems for pair in _stu3_aliases(cs))
    v2_tables = [cs for cs in code_systems if cs.get("url") == _TERMINOLOGY_CS + "v2-tables"]
    aliases.add_tier(pair for cs in v2_tables for pair in _v2_table_aliases(cs))

    return IndexData(
        format=INDEX_FORMAT,
        packages=packages,
        aliases=aliases.resolved(),
        code_systems={str(cs["url"]): _code_system_data(cs) for cs in code_systems if "url" in cs},
        counts={
            "CodeSystem": len(code_systems),
            "NamingSystem": len(naming_systems),
            "ambiguous_aliases": aliases.ambiguous,
        },
    )


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object")
    return data


class _Aliases:
    """Alias → canonical URI, filled tier by tier (see the module docstring)."""

    def __init__(self) -> None:
        self._map: dict[str, str] = {}
        self.ambiguous = 0

    def add_tier(self, pairs: Iterable[tuple[str, str]]) -> None:
        tier: dict[str, set[str]] = {}
        for alias, target in pairs:
            alias, target = alias.strip(), self._map.get(target.strip(), target.strip())
            if alias and target and alias not in self._map:
                tier.setdefault(alias, set()).add(target)
        for alias, targets in tier.items():
            if len(targets) == 1:
                self._map[alias] = next(iter(targets))
            else:
                self.ambiguous += 1

    def resolved(self) -> dict[str, str]:
        """Every alias with its canonical URI; a canonical URI maps to itself."""
        return dict(sorted(self._map.items()))


def _oid_forms(oid: str) -> Iterator[str]:
    """``urn:oid:X`` (the key an OID is looked up by; bare ``X`` is normalized to it)."""
    bare = oid.strip().removeprefix(_OID_PREFIX)
    if bare:
        yield _OID_PREFIX + bare


def _naming_system_aliases(ns: dict[str, Any], urls: set[str]) -> Iterator[tuple[str, str]]:
    unique = [u for u in ns.get("uniqueId", []) if isinstance(u.get("value"), str)]
    uris = [u["value"] for u in unique if u.get("type") == "uri"]
    preferred = [u["value"] for u in unique if u.get("type") == "uri" and u.get("preferred")]
    # The canonical URI: the preferred one; failing that, one the package has a CodeSystem at.
    canonical = next(iter(preferred), None) or next((u for u in uris if u in urls), None)
    if canonical is None:
        return
    for entry in unique:
        if entry.get("type") == "uri":
            yield entry["value"], canonical
        elif entry.get("type") == "oid":
            for form in _oid_forms(entry["value"]):
                yield form, canonical


def _identifier_oids(cs: dict[str, Any]) -> list[str]:
    return [
        str(i["value"]).removeprefix(_OID_PREFIX)
        for i in cs.get("identifier", [])
        if str(i.get("value", "")).startswith(_OID_PREFIX)
    ]


def _identifier_aliases(cs: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The CodeSystem's OIDs, and the URIs it lists as identifiers (QI-Core's old URI of
    appropriateness-score is one, ``use`` old)."""
    if "url" not in cs:
        return
    for oid in _identifier_oids(cs):
        for form in _oid_forms(oid):
            yield form, str(cs["url"])
    for identifier in cs.get("identifier", []):
        value = str(identifier.get("value", ""))
        if "://" in value:
            yield value, str(cs["url"])


def _stu3_uri(url: str, oid: str) -> str | None:
    """The URI FHIR STU3 published a code system under, from its R4 URL and its OID.

    FHIR R4 moved HL7's code systems to ``http://terminology.hl7.org/CodeSystem/{id}``; STU3
    had them at ``http://hl7.org/fhir/{id}`` (those the FHIR specification defines: OIDs under
    2.16.840.1.113883.4.642), ``http://hl7.org/fhir/v3/{Name}`` for ``v3-{Name}`` (HL7 v3: OIDs
    under 2.16.840.1.113883.5) and ``http://hl7.org/fhir/v2/{table}`` for ``v2-{table}`` (HL7 v2:
    OIDs under 2.16.840.1.113883.18). The package keeps no STU3 URI itself, so the rule is
    applied only to a CodeSystem the package holds whose OID places it in that family.
    """
    if not url.startswith(_TERMINOLOGY_CS):
        return None
    tail = url.removeprefix(_TERMINOLOGY_CS)
    if oid.startswith(_FHIR_CORE_ARC):
        return f"http://hl7.org/fhir/{tail}"
    if oid.startswith(_V3_ARC) and tail.startswith("v3-"):
        return f"http://hl7.org/fhir/v3/{tail.removeprefix('v3-')}"
    if oid.startswith(_V2_ARC) and tail.startswith("v2-"):
        return f"http://hl7.org/fhir/v2/{tail.removeprefix('v2-')}"
    return None


def _stu3_aliases(cs: dict[str, Any]) -> Iterator[tuple[str, str]]:
    url = str(cs.get("url", ""))
    for oid in _identifier_oids(cs):
        old = _stu3_uri(url, oid)
        if old is not None:
            yield old, url


def _property_values(concept: dict[str, Any], codes: set[str]) -> list[str]:
    return [
        str(value)
        for p in concept.get("property", [])
        if p.get("code") in codes
        for value in (p.get("valueCode"), p.get("valueString"))
        if isinstance(value, str) and value
    ]


def _v2_table_aliases(cs: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Each v2 table's OIDs and older URIs → the code system the table list names for it.

    The list gives a table's code system as property ``v2-cs-uri`` (for table 0078 the package
    spells it ``v2cs-uri``, both are read). A table whose codes HL7 moved elsewhere names that
    code system: 0078 (Interpretation Codes) names v3-ObservationInterpretation, so the URIs
    older data use for table 0078 reach it. The older URIs are STU3's
    ``http://hl7.org/fhir/v2/{table}`` and R4's ``http://terminology.hl7.org/CodeSystem/v2-{table}``
    (the latter only where the package has no CodeSystem there: tier 1 keeps those).
    """
    for concept in cs.get("concept", []):
        table = str(concept.get("code", ""))
        targets = _property_values(concept, {"v2-cs-uri", "v2cs-uri"})
        if not table or len(targets) != 1:
            continue
        (target,) = targets
        yield f"http://hl7.org/fhir/v2/{table}", target
        yield f"{_TERMINOLOGY_CS}v2-{table}", target
        for oid in _property_values(concept, {"v2-cs-oid", "v2-table-oid"}):
            for form in _oid_forms(oid):
                yield form, target


def _concepts(
    concepts: list[dict[str, Any]], parent: str | None
) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """(parent code or None, concept) for every concept, nested ones included."""
    for concept in concepts:
        yield parent, concept
        yield from _concepts(concept.get("concept", []), str(concept.get("code")))


def _code_system_data(cs: dict[str, Any]) -> CodeSystemData:
    declared = {p.get("code"): p.get("uri") for p in cs.get("property", [])}
    parent_props = {c for c, uri in declared.items() if uri == _PARENT_URI or c == "parent"}
    child_props = {c for c, uri in declared.items() if uri == _CHILD_URI or c == "child"}
    parent_props.add("subsumedBy")  # FHIR's own property for a parent in an is-a hierarchy
    case_sensitive = cs.get("caseSensitive") is not False
    display: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    for nesting_parent, concept in _concepts(cs.get("concept", []), None):
        code = str(concept.get("code", ""))
        if not code:
            continue
        text = concept.get("display")
        display[code] = text if isinstance(text, str) else ""
        ups = set(_property_values(concept, parent_props))
        if nesting_parent is not None:
            ups.add(nesting_parent)
        if ups:
            parents.setdefault(code, set()).update(ups)
        for child in _property_values(concept, child_props):
            parents.setdefault(child, set()).add(code)
    return CodeSystemData(
        version=cs.get("version"),
        hierarchy=cs.get("content") == "complete" and cs.get("hierarchyMeaning", "is-a") == "is-a",
        case_sensitive=case_sensitive,
        display=display,
        parents={code: sorted(ups) for code, ups in sorted(parents.items())},
    )


def write_index(index: IndexData, path: Path) -> None:
    """Write ``index`` compactly, through a temporary file so no reader sees half of it."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(index, separators=(",", ":"), sort_keys=True), encoding="utf-8")
    partial.replace(path)
