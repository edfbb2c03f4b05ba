import logging
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import ExitStack, closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from teleclaude.adapters.sessions_db import FAILED_STATES, FINAL_STATES, RunRow, SessionStore
from teleclaude.adapters.store import AgentRow, AvailabilityStore, default_db_path
from teleclaude.planner.core.model import Unavailability, UsageWindow

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 21, 17, 0, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "state" / "teleclaude.db"


def raw_rows(path: Path) -> list[tuple]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT * FROM agent_availability ORDER BY agent").fetchall()


def run_python(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pipe = subprocess.PIPE
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=pipe, stderr=pipe, text=True)


def printed(code: str, *args: str) -> list[str]:
    """The words `code` prints, run in a new Python process."""
    out, err = run_python(code, *args).communicate(timeout=60)
    assert not err, err
    return out.split()


def test_a_marked_agent_is_unavailable_until_marked_available(db):
    store = AvailabilityStore(db)
    marked = store.mark_unavailable("claude", LATER, "rate limit")
    assert marked == Unavailability("claude", LATER, "rate limit")
    assert store.unavailable(NOW) == {"claude": marked}
    store.mark_available("claude")
    assert store.unavailable(NOW) == {}
    assert store.all_rows(NOW) == [AgentRow("claude", True, None, "")]


def test_marking_again_replaces_the_time_and_reason(db):
    store = AvailabilityStore(db)
    store.mark_unavailable("codex", LATER, "quota")
    store.mark_unavailable("codex", LATER + timedelta(hours=2), "still quota")
    assert store.unavailable(NOW) == {
        "codex": Unavailability("codex", LATER + timedelta(hours=2), "still quota")
    }


