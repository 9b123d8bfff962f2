"""Model strings and the Bridges they name, and which Bridge serves a step: its own
``horis:model`` when the host can build it, else the host's configured Bridge.

:func:`bridge_from_model_string` builds the Bridge a model string names (``mock:``,
``claude:MODEL``); the resolver uses it for step models, the host for its configured one.

The interpreter stays pure: the host builds a ``BridgeResolver`` from its settings and passes it
as ``RunContext.bridge_for``. Rules (docs/runtime.md):

- no Bridge configured at all (``bridge_model`` unset) → no Bridge for any step: every step takes
  its fallback, whatever its ``horis:model`` says;
- a step without ``horis:model``, or naming the configured model → the configured Bridge;
- ``claude:MODEL`` → that model, when the settings hold an Anthropic API key;
- ``mock:…`` → that script, only when the configured Bridge is itself a mock (a test or demo
  host); a production host never swaps in a mock because an ontology asks for it;
- anything else (no key, unknown provider, a script that cannot be read) → the configured Bridge.

Bridges are built once per model string and reused across runs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from app.bridge.mock import MockBridge
from app.bridge.protocol import Bridge, BridgeConfigError, BridgeError

log = logging.getLogger("horismos.bridge")


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


class BridgeResolver:
    """``resolver(step_model) -> Bridge | None``; ``default`` is the configured Bridge."""

    def __init__(self, default: Bridge | None, settings: Any = None) -> None:
        self._default = default
        self._settings = settings
        self._built: dict[str, Bridge] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> BridgeResolver:
        model = getattr(settings, "bridge_model", None)
        return cls(bridge_from_model_string(model, settings), settings)

    @property
    def default(self) -> Bridge | None:
        return self._default

    def __call__(self, model: str | None) -> Bridge | None:
        default = self._default
        if default is None or not model or model == default.model:
            return default
        with self._lock:
            if model not in self._built:
                self._built[model] = self._build(model, default)
            return self._built[model]

    def _build(self, model: str, default: Bridge) -> Bridge:
        provider, _, name = model.partition(":")
        buildable = (provider == "claude" and bool(name) and self._has_anthropic_key()) or (
            provider == "mock" and default.model.startswith("mock:")
        )
        if not buildable:
            return default
        try:
            bridge = bridge_from_model_string(model, self._settings)
        except (BridgeConfigError, BridgeError, OSError, ValueError) as exc:
            log.warning("step model %s cannot be built (%s); using %s", model, exc, default.model)
            return default
        return bridge if bridge is not None else default

    def _has_anthropic_key(self) -> bool:
        key = getattr(self._settings, "anthropic_api_key", None)
        if key is not None and hasattr(key, "get_secret_value"):
            key = key.get_secret_value()
        return bool(key)
