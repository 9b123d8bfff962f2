"""Subsumption and displays, as the package's code systems state them."""

from __future__ import annotations

import pytest

from app.terminology import Terminology

THO = "http://terminology.hl7.org/CodeSystem/"
CONDITION_CLINICAL = f"{THO}condition-clinical"
ALLERGY_CLINICAL = f"{THO}allergyintolerance-clinical"
NULL_FLAVOR = f"{THO}v3-NullFlavor"


@pytest.mark.parametrize(
    ("system", "ancestor", "code", "expected"),
    [
        (CONDITION_CLINICAL, "active", "recurrence", True),
        (CONDITION_CLINICAL, "active", "relapse", True),
        (CONDITION_CLINICAL, "active", "active", True),
        (CONDITION_CLINICAL, "inactive", "resolved", True),
        (CONDITION_CLINICAL, "inactive", "remission", True),
        (CONDITION_CLINICAL, "active", "remission", False),
        (CONDITION_CLINICAL, "recurrence", "active", False),
        (CONDITION_CLINICAL, "active", "inactive", False),
        (ALLERGY_CLINICAL, "inactive", "resolved", True),
        (ALLERGY_CLINICAL, "active", "resolved", False),
        # subsumedBy properties, several parents, followed transitively: NAV → ASKU → UNK → NI
        (NULL_FLAVOR, "NI", "NAV", True),
        (NULL_FLAVOR, "UNK", "NAV", True),
        (NULL_FLAVOR, "NAV", "NI", False),
        (NULL_FLAVOR, "OTH", "DER", False),
        # nested concepts and subsumedBy together: critical high is a high
        (f"{THO}v3-ObservationInterpretation", "H", "HH", True),
        (f"{THO}v3-ObservationInterpretation", "L", "HH", False),
    ],
)
def test_subsumption_follows_the_code_system(
    terminology: Terminology, system: str, ancestor: str, code: str, expected: bool
) -> None:
    assert terminology.subsumes(system, ancestor, code) is expected


def test_an_older_name_of_the_system_gives_the_same_answer(terminology: Terminology) -> None:
    assert terminology.subsumes("http://hl7.org/fhir/condition-clinical", "active", "relapse")
    assert terminology.subsumes("http://hl7.org/fhir/v2/0078", "H", "HH")
    assert terminology.subsumes(f"{CONDITION_CLINICAL}|3.0.0", "active", "recurrence")


@pytest.mark.parametrize(
    ("system", "ancestor", "code"),
    [
        ("http://snomed.info/sct", "73211009", "44054006"),  # named, but no concepts here
        ("http://loinc.org", "2345-7", "2345-7"),
        ("http://example.org/local-codes", "a", "b"),
        (CONDITION_CLINICAL, "active", "no-such-code"),
        (CONDITION_CLINICAL, "no-such-code", "active"),
    ],
)
def test_what_is_not_known_here_is_none(
    terminology: Terminology, system: str, ancestor: str, code: str
) -> None:
    assert terminology.subsumes(system, ancestor, code) is None


@pytest.mark.parametrize(
    ("system", "code", "display"),
    [
        (CONDITION_CLINICAL, "relapse", "Relapse"),
        (ALLERGY_CLINICAL, "resolved", "Resolved"),
        ("http://hl7.org/fhir/v2/0203", "MR", "Medical record number"),
        ("http://hl7.org/fhir/v2/0078", "HH", "Critical high"),
        ("urn:oid:2.16.840.1.113883.5.1008", "UNK", "unknown"),
    ],
)
def test_a_code_has_its_code_systems_display(
    terminology: Terminology, system: str, code: str, display: str
) -> None:
    assert terminology.display(system, code) == display


@pytest.mark.parametrize(
    ("system", "code"),
    [
        (CONDITION_CLINICAL, "no-such-code"),
        (CONDITION_CLINICAL, "RELAPSE"),  # a case-sensitive code system
        ("http://loinc.org", "2345-7"),
        ("http://example.org/local-codes", "a"),
    ],
)
def test_no_display_is_made_up(terminology: Terminology, system: str, code: str) -> None:
    assert terminology.display(system, code) is None
