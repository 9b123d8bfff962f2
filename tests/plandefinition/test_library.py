"""The definitions the service holds (``HORISMOS_DEFINITION_PATHS``): found by url, url|version
and Type/id; a file it cannot read stops it, named, rather than being skipped; a bare url held
in several versions names none of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.plandefinition.library import DefinitionError, load_definitions
from tests.plandefinition.conftest import CPG


def _plan(ident: str, version: str) -> dict[str, object]:
    return {
        "resourceType": "PlanDefinition",
        "id": ident,
        "url": "http://example.org/PlanDefinition/P",
        "version": version,
        "status": "draft",
    }


def test_the_collection_definitions_are_found_by_url_version_and_id() -> None:
    held = load_definitions([CPG / "definitions"])
    assert len(held) == 6
    by_url = held.canonical("http://example.org/ActivityDefinition/SendMessageActivity")
    assert by_url is not None and by_url["kind"] == "CommunicationRequest"
    versioned = held.canonical("http://example.org/ActivityDefinition/SendMessageActivity|0.1.0")
    assert versioned is by_url
    assert held.by_id("Questionnaire", "RegistrationQuestionnaire") is not None
    assert held.canonical("http://example.org/ActivityDefinition/SendMessageActivity|9") is None


def test_a_url_held_in_two_versions_needs_its_version(tmp_path: Path) -> None:
    (tmp_path / "v1.json").write_text(json.dumps(_plan("p1", "1")))
    (tmp_path / "v2.json").write_text(json.dumps(_plan("p2", "2")))
    held = load_definitions([tmp_path])
    assert held.canonical("http://example.org/PlanDefinition/P") is None
    assert "http://example.org/PlanDefinition/P" in held.ambiguous
    two = held.canonical("http://example.org/PlanDefinition/P|2")
    assert two is not None and two["id"] == "p2"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not readable JSON"),
        (json.dumps({"resourceType": "Patient", "id": "x"}), "a Patient is not a definition"),
        (json.dumps({"resourceType": "PlanDefinition", "id": "x"}), "status"),
        (json.dumps({"resourceType": "PlanDefinition", "status": "draft"}), "without an id"),
    ],
    ids=["not-json", "not-a-definition", "not-valid-r4", "unnamed"],
)
def test_a_file_the_service_cannot_read_is_named(tmp_path: Path, content: str, words: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(DefinitionError) as raised:
        load_definitions([tmp_path])
    assert "bad.json" in str(raised.value)
    assert words in str(raised.value)


def test_the_same_id_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(_plan("same", "1")))
    (tmp_path / "b.json").write_text(json.dumps({**_plan("same", "2"), "url": "http://x/Q"}))
    with pytest.raises(DefinitionError, match="PlanDefinition/same is defined twice"):
        load_definitions([tmp_path])


def test_a_library_in_the_files_is_held_beside_the_plan_naming_it(tmp_path: Path) -> None:
    library = {
        "resourceType": "Library",
        "id": "logic",
        "url": "http://example.org/Library/Logic",
        "status": "draft",
        "type": {"coding": [{"code": "logic-library"}]},
    }
    (tmp_path / "package.json").write_text(
        json.dumps(
            {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": library}, {"resource": _plan("p", "1")}],
            }
        )
    )
    held = load_definitions([tmp_path])
    assert held.by_id("Library", "logic") == library
    assert held.canonical("http://example.org/Library/Logic") == library
