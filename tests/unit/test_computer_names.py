"""A session on a name `[runtime] computers` lists is on this machine: shown without `@NAME` or `on NAME`."""

from __future__ import annotations

from datetime import UTC, datetime

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.orchestrator import Progress, where

T = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = RuntimeConfig(computers=("local", "workstation"))


def session(computer: str) -> Session:
    return Session("s1", "claude", "next-build", "x", "/p", "trees/x", SessionState.RUNNING, T, T, computer)


def test_a_local_alias_is_shown_as_this_machine():
    for name in ("local", "workstation"):
        assert "claude@" not in Progress(1, session(name), 3, computers=CONFIG.computers).key()
        assert " on " not in where(session(name), CONFIG) and "there," not in where(session(name), CONFIG)


def test_another_computer_is_named():
    assert "claude@box" in Progress(1, session("box"), 3, computers=CONFIG.computers).key()
    assert " on box" in where(session("box"), CONFIG)
