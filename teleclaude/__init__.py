"""teleclaude: a file-derived, stateless planner that tells teams of AI coding agents one next step."""

__version__ = "0.1.0"
