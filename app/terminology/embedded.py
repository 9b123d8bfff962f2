"""The embedded terminology: the port answered from files, with no network.

Code systems (``$lookup``, ``$subsumes``, and the canonical name of an OID or older URI) come
from the installed HL7 Terminology package (``app.terminology.Terminology``); value sets
(``$expand``, ``$validate-code``) and concept maps (``$translate``) from a deployment's own
``ValueSet`` and ``ConceptMap`` files — its ``valuesets`` folder (current expansions), its
``valuesets/history`` folder (earlier ones) and its ``conceptmaps`` folder. A value set or map
it does not hold, at the version asked, is :class:`TerminologyUnavailable`, never an empty
answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from app.terminology._terminology import Terminology
from app.terminology.port import (
    Expansion,
    Subsumption,
    TerminologyUnavailable,
    TerminologyUsed,
    Translation,
)

if TYPE_CHECKING:
    from app.ontology.model import ConceptMapDef, Ontology, ValueSetDef


class EmbeddedTerminology:
    """The port over the installed package and one deployment's ValueSet and ConceptMap
    files. ``package`` may be None (no package installed): systems are then read as written."""

    remote = False

    def __init__(
        self,
        package: Terminology | None,
        value_sets: Iterable[ValueSetDef] = (),
        concept_maps: Iterable[ConceptMapDef] = (),
    ) -> None:
        self.package = package
        self._canonical: Callable[[str], str] = (
            package.canonical_system if package is not None else (lambda s: s.split("|", 1)[0])
        )
        self._expansions: dict[tuple[str, str | None], Expansion] = {}
        self._current: dict[str, Expansion] = {}
        for vs in value_sets:
            codes = frozenset(self._canonical_coding(c) for c in vs.codes)
            expansion = Expansion(url=vs.url, version=vs.version, codes=codes)
            self._expansions.setdefault((vs.url, vs.version), expansion)
            self._current.setdefault(vs.url, expansion)
        self._maps: dict[tuple[str, str], dict[str, tuple[Translation, ...]]] = {}
        self._latest_map: dict[str, str] = {}
        for cm in concept_maps:
            self._maps[(cm.url, cm.version)] = {
                self._canonical_coding(src): tuple(
                    Translation(
                        target=self._canonical_coding(t.target) if t.target else "",
                        equivalence=t.equivalence,
                    )
                    for t in targets
                )
                for src, targets in cm.mappings.items()
            }
            self._latest_map.setdefault(cm.url, cm.version)

    @classmethod
    def of(cls, ontology: Ontology, package: Terminology | None) -> EmbeddedTerminology:
        """The embedded terminology of one deployment: its current value sets first (what an
        unversioned call expands), then their earlier expansions, and its concept maps."""
        return cls(
            package,
            [
                *ontology.value_sets.values(),
                *(vs for olds in ontology.value_set_history.values() for vs in olds),
            ],
            ontology.concept_maps.values(),
        )

    def _canonical_coding(self, coding: str) -> str:
        system, _, code = coding.partition("|")
        return f"{self._canonical(system)}|{code}"

    def used(self) -> TerminologyUsed:
        packages = tuple(p.label for p in self.package.packages) if self.package else ()
        return TerminologyUsed(kind="embedded", packages=packages)

    def close(self) -> None:
        """Nothing to let go of: it reads what was loaded in memory."""

    def expand(self, url: str, version: str | None, *, timeout: float | None = None) -> Expansion:
        found = self._current.get(url) if version is None else self._expansions.get((url, version))
        if found is None:
            shown = url if version is None else f"{url}|{version}"
            raise TerminologyUnavailable(f"the terminology does not know the value set {shown}")
        return found

    def validate_code(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> bool:
        return f"{self._canonical(system)}|{code}" in self.expand(url, version).codes

    def lookup(self, system: str, code: str, *, timeout: float | None = None) -> str | None:
        return self.package.display(system, code) if self.package is not None else None

    def subsumes(
        self, system: str, code_a: str, code_b: str, *, timeout: float | None = None
    ) -> Subsumption | None:
        if self.package is None:
            return None
        down = self.package.subsumes(system, code_a, code_b)
        up = self.package.subsumes(system, code_b, code_a)
        if down is None or up is None:
            return None
        if down and up:
            return "equivalent"
        return "subsumes" if down else "subsumed-by" if up else "not-subsumed"

    def translate(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> tuple[Translation, ...]:
        version = version if version is not None else self._latest_map.get(url)
        found = self._maps.get((url, version)) if version is not None else None
        if found is None:
            shown = url if version is None else f"{url}|{version}"
            raise TerminologyUnavailable(f"the terminology does not know the concept map {shown}")
        return found.get(f"{self._canonical(system)}|{code}", ())
