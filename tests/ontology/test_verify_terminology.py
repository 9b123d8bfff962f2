"""The value sets and concept maps a deployment names, checked before it serves: each check
fails on a copy of the sound test deployment (tests/data/terminology) broken in one way."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.ontology import OntologyError, load_ontology, verify
from tests.terminology import fixture as tx

PIN = f'"{tx.OUD}|2.0.0"'


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "deployment"
    shutil.copytree(tx.DEPLOYMENT.parent, target)
    return target / tx.DEPLOYMENT.name


def _edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _load_error(ttl: Path) -> str:
    with pytest.raises(OntologyError) as err:
        load_ontology([ttl])
    return str(err.value)


def test_the_sound_deployment_verifies_with_its_history_and_map() -> None:
    o = load_ontology([tx.DEPLOYMENT])
    assert verify(o) == []
    assert o.classes["https://horismos.dev/test/terminology#OpioidUseDisorder"].pinned == (
        f"{tx.OUD}|2.0.0",
    )
    assert [vs.version for vs in o.value_set_history[tx.OUD]] == ["1.0.0"]
    assert o.concept_maps[tx.MAP].version == "1.0.0"


def test_an_unpinned_value_set_is_refused(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    ttl.write_text(ttl.read_text().replace(PIN, f'"{tx.OUD}"'))
    assert "is not pinned: write its version" in _load_error(ttl)


def test_a_pin_to_a_version_the_files_do_not_hold_is_refused(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    ttl.write_text(ttl.read_text().replace(PIN, f'"{tx.OUD}|3.0.0"'))
    assert "is pinned to version 3.0.0" in _load_error(ttl)


def test_a_value_set_that_does_not_resolve_is_refused(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    ttl.write_text(ttl.read_text().replace(PIN, '"http://example.org/fhir/ValueSet/nowhere|1"'))
    assert "no value set with canonical http://example.org/fhir/ValueSet/nowhere" in _load_error(
        ttl
    )


def test_an_earlier_expansion_needs_its_own_version(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    earlier = ttl.parent / "valuesets" / "history" / "oud-test-1.0.0.json"
    _edit_json(earlier, lambda d: d.pop("version"))
    assert "an earlier expansion needs its version" in _load_error(ttl)
    _edit_json(earlier, lambda d: d.update(version="2.0.0"))
    assert "the current one, not an earlier expansion" in _load_error(ttl)
    _edit_json(earlier, lambda d: d.update(url="http://example.org/fhir/ValueSet/other"))
    assert "no current value set in valuesets has this canonical" in _load_error(ttl)


def test_a_class_left_empty_by_its_expansion_does_not_verify(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    _edit_json(
        ttl.parent / "valuesets" / "oud-test.json",
        lambda d: d["expansion"].update(contains=[], total=0),
    )
    problems = [str(p) for p in verify(load_ontology([ttl]))]
    assert len(problems) == 1, problems
    assert "OpioidUseDisorder" in problems[0] and "expand to no member" in problems[0]


def test_a_map_into_codes_the_deployment_does_not_list_does_not_verify(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)

    def retarget(d: dict[str, Any]) -> None:
        d["group"][0]["element"][0]["target"][0]["code"] = "99999999"

    _edit_json(ttl.parent / "conceptmaps" / "product-ingredient.json", retarget)
    problems = [str(p) for p in verify(load_ontology([ttl]))]
    assert len(problems) == 1, problems
    assert f"{tx.RXNORM}|99999999, a code this deployment lists nowhere" in problems[0]


def test_a_map_whose_target_does_not_count_is_not_judged(tmp_path: Path) -> None:
    """An ``inexact`` target never classifies a record, so where it points does not matter."""
    ttl = _copy(tmp_path)

    def retarget(d: dict[str, Any]) -> None:
        d["group"][0]["element"][1]["target"][0]["code"] = "99999999"

    _edit_json(ttl.parent / "conceptmaps" / "product-ingredient.json", retarget)
    assert verify(load_ontology([ttl])) == []


def test_a_map_without_a_version_is_refused(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    _edit_json(ttl.parent / "conceptmaps" / "product-ingredient.json", lambda d: d.pop("version"))
    assert "a ConceptMap needs its version" in _load_error(ttl)


def test_an_edited_history_or_map_changes_the_digest(tmp_path: Path) -> None:
    ttl = _copy(tmp_path)
    before = load_ontology([ttl]).digest

    def add(d: dict[str, Any]) -> None:
        d["expansion"]["contains"].append({"system": tx.SNOMED, "code": "10000004"})

    _edit_json(ttl.parent / "valuesets" / "history" / "oud-test-1.0.0.json", add)
    after_history = load_ontology([ttl]).digest
    _edit_json(
        ttl.parent / "conceptmaps" / "product-ingredient.json",
        lambda d: d["group"][0]["element"].pop(),
    )
    assert len({before, after_history, load_ontology([ttl]).digest}) == 3
