"""SMART v1/v2 scope grammar: which granted scopes let the adapter update an Encounter."""

from __future__ import annotations

import pytest

from adapters.fhir.scopes import parse_scope, permits, required_for

DECLARED = "user/Encounter.write"


@pytest.mark.parametrize(
    "granted",
    [
        "user/Encounter.write",
        "user/Encounter.*",
        "user/*.write",
        "user/*.*",
        "user/Encounter.u",
        "user/Encounter.cruds",
        "user/Encounter.rus",
        "user/*.cud",
        "openid fhirUser launch user/Patient.read user/Encounter.u",
    ],
)
def test_grants_that_permit_an_encounter_update(granted: str) -> None:
    assert permits(granted, DECLARED, "update")


@pytest.mark.parametrize(
    "granted",
    [
        None,
        "",
        "user/Encounter.read",
        "user/Encounter.rs",
        "user/Encounter.c",
        "user/Encounter.cd",
        "user/Patient.write",
        "user/Patient.*",
        "patient/Encounter.write",
        "system/Encounter.u",
        "patient/*.*",
        "user/Encounter.u?status=in-progress",
        "user/Encounter.ur",
        "user/Encounter.uu",
        "user/Encounter.write?status=planned",
        "user/encounter.write",
        "user/Encounter.writ",
        "user/Encounter.",
        "user/Encounter",
        "Encounter.write",
        "launch/encounter openid",
    ],
)
def test_grants_that_do_not_permit_an_encounter_update(granted: str | None) -> None:
    assert not permits(granted, DECLARED, "update")


def test_levels_must_match_the_declared_level() -> None:
    assert permits("patient/Encounter.u", "patient/Encounter.u", "update")
    assert permits("system/Encounter.write", "system/Encounter.cruds", "update")
    assert not permits("user/Encounter.u", "patient/Encounter.u", "update")


@pytest.mark.parametrize(
    ("text", "permissions", "version"),
    [
        ("user/Encounter.read", "rs", 1),
        ("user/Encounter.write", "cud", 1),
        ("system/*.*", "cruds", 1),
        ("patient/Observation.rs", "rs", 2),
        ("user/Encounter.cruds", "cruds", 2),
    ],
)
def test_v1_verbs_expand_to_v2_permissions(text: str, permissions: str, version: int) -> None:
    scope = parse_scope(text)
    assert scope is not None
    assert scope.permissions == frozenset(permissions)
    assert scope.version == version


def test_v2_query_is_kept_and_v1_query_is_malformed() -> None:
    scope = parse_scope("patient/Observation.rs?category=vital-signs")
    assert scope is not None and scope.query == "category=vital-signs"
    assert parse_scope("patient/Observation.read?category=vital-signs") is None


@pytest.mark.parametrize(
    "declared", ["user/Encounter.read", "user/*.write", "openid", "user/Encounter.u?x=1"]
)
def test_a_declared_scope_that_can_never_commit_is_an_error(declared: str) -> None:
    with pytest.raises(ValueError):
        required_for(declared, "update")
