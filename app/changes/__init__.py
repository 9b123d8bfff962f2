"""Change control: rule changes as typed proposals that pass a deterministic policy, a sandboxed
replay of real history and a human approval before they are activated (``control``)."""

from app.changes.control import APPROVE_SCOPE, ChangeControl, ChangeRefused
from app.changes.envelope import ChangeEnvelope, ChangeView

__all__ = ["APPROVE_SCOPE", "ChangeControl", "ChangeEnvelope", "ChangeRefused", "ChangeView"]