def test_times_are_stored_as_utc_text_with_z(db):
    amsterdam_evening = datetime(2026, 11, 21, 18, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    marked = AvailabilityStore(db).mark_unavailable("gemini", amsterdam_evening, "down")
    assert raw_rows(db) == [("gemini", 0, "2026-11-21T17:00:00Z", "down")]
    assert marked.until == LATER and marked.until.tzinfo == UTC


def test_the_table_has_the_documented_schema(db):
    AvailabilityStore(db).mark_available("claude")
    with closing(sqlite3.connect(db)) as conn, conn:
        columns = [
            (name, kind, pk)
            for _, name, kind, _, _, pk in conn.execute("PRAGMA table_info(agent_availability)")
        ]
    assert columns == [
        ("agent", "TEXT", 1),
        ("available", "INTEGER", 0),
        ("unavailable_until", "TEXT", 0),
        ("reason", "TEXT", 0),
    ]


def test_an_expired_row_is_reset_in_the_file_when_read(db):
    store = AvailabilityStore(db)
    store.mark_unavailable("claude", LATER, "rate limit")
    store.mark_unavailable("codex", LATER + timedelta(days=1), "quota")

    assert set(store.unavailable(LATER - timedelta(seconds=1))) == {"claude", "codex"}
    assert raw_rows(db)[0] == ("claude", 0, "2026-11-21T17:00:00Z", "rate limit")  # a read before: no change

    assert set(store.unavailable(LATER)) == {"codex"}
    assert raw_rows(db) == [("claude", 1, None, None), ("codex", 0, "2026-11-22T17:00:00Z", "quota")]


def test_a_row_with_a_mangled_time_does_not_keep_an_agent_out(db):
    store = AvailabilityStore(db)
    store.mark_unavailable("claude", LATER, "rate limit")
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE agent_availability SET unavailable_until = 'tomorrow'")
    assert store.unavailable(NOW) == {}
    assert raw_rows(db) == [("claude", 1, None, None)]


def test_a_read_never_creates_the_database(db):
    store = AvailabilityStore(db)
    assert store.unavailable(NOW) == {}
    assert store.all_rows(NOW) == []
    assert not db.parent.exists()


def test_a_write_creates_the_directory_and_uses_wal(db):
    AvailabilityStore(db).mark_unavailable("claude", LATER, "x")
    with closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_reading_does_not_import_sqlite_utils(db):
    AvailabilityStore(db).mark_unavailable("claude", LATER, "x")
    code = (
        "import sys; from datetime import datetime, UTC; "
        "from teleclaude.adapters.store import AvailabilityStore; "
        "print(list(AvailabilityStore(sys.argv[1]).unavailable(datetime(2026, 1, 1, tzinfo=UTC)))); "
        "print('sqlite_utils' in sys.modules)"
    )
    assert printed(code, str(db)) == ["['claude']", "False"]


def test_a_write_to_tables_of_the_right_shape_does_not_import_sqlite_utils(db):
    """Every agent hook is a new process that writes once: the tables are checked in plain SQL, and only
    a missing or misshapen one loads sqlite-utils to make or mend it."""
    AvailabilityStore(db).mark_unavailable("claude", LATER, "x")
    SessionStore(db).add_run(RunRow("run1", "/project", "", datetime(2026, 1, 1, tzinfo=UTC)))
    code = (
        "import sys; from datetime import datetime, UTC; "
        "from teleclaude.adapters.store import AvailabilityStore; "
        "from teleclaude.adapters.sessions_db import SessionStore; "
        "AvailabilityStore(sys.argv[1]).mark_unavailable('codex', datetime(2030, 1, 1, tzinfo=UTC), 'busy'); "
        "SessionStore(sys.argv[1]).end_run('run1', datetime(2026, 1, 2, tzinfo=UTC), 'complete'); "
        "print('sqlite_utils' in sys.modules)"
    )
    assert printed(code, str(db)) == ["False"]
    assert set(AvailabilityStore(db).unavailable(datetime(2026, 1, 1, tzinfo=UTC))) == {"claude", "codex"}
    run = SessionStore(db).run("run1")
    assert run is not None and run.outcome == "complete"


@pytest.mark.parametrize("garbage", [b"not a database", os.urandom(3 * 4096)])
def test_a_corrupt_file_is_moved_aside_with_a_warning(db, caplog, garbage):
    db.parent.mkdir()
    db.write_bytes(garbage)
    store = AvailabilityStore(db)
    with caplog.at_level(logging.WARNING, logger="teleclaude"):
        assert store.unavailable(NOW) == {}

    [moved] = db.parent.glob("teleclaude.db.corrupt-*")
    assert re.fullmatch(r"teleclaude\.db\.corrupt-\d{8}T\d{6}Z", moved.name)
    assert moved.read_bytes() == garbage
    [warning] = [r for r in caplog.records if r.name == "teleclaude"]
    assert warning.levelno == logging.WARNING
    assert str(db) in warning.getMessage() and str(moved) in warning.getMessage()

    store.mark_unavailable("claude", LATER, "x")
    assert set(store.unavailable(NOW)) == {"claude"}


def test_a_write_to_a_corrupt_file_still_lands(db, caplog):
    db.parent.mkdir()
    db.write_bytes(b"\x00garbage" * 100)
    with caplog.at_level(logging.WARNING, logger="teleclaude"):
        AvailabilityStore(db).mark_unavailable("gemini", LATER, "down")
    assert raw_rows(db) == [("gemini", 0, "2026-11-21T17:00:00Z", "down")]
    assert len(list(db.parent.glob("teleclaude.db.corrupt-*"))) == 1


def test_a_malformed_database_is_moved_aside(db, caplog):
    store = AvailabilityStore(db)
    for number in range(100):
        store.mark_unavailable(f"agent{number}", LATER, "x" * 200)
    data = bytearray(db.read_bytes())
    data[2 * 4096 : 2 * 4096 + 200] = b"\xff" * 200  # a page of the table, past the valid header
    db.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="teleclaude"):
        assert store.unavailable(NOW) == {}
    assert "malformed" in caplog.text
    assert len(list(db.parent.glob("teleclaude.db.corrupt-*"))) == 1


