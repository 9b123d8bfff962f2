"""What an EHR sends as a coding's system reaches the canonical code-system URI."""

from __future__ import annotations

import pytest

from app.terminology import Terminology

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"
LOINC = "http://loinc.org"
SNOMED = "http://snomed.info/sct"
ICD10CM = "http://hl7.org/fhir/sid/icd-10-cm"
NDC = "http://hl7.org/fhir/sid/ndc"
THO = "http://terminology.hl7.org/CodeSystem/"


@pytest.mark.parametrize(
    ("sent", "canonical"),
    [
        ("urn:oid:2.16.840.1.113883.6.88", RXNORM),
        ("2.16.840.1.113883.6.88", RXNORM),
        ("URN:OID:2.16.840.1.113883.6.88", RXNORM),
        ("urn:oid:2.16.840.1.113883.6.1", LOINC),
        ("2.16.840.1.113883.6.1", LOINC),
        ("urn:oid:2.16.840.1.113883.6.96", SNOMED),
        ("2.16.840.1.113883.6.96", SNOMED),
        ("urn:oid:2.16.840.1.113883.6.90", ICD10CM),
        ("2.16.840.1.113883.6.69", NDC),
        (" urn:oid:2.16.840.1.113883.6.1 ", LOINC),
        # a NamingSystem's other names of one code system, a non-preferred URI among them
        ("2.16.840.1.113883.12.292", "http://hl7.org/fhir/sid/cvx"),
        ("http://terminology.hl7.org/CodeSystem/CVX", "http://hl7.org/fhir/sid/cvx"),
        ("http://terminology.hl7.org/CodeSystem/icd10CM", ICD10CM),
    ],
)
def test_an_oid_names_its_code_system(terminology: Terminology, sent: str, canonical: str) -> None:
    assert terminology.canonical_system(sent) == canonical


@pytest.mark.parametrize(
    ("sent", "canonical"),
    [
        ("http://snomed.info/sct|http://snomed.info/sct/731000124108/version/20240301", SNOMED),
        ("http://loinc.org|2.77", LOINC),
        ("urn:oid:2.16.840.1.113883.6.88|2024-01", RXNORM),
        (f"{THO}condition-clinical|3.0.0", f"{THO}condition-clinical"),
    ],
)
def test_a_version_suffix_is_dropped(terminology: Terminology, sent: str, canonical: str) -> None:
    assert terminology.canonical_system(sent) == canonical


@pytest.mark.parametrize(
    ("sent", "canonical"),
    [
        # STU3's v2 table URIs; the package's v2 table list says where each table's codes are.
        ("http://hl7.org/fhir/v2/0203", f"{THO}v2-0203"),
        ("http://hl7.org/fhir/v2/0001", f"{THO}v2-0001"),
        ("http://hl7.org/fhir/v2/0360/2.7", f"{THO}v2-0360"),
        # Table 0078's codes are v3 ObservationInterpretation's; THO has no v2-0078 of its own.
        ("http://hl7.org/fhir/v2/0078", f"{THO}v3-ObservationInterpretation"),
        (f"{THO}v2-0078", f"{THO}v3-ObservationInterpretation"),
        ("urn:oid:2.16.840.1.113883.12.78", f"{THO}v3-ObservationInterpretation"),
        # STU3's URIs of the code systems FHIR and HL7 v3 define.
        ("http://hl7.org/fhir/condition-clinical", f"{THO}condition-clinical"),
        ("http://hl7.org/fhir/allergyintolerance-clinical", f"{THO}allergyintolerance-clinical"),
        ("http://hl7.org/fhir/v3/ActCode", f"{THO}v3-ActCode"),
        ("http://hl7.org/fhir/v3/NullFlavor", f"{THO}v3-NullFlavor"),
        ("urn:oid:2.16.840.1.113883.5.1008", f"{THO}v3-NullFlavor"),
        # an old URI the CodeSystem itself lists as an identifier (use: old)
        (
            "http://hl7.org/fhir/us/qicore/CodeSystem/appropriateness-score",
            f"{THO}appropriateness-score",
        ),
    ],
)
def test_an_older_hl7_uri_names_todays(terminology: Terminology, sent: str, canonical: str) -> None:
    assert terminology.canonical_system(sent) == canonical


@pytest.mark.parametrize(
    "sent",
    [
        RXNORM,
        LOINC,
        f"{THO}v2-0203",
        "http://hl7.org/fhir/administrative-gender",  # still FHIR R4's own URI
    ],
)
def test_a_canonical_uri_stays_as_it_is(terminology: Terminology, sent: str) -> None:
    assert terminology.canonical_system(sent) == sent
    assert terminology.knows(sent) == (sent != "http://hl7.org/fhir/administrative-gender")


@pytest.mark.parametrize(
    "sent",
    [
        "http://example.org/local-codes",
        "http://example.org/local-codes|2",
        "urn:oid:1.2.3.4.5.6.7.8.9",
        "http://hl7.org/fhir/v2/9999",
        "",
        "not a uri",
    ],
)
def test_an_unknown_system_comes_back_unchanged(terminology: Terminology, sent: str) -> None:
    assert terminology.canonical_system(sent) == sent
    assert not terminology.knows(sent)


def test_an_oid_two_code_systems_claim_is_left_alone(terminology: Terminology) -> None:
    # The package gives 2.16.840.1.113883.6.13 to both ADA's CDT and THO's CD2: no guess.
    assert terminology.canonical_system("urn:oid:2.16.840.1.113883.6.13") == (
        "urn:oid:2.16.840.1.113883.6.13"
    )
