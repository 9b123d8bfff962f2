"""Resource templates of horis:Create commits: placeholders filled, nothing made up."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.ontology.templates import render, template_args, template_problem

VALUES: dict[str, Any] = {
    "context.patientId": "p1",
    "arg.reason": "heart rate not recorded",
    "references.CareTeam": [],
    "prefetch.encounter.participant.individual": [
        {"reference": "Practitioner/a"},
        {"reference": "Practitioner/b"},
    ],
    "prefetch.encounter.serviceProvider": [{"reference": "Organization/ed"}],
    "run.url": "https://cds.example.org/runs/r1",
}


def _render(template: dict[str, Any]) -> dict[str, Any]:
    return render(json.dumps(template), VALUES.get)


def test_a_whole_placeholder_keeps_its_json_and_a_list_splices_into_a_list() -> None:
    body = _render(
        {
            "recipient": ["{{references.CareTeam ?? prefetch.encounter.participant.individual}}"],
            "serviceProvider": "{{prefetch.encounter.serviceProvider}}",
        }
    )
    assert body == {
        "recipient": [{"reference": "Practitioner/a"}, {"reference": "Practitioner/b"}],
        "serviceProvider": {"reference": "Organization/ed"},
    }


def test_embedded_placeholders_are_text() -> None:
    body = _render({"subject": {"reference": "Patient/{{context.patientId}}"}, "n": 3})
    assert body == {"subject": {"reference": "Patient/p1"}, "n": 3}


def test_a_placeholder_without_a_value_removes_what_holds_it_and_what_is_left_empty() -> None:
    body = _render(
        {
            "status": "completed",
            "encounter": {"reference": "Encounter/{{context.encounterId}}"},
            "recipient": ["{{references.CareTeam}}"],
            "payload": [
                {"contentString": "{{arg.reason}}"},
                {"contentAttachment": {"url": "{{run.id}}"}},
            ],
        }
    )
    assert body == {
        "status": "completed",
        "payload": [{"contentString": "heart rate not recorded"}],
    }


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ({"resourceType": "Communication", "status": "completed"}, None),
        ({"a": "{{arg.x}} {{label.y}} {{context.z}} {{run.id}} {{run.url}} {{now}}"}, None),
        ({"a": ["{{references.CareTeam ?? prefetch.key.a.b}}"]}, None),
        ({"resourceType": "Task"}, "is a Task"),
        ({"a": "{{run.secret}}"}, "unknown placeholder(s) ['run.secret']"),
        ({"a": "{{references.careteam}}"}, "unknown placeholder"),
    ],
)
def test_template_problems(template: dict[str, Any], problem: str | None) -> None:
    found = template_problem(json.dumps(template), "Communication")
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_the_arguments_a_template_reads() -> None:
    template = json.dumps({"a": "{{arg.reason}}", "b": ["{{label.level ?? arg.reason}}"]})
    assert template_args(template) == ["reason", "level"]
