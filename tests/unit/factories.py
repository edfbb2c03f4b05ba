"""Test data shared by the unit tests (test modules import this, never each other)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from teleclaude.runtime.core.sessions import Session, SessionState

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def running_session(at: datetime = T0, **changes: Any) -> Session:
    """A claude worker on `next-build greeting` in /p, running with its prompt delivered at `at`; `changes`
    replace any field. Modules fix their own defaults with `functools.partial`, whose keywords a call
    can still override."""
    session = Session(
        id="abcd1234",
        agent="claude",
        command="next-build",
        args="greeting",
        project="/p",
        subfolder=None,
        state=SessionState.RUNNING,
        created_at=at,
        updated_at=at,
        delivered_at=at,
    )
    return replace(session, **changes)
