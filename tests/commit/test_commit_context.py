"""How the adapter reads a hook call: the context's target, values, and what counts as written."""

from __future__ import annotations

import pytest

from adapters.fhir.commit import CommitContext, element_value
from adapters.fhir.reconcile import same_value
from tests.commit.test_commit_adapter import ONTOLOGY, PRIORITY, TOOL, URGENT


def test_from_hook_keeps_the_token_scope_sources_and_context_ids() -> None:
    context = CommitContext.from_hook(
        fhir_server="http://ehr.example/fhir/",
        fhir_authorization={"access_token": "t", "scope": "user/Encounter.u"},
        sources=[
            {"resource_type": "Patient", "resource_id": "p1", "version_id": "1"},
            {"resource_type": "Encounter", "id": "e1", "version_id": "7"},
        ],
        resources=[{"resourceType": "Encounter", "id": "e1", "meta": {"versionId": "7"}}],
        context={"patientId": "p1", "encounterId": "e1", "userId": "Practitioner/x"},
    )

    assert context.fhir_server == "http://ehr.example/fhir"
    assert (context.access_token, context.scope) == ("t", "user/Encounter.u")
    assert [(s.reference, s.version_id) for s in context.sources] == [
        ("Patient/p1", "1"),
        ("Encounter/e1", "7"),
    ]
    assert context.context_ids == {"Patient": "p1", "Encounter": "e1"}
    assert set(context.resources) == {"Encounter/e1"}


def test_enumeration_values_become_codeable_concepts_by_iri_or_local_name() -> None:
    commit = TOOL.commits
    assert commit is not None
    expected = {"coding": [{"system": PRIORITY, "code": "UR"}]}

    assert element_value(ONTOLOGY, commit, URGENT) == expected
    assert element_value(ONTOLOGY, commit, "High") == expected
    with pytest.raises(LookupError):
        element_value(ONTOLOGY, commit, "Uncoded")


@pytest.mark.parametrize(
    ("current", "same"),
    [
        ({"coding": [{"system": PRIORITY, "code": "UR", "display": "urgent"}]}, True),
        ({"coding": [{"system": "other", "code": "x"}, {"system": PRIORITY, "code": "UR"}]}, True),
        ({"coding": [{"system": PRIORITY, "code": "EM"}]}, False),
        ({"coding": [{"code": "UR"}]}, False),
        (None, False),
    ],
)
def test_a_written_coding_is_recognised_by_system_and_code(current: object, same: bool) -> None:
    assert same_value(current, {"coding": [{"system": PRIORITY, "code": "UR"}]}) is same
