"""The LLM Bridge: protocol, the ``mock:`` and ``claude:`` backends, and model strings."""

from __future__ import annotations

from typing import Any

from app.bridge.mock import MockBridge
from app.bridge.protocol import (
    Bridge,
    BridgeConfigError,
    BridgeError,
    BridgeResult,
    schema_hash,
    with_confidence,
)
from app.bridge.resolve import BridgeResolver

__all__ = [
    "Bridge",
    "BridgeConfigError",
    "BridgeError",
    "BridgeResolver",
    "BridgeResult",
    "MockBridge",
    "bridge_from_model_string",
    "schema_hash",
    "with_confidence",
]


def bridge_from_model_string(model: str | None, settings: Any = None) -> Bridge | None:
    """``None``/empty → no Bridge (a first-class configuration); ``mock:`` → an empty script;
    ``mock:/path.json`` → that script; ``claude:MODEL`` → the Anthropic backend, with
    ``anthropic_api_key``/``anthropic_base_url``/``bridge_timeout_seconds`` read from settings."""
    if not model:
        return None
    provider, _, name = model.partition(":")
    if provider == "mock":
        return MockBridge.from_file(name) if name else MockBridge()
    if provider == "claude":
        if not name:
            raise BridgeConfigError("claude: needs a model name, e.g. claude:claude-sonnet-4-5")
        from app.bridge.claude import ClaudeBridge

        key = getattr(settings, "anthropic_api_key", None)
        if key is not None and hasattr(key, "get_secret_value"):
            key = key.get_secret_value()
        return ClaudeBridge(
            name,
            api_key=key,
            base_url=getattr(settings, "anthropic_base_url", None),
            timeout=float(getattr(settings, "bridge_timeout_seconds", 30.0) or 30.0),
        )
    raise BridgeConfigError(f"unknown Bridge provider {provider!r} in {model!r} (mock:, claude:)")
