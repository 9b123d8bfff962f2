"""Change control: rule changes as typed proposals that pass a deterministic policy, a sandboxed
replay of real history and a human approval before they are activated (``control``)."""
