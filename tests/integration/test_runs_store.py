"""Runs in the session store: recorded, ended, read back; a file from before runs gets its column added."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from teleclaude.adapters.sessions_db import RunRow, SessionStore
from teleclaude.runtime.core.sessions import Session, SessionState

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def a_session(sid: str, run_id: str = "") -> Session:
    return Session(sid, "claude", "next-build", "x", "/p", None, SessionState.DONE, T0, T0, run_id=run_id)


def test_a_run_is_recorded_ended_and_read_with_its_sessions(tmp_path):
    store = SessionStore(tmp_path / "t.db")
    store.add_run(RunRow("r1", "/p", "", T0))
    store.add_run(RunRow("r2", "/p", "x", T0 + timedelta(minutes=5)))
    store.add(a_session("s1", "r1"))
    store.add(a_session("s2", "r2"))
    store.add(a_session("s3"))
    store.end_run("r2", T0 + timedelta(minutes=9), "COMPLETE")
    latest = store.latest_run("/p")
    assert latest == RunRow("r2", "/p", "x", T0 + timedelta(minutes=5), T0 + timedelta(minutes=9), "COMPLETE")
    assert store.run("r1") == RunRow("r1", "/p", "", T0)
    assert [s.id for s in store.sessions_of_run("r2")] == ["s2"]
    assert store.latest_run("/elsewhere") is None and store.run("nope") is None


def test_a_file_from_before_runs_is_upgraded_and_keeps_its_sessions(tmp_path):
    path = tmp_path / "old.db"
    store = SessionStore(path)
    store.add(a_session("old"))
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE sessions DROP COLUMN run_id")
        conn.execute("DROP TABLE runs")
    assert store.sessions_of_run("r1") == []  # the column is added on the way
    assert store.latest_run("/p") is None
    assert [(s.id, s.run_id) for s in store.sessions()] == [("old", "")]
    with sqlite3.connect(path) as conn:
        assert "run_id" in {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
