"""Golden recorded runs (files in tests/data/runtime/golden) replay to the same decision,
terminal and facts on the current triage ontology — the regression check a rule change must pass.

Regenerate after an intended change: ``.venv/bin/python -m tests.runtime.test_golden_replay``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.bridge import MockBridge
from app.ontology import load_ontology
from app.ontology.model import Ontology
from app.runtime import RunContext, run_workflow
from app.runtime.replay import RecordedRun, replay_run
from app.tools import ToolInvoker
from app.world import World, load_structured
from tests.runtime.conftest import DATA, NOW, TRIAGE

GOLDEN = DATA / "golden"

SCENARIOS: dict[str, dict[str, Any]] = {
    "chest-pain-tachycardia": {
        "expect": ("Done", "Immediate"),
        "input": {
            "instances": [
                {"id": "p1", "class": "Patient", "heartRate": 130, "hasSymptom": ["s1"]},
                {"id": "s1", "class": "ChestPain"},
            ]
        },
    },
    "perceived-dyspnea": {
        "expect": ("Done", "Urgent"),
        "input": {"instances": [{"id": "p1", "class": "Patient", "age": 40}]},
        "text": "Short of breath since this morning.",
        "bridge": {
            "extract": [
                {
                    "output": {
                        "instances": [
                            {"id": "pt", "class": "Patient", "hasSymptom": ["d"]},
                            {"id": "d", "class": "Dyspnea"},
                        ]
                    },
                    "confidence": 0.93,
                }
            ],
            "narrate": [{"output": "Breathlessness makes this urgent.", "confidence": 1.0}],
        },
    },
    "no-data": {
        "expect": ("EscalateToNurse", None),
        "input": {"instances": [{"id": "p1", "class": "Patient"}]},
    },
}


def record(ontology: Ontology, scenario: dict[str, Any], run_id: str) -> RecordedRun:
    world = World(ontology)
    assert load_structured(world, scenario["input"]).ok
    before = world.to_json()
    bridge = MockBridge(scenario["bridge"]) if "bridge" in scenario else None
    ctx = RunContext(
        now=NOW, bridge=bridge, tools=ToolInvoker(), text=scenario.get("text"), run_id=run_id
    )
    outcome = run_workflow(ontology, "Triage", world, ctx)
    return RecordedRun.of(outcome, input_world=before, text=scenario.get("text"), now=NOW)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_golden_runs_replay_unchanged(name: str) -> None:
    ontology = load_ontology([TRIAGE])
    recorded = RecordedRun.from_json(json.loads((GOLDEN / f"{name}.json").read_text()))

    terminal, acuity = SCENARIOS[name]["expect"]
    assert recorded.outcome["terminal"] == terminal
    assert (recorded.outcome.get("decision") or {}).get("value") == acuity

    report = replay_run(ontology, recorded)

    assert report.error is None
    changed = [d for d in report.divergences if d["what"] in ("decision", "terminal", "facts")]
    assert changed == [], f"{name} now decides differently: {changed}"


def _regenerate(out: Path = GOLDEN) -> None:
    ontology = load_ontology([TRIAGE])
    for name, scenario in SCENARIOS.items():
        recorded = record(ontology, scenario, run_id=f"golden-{name}")
        text = json.dumps(recorded.to_json(), indent=1, sort_keys=True, default=str)
        (out / f"{name}.json").write_text(text + "\n")


if __name__ == "__main__":
    _regenerate()
