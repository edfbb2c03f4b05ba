"""What a worker used, as `teleclaude hook stop` keeps it: the CLI's record read through its driver, a reading
on the session in the real session store; a record that is missing, too big or hostile is unknown."""

from __future__ import annotations

import io
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.adapters import records
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.agents.tokens import Tokens
from teleclaude.config.spend import SpendConfig
from teleclaude.runtime import spend
from teleclaude.runtime.hooks import record as hook_record
from teleclaude.runtime.hooks import statusline, stop

from ..unit.factories import running_session

KEY = "k" * 32


@pytest.fixture
def worker(tmp_path, monkeypatch):
    """A worker's session in the store, and this process as its stop hook (its id and key)."""
    store = SessionStore()
    session = running_session(datetime.now(UTC), id="w1", project=str(tmp_path), key=KEY)
    store.add(session)
    monkeypatch.setenv("TELECLAUDE_SESSION_ID", session.id)
    monkeypatch.setenv("TELECLAUDE_SESSION_KEY", KEY)
    monkeypatch.delenv("TELECLAUDE_TURN_END_TO_PANE", raising=False)
    monkeypatch.chdir(tmp_path)
    return store, session


def claude_turn(path: Path, name: str, fresh: object, out: int) -> None:
    usage = {"input_tokens": fresh, "output_tokens": out}
    with path.open("a") as file:
        file.write(
            json.dumps({"type": "assistant", "message": {"id": name, "model": "x", "usage": usage}}) + "\n"
        )


def stop_hook(transcript: Path) -> None:
    raw = json.dumps(
        {"hook_event_name": "Stop", "cwd": str(transcript.parent), "transcript_path": str(transcript)}
    )
    assert stop.main("claude", io.StringIO(raw), io.StringIO()) == 0


def test_each_stop_keeps_the_sessions_use_so_far_and_turns_are_the_differences(worker, tmp_path):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    stop_hook(transcript)
    stop_hook(transcript)  # nothing new: no second reading
    claude_turn(transcript, "b", 200, 20)
    stop_hook(transcript)
    readings = spend.readings(store, [session.id])
    assert [r.tokens.total for r in readings] == [110, 330]
    assert [t.tokens.total for t in spend.turn_rows(store, session)] == [110, 220]
    assert spend.per_session(store, [session], SpendConfig())[session.id].tokens == 330


@pytest.mark.parametrize(
    "write",
    [
        lambda path: None,  # missing
        lambda path: path.write_bytes(b'{"type": "assistant", "message": {"id": "a", "usa'),  # cut short
        lambda path: claude_turn(path, "a", -5, 10),  # a negative count
        lambda path: claude_turn(path, "a", "lots", 10),  # not a number
        lambda path: claude_turn(path, "a", 10**15, 10),  # past any session
        lambda path: path.write_bytes(b"\xff\xfe\x00garbage\n" * 100),
    ],
)
def test_a_missing_cut_or_hostile_record_is_unknown_never_zero(worker, tmp_path, write, capsys):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    write(transcript)
    stop_hook(transcript)
    assert "Traceback" not in capsys.readouterr().err
    used = spend.per_session(store, [session], SpendConfig())[session.id]
    assert used.text() == "unknown" and used.as_json()["tokens"] is None


def test_a_record_past_the_size_read_is_unknown(worker, tmp_path, monkeypatch):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    monkeypatch.setattr(records, "RECORD_MOST", 10)
    stop_hook(transcript)
    assert spend.readings(store, [session.id])[-1].tokens == Tokens()


def test_a_worker_on_another_computer_keeps_nothing_here(worker, tmp_path, monkeypatch):
    store, session = worker
    monkeypatch.setenv("TELECLAUDE_TURN_END_TO_PANE", "1")
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    hook_record.record_spend("claude", str(transcript))
    assert spend.readings(store, [session.id]) == []


def test_another_sessions_key_records_nothing(worker, tmp_path, monkeypatch):
    store, session = worker
    monkeypatch.setenv("TELECLAUDE_SESSION_KEY", "not-its-key")
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    hook_record.record_spend("claude", str(transcript))
    assert spend.readings(store, [session.id]) == []


def test_the_day_total_counts_every_session_read_today(worker):
    store, session = worker
    now = datetime.now(UTC)
    other = running_session(now, id="w2", agent="codex", project="/elsewhere")
    store.add(other)
    store.add_spend(session.id, now - timedelta(days=2), Tokens(500, 0, 50, 0, model="x"))
    store.add_spend(session.id, now, Tokens(600, 0, 60, 0, model="x"))
    store.add_spend(other.id, now, Tokens(7, 0, 1, 0, model="x"))
    assert spend.day_total(store, now, SpendConfig()).tokens == 110 + 8


def status_line(cost: object) -> None:
    """`teleclaude hook statusline` as Claude Code runs it, with `cost.total_cost_usd`."""
    raw = json.dumps({"model": {"display_name": "Opus"}, "cost": {"total_cost_usd": cost}}).encode()
    assert statusline.main("claude", stdin=io.BytesIO(raw), stdout=io.StringIO()) == 0


