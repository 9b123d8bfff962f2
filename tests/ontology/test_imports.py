"""A deployment imports a common file (``owl:imports``): the common definitions are written once,
problems in them name the common file, a missing import is a load error, a common file without
services is not a deployment, ``horismos verify`` follows imports, and every run records the
version and digest of each imported file (``GET /runs/{id}``)."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.ontology import OntologyError, load_ontology, verify
from app.ontology.cli_commands import verify_files
from app.ontology.deployments import find_deployments

ROOT = Path(__file__).resolve().parents[2]
OpenClient = Callable[..., AbstractContextManager[TestClient]]

HEAD = """\
@prefix horis: <https://horismos.dev/ns#> .
@prefix owl:   <http://www.w3.org/2002/07/owl#> .
@prefix rdfs:  <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd:   <http://www.w3.org/2001/XMLSchema#> .
"""
COMMON = (
    HEAD
    + """@prefix c: <https://example.org/common#> .
<https://example.org/common> a owl:Ontology ; owl:versionInfo "0.3" .
c:Patient a horis:Class .
c:age a horis:Property ; horis:domain c:Patient ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:fromFhir [ horis:resourceType "Patient" ; horis:fhirPath "birthDate" ;
                     horis:transform horis:YearsSince ] .
"""
)
REC = (
    HEAD
    + """@prefix : <https://example.org/rec#> .
@prefix c: <https://example.org/common#> .
<https://example.org/rec> a owl:Ontology ; owl:versionInfo "1.0" ;
    owl:imports <https://example.org/common> .
:adult a horis:Property ; horis:domain c:Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:Adult a horis:Rule ; horis:about c:Patient ;
    horis:when ( [ horis:property c:age ; horis:atLeast 18 ] ) ;
    horis:then [ horis:property :adult ; horis:value true ] .
"""
)


def write(folder: Path, **files: str) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, text in files.items():
        out[name] = folder / f"{name}.ttl"
        out[name].write_text(text, encoding="utf-8")
    return out


def test_a_deployment_loads_what_it_imports_from_beside_it(tmp_path: Path) -> None:
    f = write(tmp_path, common=COMMON, rec=REC)
    [source] = find_deployments([f["rec"]])  # the common file is found beside it
    assert (source.id, source.imports) == ("rec", (f["common"],))
    [again] = find_deployments([f["rec"], f["common"]])  # configured too: still not a deployment
    assert again.id == "rec"
    onto = load_ontology(source.paths)
    assert "https://example.org/common#age" in onto.properties
    assert verify(onto) == []
    parts = {p.iri: (p.version, p.files) for p in onto.parts}
    assert parts == {
        "https://example.org/rec": ("1.0", ("rec.ttl",)),
        "https://example.org/common": ("0.3", ("common.ttl",)),
    }


def test_a_common_file_that_declares_services_is_also_a_deployment(tmp_path: Path) -> None:
    service = """
<https://example.org/common#Svc> a horis:CdsService ; horis:id "common-svc" .
"""
    f = write(tmp_path, common=COMMON + service, rec=REC)
    ids = [d.id for d in find_deployments([f["rec"], f["common"]])]
    assert ids == ["common", "rec"]


def test_a_missing_import_is_a_load_error_naming_the_importing_ontology(tmp_path: Path) -> None:
    f = write(tmp_path, rec=REC)
    with pytest.raises(OntologyError) as caught:
        load_ontology(find_deployments([f["rec"]])[0].paths)
    [missing] = [p for p in caught.value.problems if "example.org/common>" in p.message]
    assert missing.code == "dangling-reference"
    assert (missing.node, missing.path) == ("https://example.org/rec", "owl:imports")


def test_a_load_error_in_the_common_file_names_that_file(tmp_path: Path) -> None:
    broken = COMMON.replace(
        'horis:cardinality "0..1" ;', 'horis:cardinality "0..1" ; horis:unti "a" ;'
    )
    f = write(tmp_path, common=broken, rec=REC)
    with pytest.raises(OntologyError) as caught:
        load_ontology(find_deployments([f["rec"]])[0].paths)
    [problem] = caught.value.problems
    assert (problem.node, problem.file) == ("https://example.org/common#age", "common.ttl")
    assert str(problem).endswith("(in common.ttl)")


def test_a_verification_problem_in_the_common_file_names_that_file(tmp_path: Path) -> None:
    stray = """
<https://example.org/common#Lost> a horis:Step ; horis:terminal true .
"""
    f = write(tmp_path, common=COMMON + stray, rec=REC)
    problems = verify(load_ontology(find_deployments([f["rec"]])[0].paths))
    [problem] = problems
    assert (problem.code, problem.node) == ("unreachable", "https://example.org/common#Lost")
    assert problem.file == "common.ttl"


def test_horismos_verify_follows_the_imports_of_the_files_it_is_given(tmp_path: Path) -> None:
    f = write(tmp_path, common=COMMON, rec=REC)
    out: list[str] = []
    assert verify_files([f["rec"]], out=out.append, err=out.append) == 0
    assert out[-1].startswith("ok: 2 file(s)")
    # a missing import fails it, naming the ontology that imports it
    f["common"].unlink()
    out.clear()
    assert verify_files([f["rec"]], out=out.append, err=out.append) == 1
    assert any(line.startswith("https://example.org/rec owl:imports: <https") for line in out)


def _request(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((ROOT / "examples" / name).read_text())
    body["hookInstance"] = str(uuid.uuid4())
    return body


def test_every_run_records_the_version_and_digest_of_each_imported_file(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    shared = """@prefix owl: <http://www.w3.org/2002/07/owl#> .
<https://example.org/shared> a owl:Ontology ; owl:versionInfo "2.4.0" .
"""
    (tmp_path / "shared.ttl").write_text(shared, encoding="utf-8")
    med = (ROOT / "ontologies/med-safety.ttl").read_text(encoding="utf-8")
    header = 'owl:versionInfo "1.7.0" .'
    assert header in med
    med = med.replace(
        header, 'owl:versionInfo "1.0.0" ; owl:imports <https://example.org/shared> .'
    )
    (tmp_path / "med-safety.ttl").write_text(med, encoding="utf-8")
    shutil.copytree(ROOT / "ontologies/valuesets", tmp_path / "valuesets")  # its drug products

    with make_app_client(ontology_paths=[tmp_path / "med-safety.ttl"]) as client:
        listed = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
        answer = client.post(
            "/cds-services/horismos-med-safety", json=_request("med-safety-order-sign.json")
        )
        assert answer.status_code == 200, answer.text
        run_id = answer.json()["extension"]["dev.horismos.run"]["runId"]
        stored = client.get(f"/runs/{run_id}").json()

    [imported] = listed["med-safety"]["imported"]
    assert (imported["iri"], imported["version"]) == ("https://example.org/shared", "2.4.0")
    assert re.fullmatch(r"[0-9a-f]{64}", imported["digest"])
    assert stored["deployment"] == {
        "iri": "https://horismos.dev/example/med-safety",
        "version": "1.0.0",
        "digest": listed["med-safety"]["digest"],
        "imports": [
            {"iri": "https://example.org/shared", "version": "2.4.0", "digest": imported["digest"]}
        ],
    }
