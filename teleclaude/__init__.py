"""teleclaude: a file-derived, stateless planner that tells teams of AI coding agents one next step."""

from teleclaude import methodcache

__version__ = "0.1.0"

methodcache.install()  # before any of teleclaude's dataclasses is defined
