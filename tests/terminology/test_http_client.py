"""The FHIR terminology server client against a real server process on loopback: the embedded
terminology served over HTTP (``horismos terminology serve``), each operation in and out as
FHIR Parameters / ValueSet, the answers equal to the embedded ones."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from adapters.terminology.http import HttpTerminology
from app.terminology.port import CachedTerminology, TerminologyUnavailable, Translation
from tests.terminology import fixture as fx
from tests.terminology.served import served_terminology


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with served_terminology(fx.DEPLOYMENT) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[HttpTerminology]:
    c = HttpTerminology(base_url, timeout=10.0)
    yield c
    c.close()


def test_the_server_answers_in_fhir_shapes(base_url: str) -> None:
    answer = httpx.get(
        f"{base_url}/ValueSet/$validate-code",
        params={"url": fx.OUD, "valueSetVersion": "2.0.0", "system": fx.SNOMED, "code": fx.CURRENT},
    )
    assert answer.headers["content-type"].startswith("application/fhir+json")
    assert answer.json() == {
        "resourceType": "Parameters",
        "parameter": [{"name": "result", "valueBoolean": True}],
    }
    missing = httpx.get(f"{base_url}/ValueSet/$expand", params={"url": fx.OUD + "-nowhere"})
    assert missing.status_code == 404
    assert missing.json()["resourceType"] == "OperationOutcome"


def test_expand_asks_each_version(client: HttpTerminology) -> None:
    assert client.expand(fx.OUD, "2.0.0").codes == {f"{fx.SNOMED}|{fx.CURRENT}"}
    earlier = client.expand(fx.OUD, "1.0.0")
    assert earlier.codes == {f"{fx.SNOMED}|{fx.CURRENT}", f"{fx.SNOMED}|{fx.RETIRED}"}
    assert earlier.version == "1.0.0"


def test_two_versions_answer_differently_through_the_cache(client: HttpTerminology) -> None:
    cached = CachedTerminology(port=client)
    for _ in range(2):
        assert cached.validate_code(fx.OUD, "1.0.0", fx.SNOMED, fx.RETIRED) is True
        assert cached.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.RETIRED) is False


def test_an_oid_and_an_older_uri_match_through_the_server(client: HttpTerminology) -> None:
    assert client.validate_code(fx.OUD, "2.0.0", fx.SNOMED_OID, fx.CURRENT) is True
    assert client.lookup(fx.CLINICAL_STU3, "active") == "Active"
    assert client.subsumes(fx.CLINICAL_STU3, "active", "recurrence") == "subsumes"
    assert client.subsumes("urn:oid:2.16.840.1.113883.4.642.1.1074", "active", "relapse") == (
        "subsumes"
    )


def test_lookup_and_subsumes_of_what_the_server_does_not_know(client: HttpTerminology) -> None:
    assert client.lookup(fx.CLINICAL, "no-such-code") is None
    assert client.subsumes(fx.SNOMED, "1", "2") is None


def test_translate_reads_the_match_parts(client: HttpTerminology) -> None:
    assert client.translate(fx.MAP, "1.0.0", fx.RXNORM_OID, fx.PRODUCT) == (
        Translation(target=f"{fx.RXNORM}|{fx.IBUPROFEN}", equivalence="wider"),
    )
    assert client.translate(fx.MAP, "1.0.0", fx.RXNORM, fx.IBUPROFEN) == ()


def test_what_the_server_cannot_answer_is_said(client: HttpTerminology, base_url: str) -> None:
    with pytest.raises(TerminologyUnavailable, match=r"answered with an error \(404\)"):
        client.validate_code(fx.OUD, "9.9.9", fx.SNOMED, fx.CURRENT)
    gone = HttpTerminology("http://127.0.0.1:9", timeout=2.0)  # the discard port: nobody there
    with pytest.raises(TerminologyUnavailable, match="could not be reached"):
        gone.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.CURRENT)
    gone.close()


def test_a_bearer_token_is_sent() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(
            200,
            json={
                "resourceType": "Parameters",
                "parameter": [{"name": "result", "valueBoolean": True}],
            },
        )

    c = HttpTerminology(
        "https://tx.example.test/fhir", token="s3cret", transport=httpx.MockTransport(answer)
    )
    assert c.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.CURRENT) is True
    assert seen == ["Bearer s3cret"]
    c.close()


def _answering(body: object) -> HttpTerminology:
    return HttpTerminology(
        "https://tx.example.test/fhir",
        transport=httpx.MockTransport(lambda _request: httpx.Response(200, json=body)),
    )


def _false(*issue_types: str, message: str | None = None) -> dict[str, object]:
    parameter: list[dict[str, object]] = [{"name": "result", "valueBoolean": False}]
    if message is not None:
        parameter.append({"name": "message", "valueString": message})
    if issue_types:
        issues = [
            {
                "severity": "error",
                "code": "code-invalid",
                "details": {
                    "coding": [
                        {"system": "http://hl7.org/fhir/tools/CodeSystem/tx-issue-type", "code": t}
                    ]
                },
            }
            for t in issue_types
        ]
        parameter.append(
            {"name": "issues", "resource": {"resourceType": "OperationOutcome", "issue": issues}}
        )
    return {"resourceType": "Parameters", "parameter": parameter}


def test_false_is_not_a_member_only_when_the_server_says_the_code_is_outside_the_value_set() -> (
    None
):
    c = _answering(_false("not-in-vs", message="not in the value set"))
    assert c.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.CURRENT) is False


@pytest.mark.parametrize(
    "body",
    [
        # HAPI and tx.fhir.org answer false for an edition or a value set they do not hold
        _false(message="Unknown code system http://snomed.info/sct version 2023-03-01"),
        _false("not-found", message="A definition for the value set could not be found"),
        _false("not-in-vs", "not-found"),
        {"resourceType": "Parameters", "parameter": 5},
        {"resourceType": "Parameters", "parameter": [{"name": "result"}]},
    ],
    ids=["unknown-system", "unknown-value-set", "mixed", "parameter-not-a-list", "no-result"],
)
def test_a_false_or_an_answer_that_is_not_a_verdict_is_that_it_could_not_answer(
    body: object,
) -> None:
    """Read as "not a member", such an answer made a closed list's record none of ours (an
    allergy by a SNOMED CT concept the server's edition lacks: no allergy); it is unread."""
    c = _answering(body)
    with pytest.raises(TerminologyUnavailable):
        c.validate_code(fx.OUD, "2.0.0", fx.SNOMED, fx.CURRENT)
    c.close()


def test_a_translation_or_an_expansion_in_the_wrong_shape_is_not_read() -> None:
    bad_match = {
        "resourceType": "Parameters",
        "parameter": [
            {
                "name": "match",
                "part": [
                    {"name": "equivalence", "valueCode": "equivalent"},
                    {"name": "concept", "valueCoding": "http://snomed.info/sct|1"},
                ],
            }
        ],
    }
    with pytest.raises(TerminologyUnavailable):
        _answering(bad_match).translate(fx.OUD, "1.0.0", fx.SNOMED, fx.CURRENT)
    bad_total = {
        "resourceType": "ValueSet",
        "expansion": {"total": "5", "contains": [{"system": fx.SNOMED, "code": "1"}]},
    }
    with pytest.raises(TerminologyUnavailable):
        _answering(bad_total).expand(fx.OUD, "1.0.0")
