"""PerceptionStep with the mock Bridge (and once with the claude: backend on a fake API)."""

from __future__ import annotations

from typing import Any

from app.bridge import MockBridge, with_confidence
from app.bridge.claude import EXTRACT_TOOL, ClaudeBridge
from app.ontology import derive_schema
from app.ontology.model import Ontology
from tests.runtime.conftest import run, steps
from tests.support.fake_messages_api import fake_messages_api

PATIENT = {"instances": [{"id": "p1", "class": "Patient"}]}
TEXT = "58 y/o, crushing chest pain, pulse 130"


def extraction(heart_rate: Any = 130, **extra: Any) -> dict[str, Any]:
    return {
        "instances": [
            {"id": "pt", "class": "Patient", "heartRate": heart_rate, "hasSymptom": ["c"], **extra},
            {"id": "c", "class": "ChestPain"},
        ]
    }


def answer(output: dict[str, Any], confidence: float = 0.92) -> dict[str, Any]:
    return {"output": output, "confidence": confidence}


def test_above_confidence_the_facts_land_with_perception_provenance(triage: Ontology) -> None:
    bridge = MockBridge({"extract": [answer(extraction())]})
    outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert outcome.terminal == "Done"
    assert outcome.to_json().get("decision") == {"property": "acuity", "value": "Immediate"}
    hr = world.fact("p1", triage.namespace + "heartRate", 130)
    assert hr is not None and hr.provenance == "perception" and hr.confidence == 0.92
    (call,) = outcome.trace[0].calls
    assert call.schemaHash.startswith("sha256:") and call.confidence == 0.92
    assert bridge.calls[0]["text"] == TEXT


def test_below_confidence_falls_back_and_asserts_nothing(triage: Ontology) -> None:
    bridge = MockBridge({"extract": [answer(extraction(), confidence=0.5)]})
    outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert steps(outcome)[0] == ("Intake", "fallback")
    assert "below" in outcome.trace[0].reason
    assert outcome.terminal == "EscalateToNurse"
    assert world.values("p1", triage.namespace + "heartRate") == ()


def test_structured_feedback_fixes_an_invalid_extraction_within_the_budget(
    triage: Ontology,
) -> None:
    bridge = MockBridge({"extract": [answer(extraction(900)), answer(extraction(130))]})
    outcome, _ = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert outcome.terminal == "Done"
    assert outcome.trace[0].attempts == 2
    assert bridge.calls[0]["feedback"] == []
    (fed,) = bridge.calls[1]["feedback"]
    assert fed["code"] == "max" and fed["value"] == 900


def test_still_invalid_after_the_retries_falls_back(triage: Ontology) -> None:
    bridge = MockBridge({"extract": [answer(extraction(900))]})
    outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert len(bridge.calls) == 3  # one call and horis:retries' default of 2
    assert steps(outcome)[0] == ("Intake", "fallback")
    assert outcome.terminal == "EscalateToNurse"
    assert world.values("p1", triage.namespace + "hasSymptom") == ()


def test_a_rules_only_property_is_rejected_at_the_gate(triage: Ontology) -> None:
    assert "acuity" not in str(derive_schema(triage, ["Patient", "Symptom"]))
    bridge = MockBridge({"extract": [answer(extraction(acuity="NonUrgent"))]})
    outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    codes = {v["code"] for v in outcome.trace[0].violations or []}
    assert "rules-only" in codes
    assert outcome.terminal == "EscalateToNurse"
    assert world.value("p1", triage.namespace + "acuity") is None


def test_an_invented_class_is_rejected_at_the_gate(triage: Ontology) -> None:
    invented = {
        "instances": [
            {"id": "pt", "class": "Patient", "hasSymptom": ["h"]},
            {"id": "h", "class": "Heartburn"},
        ]
    }
    bridge = MockBridge({"extract": [answer(invented)]})
    outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert "unknown-class" in {v["code"] for v in outcome.trace[0].violations or []}
    assert outcome.terminal == "EscalateToNurse"
    assert len(world.instances()) == 1


def test_a_bridge_failure_takes_the_fallback(triage: Ontology) -> None:
    bridge = MockBridge({"extract": [{"error": "timeout"}]})
    outcome, _ = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert steps(outcome)[0] == ("Intake", "fallback")
    assert "timeout" in outcome.trace[0].reason


def test_the_claude_backend_extracts_typed_instances(triage: Ontology) -> None:
    with fake_messages_api() as api:
        api.replies.append({"tool_input": {**extraction(), "confidence": 0.9}})
        api.replies.append({"tool_input": {"text": "Fast pulse with chest pain.", "confidence": 1}})
        bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)
        outcome, world = run(triage, "Triage", PATIENT, bridge=bridge, text=TEXT)

    assert len(api.requests) == 2  # one extraction, one narration
    body = api.requests[0]["body"]
    assert body["tool_choice"] == {"type": "tool", "name": EXTRACT_TOOL}
    assert body["tools"][0]["input_schema"] == with_confidence(
        derive_schema(triage, ["Patient", "Symptom"])
    )
    assert outcome.to_json().get("decision") == {"property": "acuity", "value": "Immediate"}
    (symptom,) = world.values("p1", triage.namespace + "hasSymptom")
    instance = world.instance(str(symptom))
    assert instance is not None and instance.class_iri == triage.namespace + "ChestPain"
    explain = next(e for e in outcome.trace if e.step == "Explain")
    assert explain.narration is not None
    assert explain.narration.to_json() == {
        "text": "Fast pulse with chest pain.",
        "generated": True,
        "confidence": 1.0,
    }


def test_text_alone_introduces_the_focus(triage: Ontology) -> None:
    bridge = MockBridge({"extract": [answer(extraction())]})
    outcome, world = run(triage, "Triage", {"instances": []}, bridge=bridge, text=TEXT)

    (patient,) = world.instances(triage.namespace + "Patient")
    assert world.value(patient.id, triage.namespace + "heartRate") == 130
    assert outcome.to_json().get("decision") == {"property": "acuity", "value": "Immediate"}
