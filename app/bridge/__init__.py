"""The LLM Bridge: protocol, the ``mock:`` and ``claude:`` backends, and model strings."""

from __future__ import annotations

from app.bridge.mock import MockBridge
from app.bridge.protocol import (
    Bridge,
    BridgeConfigError,
    BridgeError,
    BridgeResult,
    schema_hash,
    with_confidence,
)
from app.bridge.resolve import BridgeResolver, bridge_from_model_string

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