def test_the_cost_claudes_status_line_reports_is_the_sessions_reported_cost(worker, tmp_path):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    status_line(0.01)  # before any reading: it waits for the stop hook's (a reading of no tokens is unknown)
    assert spend.readings(store, [session.id]) == []
    claude_turn(transcript, "a", 100, 10)
    stop_hook(transcript)
    status_line(0.25)
    claude_turn(transcript, "b", 200, 20)
    stop_hook(transcript)  # the reported cost stays until the status line tells the next
    assert [r.tokens.cost_usd for r in spend.readings(store, [session.id])] == [0.25, 0.25]
    status_line(0.75)
    assert [r.tokens.cost_usd for r in spend.readings(store, [session.id])] == [0.25, 0.75]
    used = spend.per_session(store, [session], SpendConfig())[session.id]
    assert used.usd == 0.75 and not used.estimate and used.text() == "330 tokens, $0.75"
    assert [t.tokens.cost_usd for t in spend.turn_rows(store, session)] == [0.25, 0.5]


@pytest.mark.parametrize("cost", [-1, "lots", 1e300, None, True, 0])  # 0: a subscription's login
def test_a_hostile_cost_on_the_status_line_is_not_kept(worker, tmp_path, cost):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    stop_hook(transcript)
    status_line(cost)
    assert [r.tokens.cost_usd for r in spend.readings(store, [session.id])] == [None]


def test_another_sessions_key_sets_no_cost(worker, tmp_path, monkeypatch):
    store, session = worker
    transcript = tmp_path / "t.jsonl"
    claude_turn(transcript, "a", 100, 10)
    stop_hook(transcript)
    monkeypatch.setenv("TELECLAUDE_SESSION_KEY", "not-its-key")
    status_line(0.5)
    assert [r.tokens.cost_usd for r in spend.readings(store, [session.id])] == [None]


def opencode_db(
    home: Path, messages: list[tuple[str, dict | str]], parents: dict[str, str] | None = None
) -> Path:
    """opencode's database as 1.18 keeps it (the tables read): (session id, message data) each."""
    path = home / ".local/share/opencode/opencode.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE session (id text PRIMARY KEY, parent_id text)")
        conn.execute(
            "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, "
            "time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)"
        )
        for name, parent in {"ses_a": "", **(parents or {})}.items():
            conn.execute("INSERT INTO session VALUES (?, ?)", (name, parent or None))
        for number, (session, data) in enumerate(messages):
            text = data if isinstance(data, str) else json.dumps(data)
            row = (f"msg_{number}", session, number, number, text)
            conn.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)", row)
    conn.close()
    return path


def answer(fresh: object, out: int, read: int = 0, reasoning: int = 0, cost: object = 0) -> dict:
    tokens = {"input": fresh, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": 0}}
    return {"role": "assistant", "modelID": "m", "tokens": tokens, "cost": cost}


def opencode_stop(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    raw = json.dumps({"hook_event_name": "session.idle", "cwd": str(tmp_path), "session_id": "ses_a"})
    assert stop.main("opencode", io.StringIO(raw), io.StringIO()) == 0


def test_opencodes_answers_in_its_database_are_its_sessions_use_with_its_subagents(
    worker, tmp_path, monkeypatch
):
    store, session = worker
    messages: list[tuple[str, dict | str]] = [
        ("ses_a", {"role": "user"}),
        ("ses_a", answer(100, 10, read=50, reasoning=5)),
        ("ses_sub", answer(7, 3)),  # its subagent's
        ("ses_other", answer(1000, 1000)),  # another worker's
    ]
    opencode_db(tmp_path, messages, {"ses_sub": "ses_a", "ses_other": ""})
    opencode_stop(tmp_path, monkeypatch)
    (reading,) = spend.readings(store, [session.id])
    assert reading.tokens == Tokens(157, 50, 18, 5, None, "m")  # no cost said (0): unknown, never $0
    assert store.get(session.id).conversation == "ses_a"


def test_the_cost_opencode_reports_is_the_reported_cost(worker, tmp_path, monkeypatch):
    store, session = worker
    opencode_db(tmp_path, [("ses_a", answer(100, 10, cost=0.5)), ("ses_a", answer(100, 10, cost=0.25))])
    opencode_stop(tmp_path, monkeypatch)
    used = spend.per_session(store, [store.get(session.id)], SpendConfig())[session.id]
    assert used.usd == 0.75 and not used.estimate


@pytest.mark.parametrize(
    "make",
    [
        lambda home: None,  # missing
        lambda home: opencode_db(home, []).write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000),  # corrupt
        lambda home: opencode_db(home, []).write_bytes(b"not a database at all"),
        lambda home: opencode_db(home, [("ses_a", answer(-5, 10))]),  # a negative count
        lambda home: opencode_db(home, [("ses_a", answer("lots", 10))]),  # not a number
        lambda home: opencode_db(home, [("ses_a", answer(10**15, 10))]),  # past any session
        lambda home: opencode_db(home, [("ses_a", "{not json")]),
    ],
)
def test_a_missing_corrupt_or_hostile_opencode_database_is_unknown(worker, tmp_path, monkeypatch, make):
    store, session = worker
    make(tmp_path)
    opencode_stop(tmp_path, monkeypatch)
    (reading,) = spend.readings(store, [session.id])
    assert reading.tokens.total is None
    assert spend.per_session(store, [store.get(session.id)], SpendConfig())[session.id].text() == "unknown"


def test_a_locked_opencode_database_is_unknown_and_left_as_it_was(worker, tmp_path, monkeypatch):
    store, session = worker
    path = opencode_db(tmp_path, [("ses_a", answer(100, 10))])
    before = path.read_bytes()
    monkeypatch.setattr(records, "BUSY_MS", 50)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        opencode_stop(tmp_path, monkeypatch)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r.tokens for r in spend.readings(store, [session.id])] == [Tokens()]
    assert path.read_bytes() == before and not path.with_name("opencode.db-journal").exists()
