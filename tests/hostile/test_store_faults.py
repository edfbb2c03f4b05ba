"""Issue 13.9: faults of the SQLite file are coded, never "a teleclaude bug". A folder, a full disk or no
access is `STORE_UNAVAILABLE`, a file another process holds locked is `STORE_LOCKED`; a table of the wrong
shape is renamed aside and made afresh; and `next_work` says in its note when availability could not be
read instead of silently taking every agent as available."""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters import hook_db, store
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import AgentMarked, AgentReport, Dispatch

from ..sqlite_lock import exclusive_lock
from ..unit.factories import running_session


@pytest.fixture
def db() -> Path:
    return Path(os.environ["TELECLAUDE_DB"])


def code(result) -> ErrorCode | None:
    return result.code if isinstance(result, Error) else None


def test_a_folder_where_the_database_goes_is_store_unavailable(db, repo):
    db.mkdir()
    assert code(app.mark_agent_unavailable("claude", "1h", cwd=repo)) is ErrorCode.STORE_UNAVAILABLE
    assert code(app.agent_status(cwd=repo)) is ErrorCode.STORE_UNAVAILABLE
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.note, action  # the note says availability was not read


@pytest.mark.parametrize(
    "schema", ["CREATE TABLE agent_availability (x)", "CREATE TABLE agent_availability (agent)"]
)
def test_a_table_of_the_wrong_shape_is_renamed_aside_and_made_again(db, repo, schema):
    with sqlite3.connect(db) as conn:
        conn.execute(schema)
        conn.execute("INSERT INTO agent_availability VALUES ('keep me')")
    report = app.agent_status(cwd=repo)  # a read repairs it too
    assert isinstance(report, AgentReport), report
    assert isinstance(app.mark_agent_unavailable("claude", "1h", cwd=repo), AgentMarked)
    report = app.agent_status(cwd=repo)
    assert isinstance(report, AgentReport) and [u.agent for u in report.unavailable] == ["claude"]
    with sqlite3.connect(db) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        moved = next(name for name in tables if name.startswith("agent_availability_moved_"))
        assert conn.execute(f"SELECT * FROM {moved}").fetchall() == [("keep me",)]


def test_a_sessions_table_of_the_wrong_shape_is_repaired(db):
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE sessions (x)")
    assert SessionStore().sessions() == []
    assert SessionStore().latest("/p", "feat") is None


def test_a_full_disk_is_store_unavailable(db, repo):
    def no_room() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # every write that grows a file fails

    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "agents", "--cwd", str(repo), "unavailable", "claude"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=no_room,
    )
    assert done.stdout.splitlines()[0] == "ERROR: STORE_UNAVAILABLE", done.stdout + done.stderr


@pytest.fixture
def locked_db(db, monkeypatch):
    monkeypatch.setattr(store.SqliteStore, "busy_timeout_ms", 200)
    monkeypatch.setattr(store, "READ_TIMEOUT_MS", 200)
    store.AvailabilityStore().mark_available("claude")  # the file exists, in WAL mode
    with exclusive_lock(db):
        yield db


def test_a_database_locked_by_another_process_is_store_locked(locked_db, repo):
    assert code(app.mark_agent_unavailable("claude", "1h", cwd=repo)) is ErrorCode.STORE_LOCKED
    assert code(app.mark_agent_available("claude", cwd=repo)) is ErrorCode.STORE_LOCKED
    assert code(app.agent_status(cwd=repo)) is ErrorCode.STORE_LOCKED


def test_next_work_says_when_availability_could_not_be_read(locked_db, repo):
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.note, action
    assert len(action.note.splitlines()) == 1  # one read of the store: one note for who is out and usage


def test_a_hooks_fast_path_finding_the_file_held_is_store_locked_and_its_reads_not_known(db):
    SessionStore().add(running_session(id="w1", key="k1"))  # the file exists, in WAL mode
    with exclusive_lock(db):
        with pytest.raises(store.StoreLocked):  # its hook tries again
            hook_db.add_plainly(str(db), 100, ("w1", hook_db.stamp_now(), "Bash", "ls"), lambda *_: True, 10)
        with pytest.raises(store.StoreLocked):
            hook_db.end_turn(str(db), 100, "w1", lambda key: True, hook_db.stamp_now())
        assert hook_db.kept_conversation(str(db), 100, "w1", lambda key: True) is None
    assert hook_db.kept_conversation(str(db), 100, "w1", lambda key: key == "k1") == ("", "")


def test_availability_is_read_as_before_when_nothing_is_wrong(repo):
    app.mark_agent_unavailable("gemini", "1h", cwd=repo)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.agent != "gemini" and action.note is None
    assert store.AvailabilityStore().unavailable(datetime.now(UTC)).keys() == {"gemini"}
