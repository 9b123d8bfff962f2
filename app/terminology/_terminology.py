"""Questions answered from the index: canonical system URIs, subsumption and displays."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from app.terminology._build import CodeSystemData, IndexData

_OID_PREFIX: Final = "urn:oid:"
_BARE_OID: Final = re.compile(r"^[0-2](\.(0|[1-9][0-9]*))+$")
#: FHIR STU3 named one version of a v2 table with a path segment (``…/v2/0360/2.7``): read
#: like a ``|version`` suffix.
_STU3_V2_VERSION: Final = re.compile(r"^(http://hl7\.org/fhir/v2/[^/]+)/[0-9][0-9.]*$")


#: How many spellings of code systems ``canonical_system`` remembers.
_CANONICAL_CACHE_SIZE = 4096


@dataclass(frozen=True, kw_only=True)
class TerminologyPackage:
    """One terminology package the index was built from, as a run records it."""

    name: str
    version: str
    date: str | None

    @property
    def label(self) -> str:
        """``name#version``, the FHIR package reference."""
        return f"{self.name}#{self.version}"


class Terminology:
    """The code systems of the installed terminology packages, loaded once per process."""

    def __init__(self, index: IndexData) -> None:
        self._aliases = index["aliases"]
        #: ``canonical_system`` answers by the system as the EHR spelled it: hydration asks once
        #: per coding per mapping, and a chart spells its systems a handful of ways.
        self._canonical: dict[str, str] = {}
        self._systems: dict[str, CodeSystemData] = index["code_systems"]
        self._folded = {
            url: {code.casefold(): code for code in cs["display"]}
            for url, cs in self._systems.items()
            if not cs["case_sensitive"]
        }
        self.packages: tuple[TerminologyPackage, ...] = tuple(
            TerminologyPackage(name=p["name"], version=p["version"], date=p["date"])
            for p in index["packages"]
        )
        self.counts: dict[str, int] = dict(index["counts"])

    def canonical_system(self, system: str) -> str:
        """The canonical URI of the code system an EHR names ``system``: an OID (with or
        without ``urn:oid:``), an older URI, or either with a ``|version`` suffix. A system
        the packages do not know comes back unchanged."""
        known = self._canonical.get(system)
        if known is not None:
            return known
        found = self._lookup(system)
        canonical = found if found is not None else system
        if len(self._canonical) < _CANONICAL_CACHE_SIZE:  # bounded: systems come from outside
            self._canonical[system] = canonical
        return canonical

    def knows(self, system: str) -> bool:
        """Whether the packages name ``system`` (in any form ``canonical_system`` reads)."""
        return self._lookup(system) is not None

    def _lookup(self, system: str) -> str | None:
        key = system.strip().split("|", 1)[0]
        if _BARE_OID.match(key):
            key = _OID_PREFIX + key
        elif key[: len(_OID_PREFIX)].lower() == _OID_PREFIX:
            key = _OID_PREFIX + key[len(_OID_PREFIX) :]
        versioned = _STU3_V2_VERSION.match(key)
        if versioned is not None and versioned[1] in self._aliases:
            key = versioned[1]
        return self._aliases.get(key)

    def _code(self, url: str, code: str) -> str | None:
        """``code`` as the code system spells it, or None when it has no such code."""
        cs = self._systems[url]
        if code in cs["display"]:
            return code
        folded = self._folded.get(url)
        return folded.get(code.casefold()) if folded is not None else None

    def subsumes(self, system: str, ancestor_code: str, code: str) -> bool | None:
        """Whether ``ancestor_code`` is ``code`` or one of its ancestors in ``system``.

        None when that is not known here: the system is not in the packages, lists only part
        of its codes, has a hierarchy that does not mean is-a, or has no such code."""
        url = self.canonical_system(system)
        cs = self._systems.get(url)
        if cs is None or not cs["hierarchy"]:
            return None
        ancestor, start = self._code(url, ancestor_code), self._code(url, code)
        if ancestor is None or start is None:
            return None
        seen: set[str] = set()
        pending = [start]
        while pending:
            current = pending.pop()
            if current == ancestor:
                return True
            if current not in seen:
                seen.add(current)
                pending.extend(cs["parents"].get(current, ()))
        return False

    def display(self, system: str, code: str) -> str | None:
        """The code system's own name for ``code`` (what a clinician reads), if it has one."""
        url = self.canonical_system(system)
        if url not in self._systems:
            return None
        spelled = self._code(url, code)
        return (self._systems[url]["display"][spelled] or None) if spelled is not None else None
