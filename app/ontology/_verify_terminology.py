"""Verification of the value sets and concept maps a deployment names.

Loading already refuses a value set that does not resolve (no file has its canonical), a
``horis:valueSet`` without a version or pinned to a version the files do not hold, an earlier
expansion without a version, and a concept map without a url, version or element. What is
left to verify is what the files mean together:

- **no class is empty after expansion**: a class defined by value sets (``horis:inValueSet``,
  ``horis:valueSet``), with no code of its own, whose value sets expand to no member at all
  would never classify a record (an expansion may legitimately be empty in FHIR, so this is a
  verify problem, not a load one); a mapping or condition testing an empty value set likewise;
- **every concept map resolves**: each target code it maps to (with an equivalence that
  counts) is a code the deployment lists somewhere, else the map translates codes into
  nothing hydration can read;
- **versions are pinned**: a ``horis:valueSet`` names its version and an earlier expansion
  has one (both load problems; ``horis:inValueSet`` may name an unversioned file).
"""

from __future__ import annotations

from app.ontology._typecheck import TypeChecker
from app.terminology.port import COUNTING_EQUIVALENCES


class TerminologyChecker(TypeChecker):
    """``run_terminology`` reports the problems above."""

    def run_terminology(self) -> None:
        o = self.o
        for c in o.classes.values():
            if not c.value_sets:
                continue
            members = [code for url in c.value_sets for code in o.value_sets[url].codes]
            if not c.codes and not members:
                self.add(
                    "terminology",
                    c.iri,
                    f"no record can be of this class: its value sets ({', '.join(c.value_sets)}) "
                    "expand to no member and it lists no code of its own",
                )
        for p in o.properties.values():
            for m in p.from_fhir:
                for url in m.value_sets:
                    if not o.value_sets[url].codes:
                        self.add(
                            "terminology",
                            p.iri,
                            f"its mapping of {m.resource_type} tests the value set {url}, which "
                            "expands to no member: no record can be read",
                        )
        for cm in o.concept_maps.values():
            for source, targets in sorted(cm.mappings.items()):
                for t in targets:
                    counts = t.target and t.equivalence in COUNTING_EQUIVALENCES
                    if counts and not o.knows_code(t.target):
                        self.add(
                            "terminology",
                            cm.url,
                            f"{cm.source} maps {source} to {t.target}, a code this "
                            "deployment lists nowhere: the translation can classify nothing",
                        )
