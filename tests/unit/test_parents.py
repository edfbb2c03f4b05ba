"""A worker's parent (core/parents.py) and what it is told (the wake-up digests of core/supervision.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

from teleclaude.agents import PROFILES
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.planner.core.terminal import untypable
from teleclaude.runtime.core import parents
from teleclaude.runtime.core.parents import Parent
from teleclaude.runtime.core.sessions import Change, SessionState, transition
from teleclaude.runtime.core.supervision import (
    MARK,
    Reminder,
    digest,
    final_digest,
    final_due,
    nudge,
    reminded,
    resumed,
)

from .factories import running_session

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CONFIG = RuntimeConfig()
PANE = "pane:/tmp/tmux-0/default:%3"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


worker = partial(running_session, T0, last_progress_at=T0, parent=PANE, parent_agent="claude")


def test_a_parent_is_found_in_the_environment_its_mcp_server_was_started_with():
    tmux = {"TMUX": "/tmp/tmux-0/default,4242,0", "TMUX_PANE": "%3"}
    assert parents.from_env(tmux) == Parent(socket="/tmp/tmux-0/default", pane="%3")
    assert parents.from_env({**tmux, "TELECLAUDE_SESSION_ID": "0a1b2c3d"}) == Parent(session_id="0a1b2c3d")
    assert parents.from_env({"TMUX_PANE": "%3"}) is None  # not in tmux
    assert parents.from_env({}) is None
    for parent in (Parent(session_id="0a1b2c3d"), Parent(socket="/tmp/tmux-0/my:sock", pane="%12")):
        assert parents.decode(parent.encode()) == parent
    assert parents.decode("") is None and parents.decode("pane:relative:%1") is None
    assert parents.named("%7", tmux) == Parent(socket="/tmp/tmux-0/default", pane="%7")
    assert parents.named("%7", {}) is None and parents.named("not a parent", tmux) is None


def test_the_parents_agent_is_read_from_the_command_line_that_started_its_mcp_server():
    assert parents.agent_of(["/opt/bin/claude", "--dangerously-skip-permissions"], PROFILES) == "claude"
    assert parents.agent_of(["node", "/usr/lib/gemini-cli/bundle/gemini.js", "--yolo"], PROFILES) == "gemini"
    assert parents.agent_of(["codex"], PROFILES) == "codex"
    assert parents.agent_of(["bash"], PROFILES) == ""


CLAUDE_IDLE = ["", "● Dispatched the builder.", "", "─" * 40, "❯ ", "─" * 40, "  ⏵⏵ bypass permissions on"]


def test_a_parent_is_idle_only_at_an_empty_prompt_with_no_dialog_open():
    assert parents.idle(CLAUDE_IDLE, "claude", PROFILES)
    assert parents.idle(CLAUDE_IDLE, "", PROFILES)  # unknown agent: any profile's rules
    half_typed = [row.replace("❯ ", "❯ let me think about") for row in CLAUDE_IDLE]
    assert not parents.idle(half_typed, "claude", PROFILES)
    busy = [*CLAUDE_IDLE[:-1], "  ⏵⏵ bypass permissions on · esc to interrupt"]
    assert not parents.idle(busy, "claude", PROFILES)
    dialog = [
        " Accessing workspace:",
        " Quick safety check: Is this a project you created or one you trust?",
        " ❯ 1. Yes, I trust this folder",
        "   2. No, exit",
        " Enter to confirm · Esc to cancel",
    ]
    assert not parents.idle(dialog, "claude", PROFILES)


def test_the_parents_digest_has_every_field_of_seed_003_on_one_typable_line():
    session = worker(status_text="tests written", status_at=at(100))
    session, first = digest(session, at(600), [], CONFIG, tools=("Read: src/x.py (1m ago)",))
    line = first.wake("claude /next-build greeting")
    assert line.startswith(f"{MARK} worker abcd1234 (claude /next-build greeting)")
    assert "running 10m" in line and '"tests written" (8m20s ago)' in line
    assert "Read: src/x.py (1m ago)" in line and "NO PROGRESS" not in line  # it reported since
    assert "\n" not in line and untypable(line) is None
    # then silent: reminders went out, the hard one among them, and no report since the last digest
    for moment in (610, 820):
        due = nudge(session, at(moment), CONFIG, quiet=True)
        assert isinstance(due, Reminder)
        session, _ = reminded(session, at(moment), due)
    _, second = digest(session, at(900), [], CONFIG)
    line = second.wake("w")
    assert "NO PROGRESS DETECTED" in line and "unchanged since the last digest" in line
    assert "no status update for 13m20s" in line and "hard reminder sent 1m20s ago" in line
    hostile = worker(status_text="done\x1b[2J\r\nrm -rf /", status_at=at(1))
    assert untypable(digest(hostile, at(600), [], CONFIG)[1].wake("w")) is None
    wordy = digest(worker(status_text="x" * 2000, status_at=at(1)), at(600), [], CONFIG)[1].wake("w")
    assert len(wordy) < 400  # a worker's own words are cut short


def test_a_final_digest_is_due_once_per_turn_and_never_after_end_session():
    session = worker()
    assert not final_due(session)  # still working
    ended, _ = transition(session, Change.TURN_ENDED, at(700))
    assert final_due(ended)
    text = final_digest(ended, at(700), CONFIG, ())
    assert "turn ended after 11m40s" in text and untypable(text) is None
    told = replace(ended, parent_told=True)
    assert not final_due(told)
    again, _ = resumed(told, at(800))  # the parent typed into it: a new turn, told again when it ends
    assert not again.parent_told and not final_due(again)
    errored, _ = transition(session, Change.ERRORED, at(50), error="its tmux pane is gone")
    assert "errored: its tmux pane is gone" in final_digest(errored, at(50), CONFIG, ())
    cancelled, _ = transition(session, Change.ENDED, at(50))
    assert cancelled.state is SessionState.CANCELLED and not final_due(cancelled)
    assert not final_due(worker(parent="", state=SessionState.TURN_ENDED))
