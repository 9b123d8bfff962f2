"""The mock: backend is scriptable from tests and from a JSON file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.bridge import BridgeError, MockBridge, bridge_from_model_string


def test_answers_are_consumed_in_order_and_the_last_repeats() -> None:
    bridge = MockBridge(
        {
            "extract": [
                {"output": {"a": 1}, "confidence": 0.2},
                {"output": {"a": 2}, "confidence": 0.9},
            ]
        }
    )
    assert bridge.extract("t", {}).output == {"a": 1}
    assert bridge.extract("t", {}).output == {"a": 2}
    assert bridge.extract("t", {}).confidence == 0.9
    assert [c["op"] for c in bridge.calls] == ["extract"] * 3


def test_scripted_errors_and_missing_scripts_are_bridge_errors() -> None:
    bridge = MockBridge({"narrate": [{"error": "timeout"}]})
    with pytest.raises(BridgeError) as info:
        bridge.narrate("proof", None, None)
    assert info.value.kind == "timeout"
    with pytest.raises(BridgeError) as info:
        bridge.rank(["a"], "x")
    assert info.value.kind == "unavailable"


def test_script_file(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"rank": [{"output": ["b", "a"], "confidence": 0.7}]}))
    bridge = bridge_from_model_string(f"mock:{path}")
    assert bridge is not None
    assert bridge.rank(["a", "b"], "c").output == ["b", "a"]
