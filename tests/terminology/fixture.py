"""The test-local deployment whose classes are defined by a pinned value set (with an earlier
expansion) and reached through a concept map (tests/data/terminology)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

DATA: Final = Path(__file__).resolve().parents[1] / "data" / "terminology"
DEPLOYMENT: Final = DATA / "deployment" / "terminology.ttl"
#: the same deployment, as a terminology server holds its value set (one more member)
SERVER: Final = DATA / "server" / "terminology.ttl"
OUD: Final = "http://example.org/fhir/ValueSet/oud-test"
MAP: Final = "http://example.org/fhir/ConceptMap/product-ingredient-test"
SNOMED: Final = "http://snomed.info/sct"
SNOMED_OID: Final = "urn:oid:2.16.840.1.113883.6.96"
RXNORM: Final = "http://www.nlm.nih.gov/research/umls/rxnorm"
RXNORM_OID: Final = "urn:oid:2.16.840.1.113883.6.88"
CURRENT, RETIRED, SERVER_ONLY = "10000001", "10000002", "10000003"
PRODUCT, RELATED_PRODUCT, IBUPROFEN = "20000001", "20000002", "5640"
CLINICAL: Final = "http://terminology.hl7.org/CodeSystem/condition-clinical"
#: FHIR STU3's URI of the same code system
CLINICAL_STU3: Final = "http://hl7.org/fhir/condition-clinical"
#: the same service testing the diagnosis code with a horis:inValueSet condition
BY_CONDITION: Final = DATA / "deployment" / "by-condition.ttl"
