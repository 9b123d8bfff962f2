"""Schema derivation: one test per row of docs/schema.md's mapping table, and the output's
shape."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from app.ontology import derive_schema
from app.ontology.model import Ontology

F = "https://example.org/full#"


def _variants(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    items = schema["properties"]["instances"]["items"]
    return {v["title"]: v for v in items.get("anyOf", [items])}


@pytest.fixture(scope="module")
def traveller(full: Ontology) -> dict[str, Any]:
    return _variants(derive_schema(full, ["Traveller", "Condition"]))["Traveller"]


def test_class_with_properties_is_an_object_required_from_cardinality_one(
    traveller: dict[str, Any],
) -> None:
    assert traveller["type"] == "object" and traveller["additionalProperties"] is False
    assert traveller["required"] == ["id", "class", "code", "hasCondition"]  # 1..1 and 1..*
    assert traveller["properties"]["hasCondition"]["minItems"] == 1
    assert "age" in traveller["properties"] and "age" not in traveller["required"]


def test_numbers_carry_minimum_and_maximum(traveller: dict[str, Any]) -> None:
    weight = traveller["properties"]["weight"]
    assert (weight["type"], weight["minimum"], weight["maximum"]) == ("number", 0.5, 400.25)
    age = traveller["properties"]["age"]
    assert (age["type"], age["minimum"], age["maximum"]) == ("integer", 0, 130)


def test_unit_goes_into_the_description(traveller: dict[str, Any]) -> None:
    assert "value in kg" in traveller["properties"]["weight"]["description"]


def test_one_of_becomes_an_enum_of_local_names(traveller: dict[str, Any]) -> None:
    assert traveller["properties"]["topTier"]["items"] == {"enum": ["Gold", "Silver"]}
    assert traveller["properties"]["seat"]["items"] == {"enum": ["aisle", "window"]}


def test_subclass_tree_under_an_extract_target_is_a_closed_enum(full: Ontology) -> None:
    condition = _variants(derive_schema(full, ["Traveller", "Condition"]))["Condition"]
    assert condition["properties"]["class"]["enum"] == ["Condition", "Cardiac", "Arrhythmia"]


def test_rules_only_properties_are_omitted(traveller: dict[str, Any]) -> None:
    assert "tier" not in traveller["properties"]


def test_pattern_is_kept(traveller: dict[str, Any]) -> None:
    assert traveller["properties"]["code"]["pattern"] == "^[A-Z]{3}$"


def test_dates_and_booleans(traveller: dict[str, Any]) -> None:
    assert traveller["properties"]["seenAt"] == {"type": "string", "format": "date-time"}
    assert traveller["properties"]["vip"]["items"] == {"type": "boolean"}


def test_object_properties_reference_extracted_instances_by_id(
    traveller: dict[str, Any], full: Ontology
) -> None:
    item = traveller["properties"]["hasCondition"]["items"]
    assert item["type"] == "string" and "id of a Condition" in item["description"]
    # Options are not extracted here, so nothing valid could be named: left out.
    assert "hasOption" not in traveller["properties"]
    alone = _variants(derive_schema(full, ["Traveller"]))["Traveller"]
    assert "hasCondition" not in alone["properties"]


def test_an_extraction_validates_like_structured_input_and_cannot_invent_a_class(
    full: Ontology,
) -> None:
    schema = derive_schema(full, ["Traveller", "Condition"])
    good = {
        "instances": [
            {"id": "t1", "class": "Traveller", "code": "ABC", "hasCondition": ["c1"], "age": 40},
            {"id": "c1", "class": "Arrhythmia"},
        ]
    }
    jsonschema.validate(good, schema)
    for bad in (
        {"instances": [{"id": "c1", "class": "Heartburnish"}]},
        {
            "instances": [
                {
                    "id": "t1",
                    "class": "Traveller",
                    "code": "ABC",
                    "hasCondition": ["c1"],
                    "tier": "Gold",
                }
            ]
        },
        {"instances": [{"id": "t1", "class": "Traveller", "code": "abc", "hasCondition": ["c"]}]},
        {
            "instances": [
                {"id": "t1", "class": "Traveller", "code": "ABC", "hasCondition": ["c"], "age": 200}
            ]
        },
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_schemas_are_cached_and_callers_get_their_own_copy(full: Ontology) -> None:
    first = derive_schema(full, ["Traveller"])
    first["properties"]["confidence"] = {"type": "number"}
    second = derive_schema(full, [F + "Traveller"])
    assert "confidence" not in second["properties"]
    assert second == derive_schema(full, ["Traveller"])


def test_perception_schemas_are_derived_at_load(full: Ontology) -> None:
    assert (F + "Traveller", F + "Condition") in full._index.schemas


def test_unknown_or_non_class_names_are_refused(full: Ontology) -> None:
    with pytest.raises(KeyError):
        derive_schema(full, ["Nobody"])
    with pytest.raises(KeyError):
        derive_schema(full, ["age"])
