"""Domain toolkits: deterministic computations a deployment binds as typed tools.

Each subpackage carries the code and the data of one body of clinical content (the runtime in
``app/`` and the adapters know none of it). A toolkit computes; it never decides: thresholds and
conclusions stay in the deployment's Turtle.
"""
