"""The planner: read todos/, git and availability, decide the one next step, apply its effects (`api.py`).

`core/` holds the pure half (parsers, the decision orders, rendering, lint); `api.py` and `checks.py` are the
shell that gathers facts and applies effects.
"""
