"""What a worker used, as `teleclaude hook stop` keeps it: the CLI's record read through its driver, a reading
on the session in the real session store; a record that is missing, too big or hostile is unknown."""

from __future__ import annotations

import io
import json
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


@pytest.mark.parametrize("cost", [-1, "lots", 1e300, None, True])
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
