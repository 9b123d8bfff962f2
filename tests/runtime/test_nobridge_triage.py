"""The anti-wrapper gate: the triage deployment decides from structured input with no Bridge.

One case per acuity rule of the triage deployment (docs/examples.md); each must end at Done with
the stated acuity. With no data the goal is unreachable: the run ends at EscalateToNurse with no
decision.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ontology.model import Ontology
from tests.runtime.conftest import run, steps

pytestmark = pytest.mark.nobridge


def patient(**props: Any) -> dict[str, Any]:
    symptoms = props.pop("symptoms", [])
    instances: list[dict[str, Any]] = [{"id": "p1", "class": "Patient", **props}]
    if symptoms:
        instances[0]["hasSymptom"] = [f"s{i}" for i, _ in enumerate(symptoms)]
        instances += [{"id": f"s{i}", "class": c} for i, c in enumerate(symptoms)]
    return {"instances": instances}


CASES = [
    # Immediate
    ("spo2 < 90", patient(spo2=88), "Immediate"),
    ("systolicBP < 90", patient(systolicBP=85), "Immediate"),
    ("heartRate > 150", patient(heartRate=155), "Immediate"),
    ("heartRate < 40", patient(heartRate=35), "Immediate"),
    ("respRate > 30", patient(respRate=32), "Immediate"),
    ("respRate < 8", patient(respRate=6), "Immediate"),
    ("unresponsive", patient(symptoms=["Unresponsive"]), "Immediate"),
    ("chest pain and heartRate > 120", patient(heartRate=130, symptoms=["ChestPain"]), "Immediate"),
    # Urgent
    ("chest pain", patient(symptoms=["ChestPain"]), "Urgent"),
    ("dyspnea", patient(symptoms=["Dyspnea"]), "Urgent"),
    ("syncope", patient(symptoms=["Syncope"]), "Urgent"),
    ("heartRate > 100", patient(heartRate=110), "Urgent"),
    ("respRate > 24", patient(respRate=26), "Urgent"),
    ("spo2 < 94", patient(spo2=92), "Urgent"),
    ("temperature >= 39.0", patient(temperature=39.0), "Urgent"),
    ("age >= 65 and temperature >= 38.0", patient(age=70, temperature=38.2), "Urgent"),
    # Standard
    ("pain", patient(symptoms=["Headache"]), "Standard"),
    ("fever", patient(symptoms=["Fever"]), "Standard"),
    ("temperature >= 38.0", patient(age=30, temperature=38.0), "Standard"),
    # NonUrgent
    ("heartRate assigned", patient(heartRate=80), "NonUrgent"),
    ("a symptom assigned", patient(symptoms=["Symptom"]), "NonUrgent"),
]


@pytest.mark.parametrize(("rule", "data", "acuity"), CASES, ids=[c[0] for c in CASES])
def test_each_acuity_rule_decides_without_a_bridge(
    triage: Ontology, rule: str, data: dict[str, Any], acuity: str
) -> None:
    outcome, _ = run(triage, "Triage", data)

    assert outcome.status == "completed"
    assert outcome.terminal == "Done"
    assert outcome.to_json().get("decision") == {"property": "acuity", "value": acuity}
    assert outcome.goal_reached
    assert outcome.proof is not None


def test_no_data_escalates_to_a_nurse_with_no_decision(triage: Ontology) -> None:
    outcome, _ = run(triage, "Triage", {"instances": [{"id": "p1", "class": "Patient"}]})

    assert outcome.terminal == "EscalateToNurse"
    assert outcome.decision is None
    assert "decision" not in outcome.to_json()
    assert not outcome.goal_reached
    assert steps(outcome) == [
        ("Intake", "next"),
        ("Assess", "onUnreachable"),
        ("EscalateToNurse", "next"),
    ]
    # No FHIR adapter in this configuration: the message to the nurse is proposed, not sent.
    escalate = outcome.trace[-1]
    assert (escalate.effect, escalate.args) == ("proposed", {"acuity": None})


def test_the_trace_says_why_each_step_went_where_it_did(triage: Ontology) -> None:
    outcome, _ = run(triage, "Triage", patient(heartRate=130, symptoms=["ChestPain"]))
    intake, assess, route, explain, done = outcome.trace

    assert intake.skipped == "no input text"
    assert assess.goal.holds is True
    assert route.requires.holds is True
    # No FHIR adapter in this configuration: the queue write is proposed, not executed.
    assert route.effect == "proposed"
    assert route.args == {"patient": "p1", "queue": "Immediate"}
    assert explain.narration.generated is False
    assert "Immediate" in explain.narration.text
    assert done.step == "Done" and outcome.terminal == "Done"


def test_text_without_a_bridge_takes_the_fallback(triage: Ontology) -> None:
    outcome, _ = run(triage, "Triage", patient(heartRate=130), text="crushing chest pain")

    assert outcome.trace[0].reason == "no Bridge configured"
    assert steps(outcome)[0] == ("Intake", "fallback")
    assert outcome.terminal == "EscalateToNurse"