def test_six_processes_marking_at_once_all_land(db, tmp_path):
    go = tmp_path / "go"
    code = (
        "import sys, time, pathlib; from datetime import datetime, UTC\n"
        "from teleclaude.adapters.store import AvailabilityStore\n"
        "store = AvailabilityStore(sys.argv[1])\n"
        "while not pathlib.Path(sys.argv[3]).exists(): time.sleep(0.001)\n"
        "store.mark_unavailable(sys.argv[2], datetime(2030, 1, 1, tzinfo=UTC), 'busy')\n"
        "store.unavailable(datetime(2026, 1, 1, tzinfo=UTC))\n"
    )
    agents = [f"agent{number}" for number in range(6)]
    processes = [run_python(code, str(db), agent, str(go)) for agent in agents]
    go.touch()
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    assert set(AvailabilityStore(db).unavailable(NOW)) == set(agents)


def test_threads_of_several_processes_writing_at_once_all_land(db):
    """`teleclaude run` starts its lanes in threads, each with its own connections, beside other runs."""
    code = (
        "import sys, threading; from datetime import datetime, UTC\n"
        "from teleclaude.adapters.store import AvailabilityStore\n"
        "from teleclaude.planner.core.model import UsageWindow\n"
        "def work(agent):\n"
        "    store, now = AvailabilityStore(sys.argv[1]), datetime(2026, 1, 1, tzinfo=UTC)\n"
        "    for used in range(100):\n"
        "        store.record_usage([UsageWindow(agent, '5h', used, None, now)])\n"
        "        store.usage(now)\n"
        "        store.mark_unavailable(agent, datetime(2030, 1, 1, tzinfo=UTC), 'busy')\n"
        "        store.unavailable(now)\n"
        "failed = []\n"
        "threading.excepthook = lambda hook: (failed.append(hook), sys.__excepthook__(*hook[:3]))\n"
        "threads = [threading.Thread(target=work, args=(f'{sys.argv[2]}-{n}',)) for n in range(3)]\n"
        "[thread.start() for thread in threads]\n"
        "[thread.join() for thread in threads]\n"
        "sys.exit(1 if failed else 0)  # a thread that raised: its traceback is on stderr\n"
    )
    processes = [run_python(code, str(db), name) for name in ("one", "two", "three")]
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    assert len(AvailabilityStore(db).unavailable(NOW)) == 9
    assert all(window.used_percent == 99 for (window,) in AvailabilityStore(db).usage(NOW).values())


def test_usage_is_kept_per_agent_and_window_and_forgotten_once_its_window_resets(db):
    store = AvailabilityStore(db)
    five_hours = UsageWindow("claude", "5h", 83.0, LATER, NOW)
    week = UsageWindow("claude", "7d", 41.0, LATER + timedelta(days=3), NOW)
    codex = UsageWindow("codex", "primary", 12.5, None, NOW + timedelta(hours=1))  # its reset not said
    store.record_usage([five_hours, week, codex], NOW + timedelta(hours=1))
    assert store.usage(NOW) == {"claude": (five_hours, week), "codex": (codex,)}
    assert store.usage(LATER) == {"claude": (week,), "codex": (codex,)}
    assert store.usage(LATER + timedelta(hours=1)) == {"claude": (week,)}  # 5 h after it was seen


def test_a_newer_usage_report_replaces_the_old_and_a_late_older_one_does_not(db):
    store = AvailabilityStore(db)
    newer = UsageWindow("claude", "5h", 95.0, LATER, NOW + timedelta(minutes=2))
    store.record_usage([UsageWindow("claude", "5h", 50.0, LATER, NOW)], NOW)
    store.record_usage([newer], NOW + timedelta(minutes=2))
    store.record_usage([UsageWindow("claude", "5h", 60.0, LATER, NOW + timedelta(minutes=1))], newer.seen_at)
    assert store.usage(NOW) == {"claude": (newer,)}


def test_recording_usage_leaves_availability_alone(db):
    store = AvailabilityStore(db)
    store.mark_unavailable("claude", LATER, "rate limit")
    store.record_usage([UsageWindow("claude", "5h", 100.0, LATER, NOW)], NOW)
    assert store.unavailable(NOW) == {"claude": Unavailability("claude", LATER, "rate limit")}
    assert AvailabilityStore(db.with_name("other.db")).usage(NOW) == {}


