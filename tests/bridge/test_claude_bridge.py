"""The claude: backend against a fake Messages API on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.bridge import BridgeError, bridge_from_model_string, schema_hash
from app.bridge.claude import EXTRACT_TOOL, ClaudeBridge
from tests.support.fake_messages_api import FakeMessagesApi, fake_messages_api

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "Patient": {
            "type": "object",
            "properties": {"heartRate": {"type": "number", "minimum": 0, "maximum": 300}},
        }
    },
}


@pytest.fixture
def api() -> Iterator[FakeMessagesApi]:
    with fake_messages_api() as server:
        yield server


def test_extract_forces_the_tool_call_with_the_derived_schema(api: FakeMessagesApi) -> None:
    api.replies.append({"tool_input": {"Patient": {"heartRate": 130}, "confidence": 0.91}})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)

    result = bridge.extract("HR 130, chest pain", SCHEMA)

    assert result.output == {"Patient": {"heartRate": 130}}
    assert result.confidence == pytest.approx(0.91)
    assert len(api.requests) == 1
    body = api.requests[0]["body"]
    assert api.requests[0]["path"] == "/v1/messages"
    assert body["model"] == "claude-test"
    assert body["tool_choice"] == {"type": "tool", "name": EXTRACT_TOOL}
    (tool,) = body["tools"]
    assert tool["name"] == EXTRACT_TOOL
    sent = tool["input_schema"]
    assert sent["properties"]["Patient"] == SCHEMA["properties"]["Patient"]
    assert sent["properties"]["confidence"]["type"] == "number"
    assert "confidence" in sent["required"]
    assert body["messages"][0]["content"] == "HR 130, chest pain"


def test_feedback_is_sent_as_structured_violations(api: FakeMessagesApi) -> None:
    api.replies.append({"tool_input": {"confidence": 0.5}})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)
    violation = {"code": "max", "property": "heartRate", "value": 900}

    bridge.extract("HR 900", SCHEMA, feedback=[violation])

    content = api.requests[0]["body"]["messages"][0]["content"]
    assert '"code": "max"' in content and "HR 900" in content


def test_provider_error_is_a_typed_bridge_error(api: FakeMessagesApi) -> None:
    api.replies.append({"status": 529})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)

    with pytest.raises(BridgeError) as info:
        bridge.extract("text", SCHEMA)
    assert info.value.kind == "provider"
    assert len(api.requests) == 1  # the SDK's own retries are off


def test_timeout_is_a_typed_bridge_error(api: FakeMessagesApi) -> None:
    api.replies.append({"hang": True})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url, timeout=0.3)

    with pytest.raises(BridgeError) as info:
        bridge.extract("text", SCHEMA)
    assert info.value.kind == "timeout"
    api.release.set()


def test_answer_without_the_forced_tool_is_invalid(api: FakeMessagesApi) -> None:
    api.replies.append({"text": "I think the heart rate is 130."})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)

    with pytest.raises(BridgeError) as info:
        bridge.extract("text", SCHEMA)
    assert info.value.kind == "invalid"


def test_confidence_out_of_range_is_invalid(api: FakeMessagesApi) -> None:
    api.replies.append({"tool_input": {"confidence": 7}})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)

    with pytest.raises(BridgeError) as info:
        bridge.extract("text", SCHEMA)
    assert info.value.kind == "invalid"


def test_rank_and_narrate_force_their_tools(api: FakeMessagesApi) -> None:
    api.replies.append({"tool_input": {"ranking": ["B", "A"], "confidence": 0.8}})
    api.replies.append({"tool_input": {"text": "Because HR > 120.", "confidence": 1}})
    bridge = ClaudeBridge("claude-test", api_key="k", base_url=api.base_url)

    ranked = bridge.rank(["A", "B"], "cheapest", text="the cheap one please")
    told = bridge.narrate("acuity = Immediate\n  because …", "nurse", None)

    assert ranked.output == ["B", "A"]
    assert told.output == "Because HR > 120."
    enum = api.requests[0]["body"]["tools"][0]["input_schema"]["properties"]["ranking"]
    assert enum["items"]["enum"] == ["A", "B"]
    assert api.requests[1]["body"]["tool_choice"]["type"] == "tool"


def test_model_strings() -> None:
    assert bridge_from_model_string(None) is None
    assert bridge_from_model_string("") is None
    mock = bridge_from_model_string("mock:")
    assert mock is not None and mock.model == "mock:"
    claude = bridge_from_model_string("claude:claude-x")
    assert claude is not None and claude.model == "claude:claude-x"
    with pytest.raises(ValueError):
        bridge_from_model_string("gpt:whatever")


def test_schema_hash_is_stable_under_key_order() -> None:
    assert schema_hash({"a": 1, "b": [1, 2]}) == schema_hash({"b": [1, 2], "a": 1})
    assert schema_hash({"a": 1}) != schema_hash({"a": 2})
