"""The terminology port's embedded implementation and its cache: FHIR's operations answered
from the HL7 package and a deployment's own ValueSet and ConceptMap files."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.ontology.loader import load_ontology
from app.ontology.model import Ontology
from app.terminology import Terminology
from app.terminology.embedded import EmbeddedTerminology
from app.terminology.port import (
    CachedTerminology,
    Expansion,
    Subsumption,
    TerminologyPort,
    TerminologyUnavailable,
    TerminologyUsed,
    Translation,
)
from tests.terminology import fixture as fx


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([fx.DEPLOYMENT])


@pytest.fixture
def embedded(ontology: Ontology, terminology: Terminology) -> EmbeddedTerminology:
    return EmbeddedTerminology.of(ontology, terminology)


def test_the_embedded_terminology_is_a_port(embedded: EmbeddedTerminology) -> None:
    assert isinstance(embedded, TerminologyPort)
    assert isinstance(CachedTerminology(port=embedded), TerminologyPort)
    used = embedded.used().to_json()
    assert used["kind"] == "embedded"
    assert "hl7.terminology.r4#7.0.1" in used["packages"]


def test_two_versions_of_one_value_set_expand_differently(embedded: EmbeddedTerminology) -> None:
    current = embedded.expand(fx.OUD, "2.0.0")
    earlier = embedded.expand(fx.OUD, "1.0.0")
    assert current.codes == {f"{fx.SNOMED}|{fx.CURRENT}"}
    assert earlier.codes == {f"{fx.SNOMED}|{fx.CURRENT}", f"{fx.SNOMED}|{fx.RETIRED}"}
    # unversioned: the current expansion (the one in valuesets, not valuesets/history)
    assert embedded.expand(fx.OUD, None) == current


def test_an_unknown_value_set_or_version_cannot_be_answered(embedded: EmbeddedTerminology) -> None:
    with pytest.raises(TerminologyUnavailable, match="does not know the value set"):
        embedded.validate_code(fx.OUD, "3.0.0", fx.SNOMED, fx.CURRENT)
    with pytest.raises(TerminologyUnavailable):
        embedded.expand("http://example.org/fhir/ValueSet/nowhere", None)


def test_validate_code_reads_the_code_system_by_oid(embedded: EmbeddedTerminology) -> None:
    assert embedded.validate_code(fx.OUD, "2.0.0", fx.SNOMED_OID, fx.CURRENT)
    assert embedded.validate_code(fx.OUD, "1.0.0", "2.16.840.1.113883.6.96", fx.RETIRED)
    assert not embedded.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.RETIRED)


def test_lookup_and_subsumes_read_the_package_under_an_older_uri(
    embedded: EmbeddedTerminology,
) -> None:
    assert embedded.lookup(fx.CLINICAL_STU3, "active") == "Active"
    assert embedded.subsumes(fx.CLINICAL_STU3, "active", "recurrence") == "subsumes"
    assert embedded.subsumes(fx.CLINICAL, "recurrence", "active") == "subsumed-by"
    assert embedded.subsumes(fx.CLINICAL, "active", "active") == "equivalent"
    assert embedded.subsumes(fx.CLINICAL, "active", "resolved") == "not-subsumed"
    assert embedded.subsumes(fx.SNOMED, "1", "2") is None  # not in the package


def test_translate_reads_the_deployments_concept_map(embedded: EmbeddedTerminology) -> None:
    (match,) = embedded.translate(fx.MAP, "1.0.0", fx.RXNORM_OID, fx.PRODUCT)
    assert match == Translation(target=f"{fx.RXNORM}|{fx.IBUPROFEN}", equivalence="wider")
    assert match.counts
    (related,) = embedded.translate(fx.MAP, None, fx.RXNORM, fx.RELATED_PRODUCT)
    assert not related.counts  # inexact: not a member of the ingredient's class
    assert embedded.translate(fx.MAP, "1.0.0", fx.RXNORM, fx.IBUPROFEN) == ()
    with pytest.raises(TerminologyUnavailable, match="concept map"):
        embedded.translate(fx.MAP, "9.9.9", fx.RXNORM, fx.PRODUCT)


@dataclass
class _Counting:
    """A port that answers membership by version and counts what it is asked."""

    members: dict[str | None, set[str]]
    asked: list[tuple[str, str | None, str]] = field(default_factory=list)
    fail: bool = False
    remote: bool = False

    def used(self) -> TerminologyUsed:
        return TerminologyUsed(kind="server", url="http://terminology.test")

    def expand(self, url: str, version: str | None, *, timeout: float | None = None) -> Expansion:
        return Expansion(url=url, version=version, codes=frozenset(self.members[version]))

    def validate_code(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> bool:
        self.asked.append((url, version, code))
        if self.fail:
            raise TerminologyUnavailable("the terminology service did not answer in time")
        return code in self.members[version]

    def lookup(self, system: str, code: str, *, timeout: float | None = None) -> str | None:
        return None

    def subsumes(
        self, system: str, code_a: str, code_b: str, *, timeout: float | None = None
    ) -> Subsumption | None:
        return None

    def translate(
        self, url: str, version: str | None, system: str, code: str, *, timeout: float | None = None
    ) -> tuple[Translation, ...]:
        return ()


def test_the_cache_keeps_answers_by_version_never_across_versions() -> None:
    inner = _Counting(members={"1": {"a"}, "2": set()})
    cached = CachedTerminology(port=inner)
    assert cached.validate_code(fx.OUD, "1", fx.SNOMED, "a") is True
    assert cached.validate_code(fx.OUD, "2", fx.SNOMED, "a") is False  # another version: asked
    assert cached.validate_code(fx.OUD, "1", fx.SNOMED, "a") is True
    assert cached.validate_code(fx.OUD, "2", fx.SNOMED, "a") is False
    assert inner.asked == [(fx.OUD, "1", "a"), (fx.OUD, "2", "a")]  # each version asked once


def test_the_cache_does_not_keep_a_refusal() -> None:
    inner = _Counting(members={"1": {"a"}}, fail=True)
    cached = CachedTerminology(port=inner)
    with pytest.raises(TerminologyUnavailable):
        cached.validate_code(fx.OUD, "1", fx.SNOMED, "a")
    inner.fail = False
    assert cached.validate_code(fx.OUD, "1", fx.SNOMED, "a") is True
    assert len(inner.asked) == 2