def test_default_db_path():
    assert default_db_path({"TELECLAUDE_DB": "/data/t.db", "HOME": "/home/u"}) == Path("/data/t.db")
    assert default_db_path({"HOME": "/home/u"}) == Path("/home/u/.teleclaude/teleclaude.db")


def test_the_session_states_the_store_spells_out_are_the_models():
    """The sessions store names states as text, so the planner's read imports no session model."""
    from teleclaude.runtime.core.sessions import SessionState

    assert (SessionState.ERRORED.value, SessionState.NEEDS_ATTENTION.value) == FAILED_STATES
    assert tuple(state.value for state in SessionState if state.is_final) == FINAL_STATES


def test_the_latest_tool_uses_of_several_sessions_come_from_one_read(tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.planner.core.tool_lines import ToolUse

    store = SessionStore(tmp_path / "sessions.db")
    start = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    for n in range(4):
        for session_id in ("a", "b"):
            at = start + timedelta(seconds=n)
            store.add_tool_use(ToolUse(session_id, "Read", f"{session_id}{n}.py", at))
    found = store.recent_tool_uses(["b", "a", "nobody", "a"], limit=2)
    assert list(found) == ["b", "a"]  # in the order asked, sessions without any left out
    assert [u.target for u in found["a"]] == ["a2.py", "a3.py"]  # the latest, oldest first
    assert [u.target for u in found["b"]] == ["b2.py", "b3.py"]
    assert store.recent_tool_uses([]) == {}


def test_a_worker_started_ahead_does_not_hide_the_items_last_worker_or_its_failure(tmp_path):
    """While the reviewer started ahead waits for its command (or once it was ended without it), the item's
    newest worker is the builder that failed: its error still reaches the next builder."""
    from dataclasses import replace

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState

    store = SessionStore(tmp_path / "sessions.db")
    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    tree = "trees/greeting"
    build = Session("b", "gemini", "next-build", "greeting", "/p", tree, SessionState.ERRORED, at, at)
    store.add(replace(build, delivered_at=at, last_error="fatal: it crashed"))
    later = at + timedelta(seconds=1)
    ahead = Session("r", "codex", "next-review", "greeting", "/p", tree, SessionState.PENDING, later, later)
    store.add(ahead)
    for state in (SessionState.PENDING, SessionState.CANCELLED):
        store.save(replace(ahead, state=state))
        assert store.latest_failure("/p", "greeting") == ("next-build", "gemini", "fatal: it crashed")
        latest = store.latest("/p", "greeting")
        assert latest is not None and latest.id == "b"
    store.save(replace(ahead, state=SessionState.RUNNING, delivered_at=later))
    assert store.latest_failure("/p", "greeting") is None
    latest = store.latest("/p", "greeting")
    assert latest is not None and latest.id == "r"


def test_the_rows_a_session_has_seen_are_kept_and_read_back(tmp_path):
    """The alternate screen's rows the observer read (`seen_rows`) survive a save, as a tuple again."""
    from dataclasses import replace

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState, seen_of

    store = SessionStore(tmp_path / "sessions.db")
    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    session = Session("s1", "codex", "next-build", "greeting", "/p", None, SessionState.RUNNING, at, at)
    store.add(session)
    stored = store.get("s1")
    assert stored is not None and stored.seen_rows == ()
    seen = seen_of(["› $next-build greeting", "■ You’ve hit your usage limit."])
    saved = store.save(replace(session, seen_rows=seen), expect=session.state)
    stored = store.get("s1")
    assert saved is not None and stored is not None and stored.seen_rows == seen


@pytest.mark.parametrize(
    "damage",
    [
        "DROP TABLE sessions",
        "ALTER TABLE sessions DROP COLUMN run_id",  # as a file an older teleclaude made has it
        "DROP TABLE agent_availability",
        "DROP TABLE session_events",
        "delete the file",
    ],
)
@pytest.mark.parametrize("kept_open", [False, True])  # a run's store: one read connection per thread
def test_a_table_a_column_or_the_file_lost_under_a_running_process_is_made_again_at_its_next_write(
    tmp_path, damage, kept_open
):
    """A process makes sure of the schema at its first write only: what another program takes away under it
    afterwards is made again when a write finds it missing, and nothing the process writes is lost."""
    from dataclasses import replace

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Event, EventKind, Session, SessionState

    path = tmp_path / "teleclaude.db"
    sessions, availability = SessionStore(path), AvailabilityStore(path)
    at = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    first = Session("s1", "claude", "next-build", "greeting", "/p", None, SessionState.RUNNING, at, at)
    sessions.add(first)
    if kept_open:
        stack = ExitStack()
        stack.enter_context(sessions.kept_open())
        assert sessions.get("s1") == first  # the thread's read connection, kept
    availability.mark_unavailable("codex", LATER, "first")
    if damage == "delete the file":
        path.unlink()
    else:
        with closing(sqlite3.connect(path)) as conn:
            conn.execute(damage)
    second = replace(first, id="s2", run_id="r1")
    sessions.add(second)
    sessions.save(second, events=[Event("s2", EventKind.TURN_ENDED, at, "stop hook")])
    availability.mark_unavailable("gemini", LATER, "second")
    stored = sessions.get("s2")
    assert stored is not None and stored.run_id == "r1"
    assert [event.kind for event in sessions.events(["s2"])] == [EventKind.TURN_ENDED]
    assert "gemini" in availability.unavailable(NOW)
    if kept_open:
        SessionStore(path).save(replace(stored, state=SessionState.TURN_ENDED))  # another writer
        again = sessions.get("s2")
        assert again is not None and again.state is SessionState.TURN_ENDED
        stack.close()


def test_a_store_held_open_lets_its_read_connections_go_once_it_is_let_go(tmp_path):
    """A run holds its store open and each of its threads keeps a read connection; once the run lets go, no
    connection of the process is left on the file (a long-lived process, the MCP server, runs many runs)."""
    import threading

    from teleclaude.runtime.core.sessions import Session, SessionState

    path = tmp_path / "teleclaude.db"
    store = SessionStore(path)
    store.add(Session("s1", "codex", "next-build", "greeting", "/p", None, SessionState.RUNNING, NOW, NOW))
    lane_read, read_again, lane_done = threading.Event(), threading.Event(), threading.Event()

    def lane() -> None:
        store.get("s1")  # a lane's read while the store is held open
        lane_read.set()
        read_again.wait(timeout=60)
        store.get("s1")  # its next read, after the run let go
        lane_done.set()

    thread = threading.Thread(target=lane)
    with store.kept_open():
        store.get("s1")
        thread.start()
        assert lane_read.wait(timeout=60)
        assert len(_open_on(path)) == 3  # held, the main thread's reader, the lane's
    read_again.set()  # (SQLite closes a file's descriptors only once no connection of the process locks it)
    assert lane_done.wait(timeout=60)
    thread.join(timeout=60)
    assert _open_on(path) == []


def _open_on(path: Path) -> list[str]:
    """This process's open descriptors on the database file itself."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if os.readlink(fd) == str(path):
                found.append(fd.name)
        except OSError:
            continue
    return found


def test_a_file_held_open_is_read_through_each_threads_kept_connection_by_every_store_of_it(
    tmp_path, monkeypatch
):
    """A run holds its store's file open; the planner's reads on the run's thread go through another store of
    the same file (`SessionStore()`): neither lets go of the thread's kept connection, nor connects anew."""
    from teleclaude.runtime.core.sessions import Session, SessionState

    path = tmp_path / "teleclaude.db"
    store = SessionStore(path)
    store.add(Session("s1", "codex", "next-build", "greeting", "/p", None, SessionState.RUNNING, NOW, NOW))
    with store.kept_open():
        store.get("s1")
        SessionStore(path).get("s1")
        connected: list[object] = []
        connect = sqlite3.connect

        def counted(*args, **kwargs):
            connected.append(args)
            return connect(*args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", counted)
        for _ in range(3):
            assert store.get("s1") is not None and SessionStore(path).get("s1") is not None
        assert connected == []
