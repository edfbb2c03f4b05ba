"""The worker runtime in real tmux with fake agent CLIs: start, deliver, observe, detect, end."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.demo.stand_in import LIMIT_MESSAGES
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import (
    EventKind,
    PaneView,
    SessionState,
    Started,
    StartRequest,
    output_stamp,
)
from teleclaude.runtime.launcher import AHEAD_POLL, Warm

from .conftest import attached_client, looks_until_quiet


def tmux_commands(tmux: Tmux, monkeypatch) -> list[tuple[str, ...]]:
    """Every tmux command `tmux` runs from here on (each a tmux client), in order."""
    commands: list[tuple[str, ...]] = []
    cmd = tmux.cmd

    def counted(*args: str, check: bool = True) -> list[str]:
        commands.append(args)
        return cmd(*args, check=check)

    monkeypatch.setattr(tmux, "cmd", counted)
    return commands


def dispatch(project) -> Dispatch:
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    return action


def start(runtime, action: Dispatch) -> Started:
    started = runtime.start(action)
    assert isinstance(started, Started), started
    return started


def in_two_days() -> datetime:
    """A reset time the way the CLIs print it (to the minute), always in the future: no test depends on
    today's date."""
    return (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)


PRINTED_MINUTE = timedelta(minutes=1)  # a reset printed to the minute is the end of that minute


def twelve_hour(moment: datetime) -> str:
    """ "11:05pm", as claude prints a reset."""
    return f"{moment.hour % 12 or 12}:{moment:%M}{'am' if moment.hour < 12 else 'pm'}"


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_a_builder_does_its_step_and_its_turn_ends(project, runtime, watch):
    action = dispatch(project)
    assert (action.step, action.agent) == (Step.BUILD, "gemini")
    started = start(runtime, action)
    assert started.session.state is SessionState.RUNNING
    seen = watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    assert runtime.store.get(started.session.id).state is SessionState.TURN_ENDED
    tree = project / action.subfolder
    assert git(tree, "status", "--porcelain") == ""
    assert "Build greeting" in git(tree, "log", "--oneline", "-1")
    assert dispatch(project).step is Step.REVIEW  # the planner moves on from the files alone
    assert [e.kind for e in seen].count(EventKind.TURN_ENDED) == 1
    assert runtime.wait_for_sessions([started.session.id], timeout=0.3).events == ()  # reported once


def test_a_worker_finds_this_teleclaude_by_name_though_the_runtime_runs_from_a_venv_not_on_path(
    project, runtime, fake_agents, monkeypatch
):
    """`.venv/bin/teleclaude run` with the venv not on PATH: the finalizer still runs `teleclaude finalize`
    by name, so the worker's PATH gets this teleclaude's folder (tmux gives a new pane the PATH of the client
    that creates it, whatever `-e PATH=…` says)."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(fake_agents), "/usr/bin", "/bin"]))
    monkeypatch.setenv("FAKE_AGENT", "hang")
    started = start(runtime, dispatch(project))
    environ = Path(f"/proc/{started.session.pane_pid}/environ").read_bytes().split(b"\0")
    path = next(entry[5:].decode() for entry in environ if entry.startswith(b"PATH="))
    assert shutil.which("teleclaude", path=path) == str(Path(sys.executable).parent / "teleclaude")


def test_a_rate_limit_marks_the_agent_unavailable_and_next_work_falls_back(
    project, runtime, monkeypatch, watch
):
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "limit")
    started = start(runtime, dispatch(project))
    watch(runtime, started.session.id).until(EventKind.RATE_LIMITED)
    out = AvailabilityStore().unavailable(datetime.now(UTC))
    assert "gemini" in out
    assert timedelta(minutes=55) < out["gemini"].until - datetime.now(UTC) <= timedelta(hours=1)
    assert runtime.store.get(started.session.id).state is SessionState.RATE_LIMITED
    fallback = dispatch(project)
    assert (fallback.step, fallback.agent) == (Step.BUILD, "claude")
    assert runtime.end_session(started.session.id).session.state is SessionState.CANCELLED


def test_a_crash_is_an_exit_with_its_status(project, runtime, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT", "crash")
    started = start(runtime, dispatch(project))
    watch(runtime, started.session.id).until(EventKind.EXITED)
    session = runtime.store.get(started.session.id)
    assert (session.state, session.exit_code) == (SessionState.ERRORED, 3)


def test_a_hanging_worker_times_the_wait_out_and_can_be_ended(project, runtime, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    started = start(runtime, dispatch(project))
    waited = runtime.wait_for_sessions([started.session.id], timeout=0.5)
    assert waited.events == () and waited.timed_out
    assert waited.sessions[0].state is SessionState.RUNNING
    ended = runtime.end_session(started.session.id)
    assert ended.session.state is SessionState.CANCELLED
    assert runtime.tmux.session_names() == set()


def test_an_ended_session_leaves_no_process_even_one_that_outlives_the_hang_up(project, runtime, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "stubborn")  # ignores SIGHUP and lives on once its terminal is gone
    started = start(runtime, dispatch(project))
    group = started.session.pane_pid  # tmux makes each pane's process the leader of its own group
    assert _group_members(group)
    runtime.end_session(started.session.id)
    deadline = time.monotonic() + 10
    while _group_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _group_members(group)


def _group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group `group`."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _, pgrp = stat.read_text().rsplit(") ", 1)[1].split()[:3]
        except (OSError, IndexError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            members.append(int(stat.parent.name))
    return members


def test_an_enter_pasted_with_the_text_is_pressed_again(project, runtime, monkeypatch, watch):
    from dataclasses import replace

    runtime.context.config = replace(
        runtime.config, settle=0.0
    )  # the Enter arrives with the text and is dropped
    started = runtime.run_agent_command(StartRequest("local", "emit", "3", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert "running /emit 3" in screen and "row 3" in screen


def test_a_message_whose_enter_is_dropped_is_pressed_again(project, runtime, watch):
    started = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    runtime.context.config = replace(runtime.config, settle=0.0)  # the Enter arrives with the text: dropped
    sent = runtime.send_message(started.session.id, "how is it going")
    assert not isinstance(sent, Error), sent
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    assert "status: still working on it" in runtime.get_session_output(started.session.id).chunk.rows


def test_a_worker_slow_to_show_a_taken_enter_gets_its_command_once(project, runtime, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "sluggish")  # a taken Enter shows 3.5 s later
    started = runtime.run_agent_command(StartRequest("local", "emit", "2", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert screen.count("running /emit 2") == 1 and "row 2" in screen


def test_a_message_to_a_worker_slow_to_show_it_taken_is_sent_once(project, runtime, monkeypatch, watch):
    """A CLI on a loaded machine shows a taken Enter late (3.5 s here: past the 1 + 2 s a message's two
    Enters are given): the Enter pressed again is still unread in its terminal meanwhile, and one not read
    is not lost, so the wait goes on until the line shows taken."""
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "sluggish")
    started = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    sent = runtime.send_message(started.session.id, "how is it going")
    assert not isinstance(sent, Error), sent
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert screen.count("status: still working on it") == 1, screen


def test_the_enter_waits_for_a_busy_worker_to_show_the_typed_line(project, runtime, monkeypatch, watch):
    """A CLI on a loaded machine reads its keys late, and takes an Enter read right after them as a newline
    in its input (gemini: within 30 ms), which scrolls a full screen: the typed row moved, yet nothing was
    sent. Enter comes `settle` after the line shows, for the command and for a message."""
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "busy")
    started = runtime.run_agent_command(StartRequest("local", "emit", "2", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    sent = runtime.send_message(started.session.id, "how is it going")
    assert not isinstance(sent, Error), sent
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert "running /emit 2" in screen and "status: still working on it" in screen, screen


def test_an_enter_is_not_pressed_while_gemini_still_lists_the_command_its_arguments_follow(
    project, runtime, monkeypatch, watch
):
    """gemini on a loaded machine lists `/emit` for a while after ` 2` is typed, and an Enter meanwhile puts
    the listed name in place of the last word (`/emit emit`) and sends nothing: Enter waits for the list
    to go."""
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "lagging")
    started = runtime.run_agent_command(StartRequest("local", "emit", "2", str(project), "gemini", "fast"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert "running /emit 2" in screen and "row 2" in screen, screen


def test_a_message_the_worker_never_takes_is_an_error_not_sent(project, runtime, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "deaf")  # every Enter under a message is dropped
    started = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    # the last Enter is waited on for `command_wait` (30 s): a CLI that reads every key and drops each Enter
    # shows no taken one however long it is given
    runtime.context.config = replace(runtime.config, command_wait=2.0)
    sent = runtime.send_message(started.session.id, "how is it going")
    assert isinstance(sent, Error) and sent.code is ErrorCode.TMUX_FAILED, sent


def test_output_grows_and_three_reads_neither_repeat_nor_lose_a_row(project, runtime, watch):
    started = runtime.run_agent_command(StartRequest("local", "emit", "150", str(project), "codex", "fast"))
    assert isinstance(started, Started), started
    session_id, cursor, rows = started.session.id, None, []
    events = watch(runtime, session_id)  # the waits between reads may see the turn end: keep what they see
    for _ in range(3):
        output = runtime.get_session_output(session_id, cursor, max_lines=10_000)
        rows += [row for row in output.chunk.rows if row.startswith("row ")]
        cursor = output.chunk.cursor.encode()
        events.wait(timeout=0.8)
    events.until(EventKind.TURN_ENDED)
    rows += [
        r
        for r in runtime.get_session_output(session_id, cursor, max_lines=10_000).chunk.rows
        if r.startswith("row ")
    ]
    assert rows == [f"row {n}" for n in range(1, 151)]


def read_all(runtime, session_id: str, cursor: str | None) -> tuple[list[str], str, int | None]:
    """The rows after `cursor` (all of them, however many reads), the cursor after them, and lines_missed."""
    rows: list[str] = []
    missed: int | None = 0
    while True:
        output = runtime.get_session_output(session_id, cursor, max_lines=10_000, max_bytes=1_000_000)
        rows += output.chunk.rows
        cursor = output.chunk.cursor.encode()
        missed = missed if output.chunk.lines_missed == 0 else output.chunk.lines_missed
        if not output.chunk.truncated:
            return rows, cursor, missed


def test_a_resized_window_or_a_small_client_repeats_no_row_already_read(project, runtime, watch):
    started = runtime.run_agent_command(
        StartRequest("local", "emit", "150 150", str(project), "codex", "fast")
    )
    assert isinstance(started, Started), started
    session = started.session
    watch(runtime, session.id).until(EventKind.TURN_ENDED)
    _, cursor, _ = read_all(runtime, session.id, None)
    runtime.tmux.cmd("resize-window", "-t", f"={session.tmux_session}:", "-x", "80")
    assert read_all(runtime, session.id, cursor)[::2] == ([], 0)
    with attached_client(runtime.config.socket, session.tmux_session, size=(60, 20)):
        deadline = time.monotonic() + 10
        while runtime.tmux.cmd("list-clients", "-F", "#{client_width}") != ["60"]:
            assert time.monotonic() < deadline, "the small tmux client did not attach"
            time.sleep(0.05)
        assert read_all(runtime, session.id, cursor)[::2] == ([], 0)


def test_codex_gets_its_skill_sign_and_the_alternate_screen_is_flagged(project, runtime, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT_CODEX", "altscreen")
    started = runtime.run_agent_command(StartRequest("local", "emit", "2", str(project), "codex", "med"))
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    output = runtime.get_session_output(started.session.id)
    assert output.chunk.alternate_screen


def test_a_cursor_of_another_session_is_an_error(project, runtime):
    one = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "fast"))
    two = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "gemini", "fast"))
    cursor = runtime.get_session_output(one.session.id).chunk.cursor.encode()
    answer = runtime.get_session_output(two.session.id, cursor)
    assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_CURSOR


def test_after_a_restart_vanished_and_respawned_panes_are_errored(project, runtime):
    gone = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "fast"))
    respawned = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "gemini", "fast"))
    kept = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "codex", "fast"))
    runtime.tmux.kill_session(gone.session.tmux_session)
    runtime.tmux.cmd("respawn-pane", "-k", "-t", respawned.session.pane_id, "sleep", "60")
    restarted = open_runtime(project)  # a new server process would start like this
    states = {s.id: s.state for s in restarted.list_sessions()}
    assert states[gone.session.id] is SessionState.ERRORED
    assert states[respawned.session.id] is SessionState.ERRORED
    assert states[kept.session.id] in (SessionState.RUNNING, SessionState.TURN_ENDED)
    record = restarted.store.get(gone.session.id)
    assert record is not None and "gone" in record.last_error


def test_a_step_whose_starter_died_before_its_tmux_session_opened_is_freed_in_time(project, runtime):
    """The PENDING row written under the project lock holds the step while the worker opens; one left by a
    killed starter holds it only until a start could have finished."""
    action = dispatch(project)
    started = start(runtime, action)
    runtime.end_session(started.session.id)
    orphan = replace(started.session, id="0rphan00", state=SessionState.PENDING, pane_id="", pane_pid=0)
    runtime.store.add(orphan)
    states = {s.id: s.state for s in runtime.list_sessions()}
    assert states[orphan.id] is SessionState.PENDING  # its start may still be under way
    second = runtime.start(action)
    assert isinstance(second, Error) and second.code is ErrorCode.ALREADY_RUNNING, second
    runtime.store.save(replace(orphan, created_at=orphan.created_at - timedelta(hours=1)))
    assert {s.id: s.state for s in runtime.list_sessions()}[orphan.id] is SessionState.ERRORED
    start(runtime, action)


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"computer": "elsewhere"}, ErrorCode.UNKNOWN_COMPUTER),
        ({"agent": "hal9000"}, ErrorCode.UNKNOWN_AGENT),
        ({"subfolder": "../outside"}, ErrorCode.INVALID_SUBFOLDER),
        ({"subfolder": "/etc"}, ErrorCode.INVALID_SUBFOLDER),
        ({"subfolder": "trees/not-yet"}, ErrorCode.INVALID_SUBFOLDER),
        ({"args": "x\ny"}, ErrorCode.INVALID_ARGUMENT),
        ({"command": "-rf"}, ErrorCode.INVALID_ARGUMENT),
        ({"thinking_mode": "deep"}, ErrorCode.INVALID_ARGUMENT),
    ],
)
def test_bad_requests_are_refused_and_leave_nothing_behind(project, runtime, change, code):
    request = (
        dict(
            computer="local",
            command="next-build",
            args="greeting",
            project=str(project),
            agent="claude",
            thinking_mode="med",
            subfolder=None,
        )
        | change
    )
    answer = runtime.run_agent_command(StartRequest(**request))
    assert isinstance(answer, Error) and answer.code is code
    assert runtime.tmux.session_names() == set()
    assert runtime.store.sessions() == []


def test_a_missing_cli_binary_is_refused(project, runtime):
    from dataclasses import replace

    claude = replace(runtime.config.profiles["claude"], binaries=("no-such-claude",))
    runtime.context.config = replace(runtime.config, profiles={**runtime.config.profiles, "claude": claude})
    answer = runtime.run_agent_command(
        StartRequest("local", "next-build", "x", str(project), "claude", "med")
    )
    assert isinstance(answer, Error) and answer.code is ErrorCode.AGENT_NOT_INSTALLED
    assert runtime.store.sessions() == []


def test_a_cli_that_never_shows_its_prompt_is_errored_and_cleaned_up(project, runtime, monkeypatch):
    from dataclasses import replace

    monkeypatch.setenv("FAKE_AGENT", "slowstart")
    runtime.context.config = replace(runtime.config, startup_timeout=0.3)
    answer = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "med"))
    assert isinstance(answer, Error) and answer.code is ErrorCode.TMUX_FAILED
    assert runtime.tmux.session_names() == set()
    (session,) = runtime.store.sessions()
    assert session.state is SessionState.ERRORED and "no prompt" in session.last_error


def test_the_stop_hook_ends_a_turn_at_once(project, runtime, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    started = runtime.run_agent_command(StartRequest("local", "emit", "1", str(project), "claude", "med"))
    runtime.record_turn_end(started.session.id)
    waited = runtime.wait_for_sessions([started.session.id], timeout=1)
    assert [(e.kind, e.detail) for e in waited.events] == [(EventKind.TURN_ENDED, "stop hook")]


def test_a_stop_failure_hook_report_limits_or_ends_the_session(project, runtime, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    limited = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "claude", "med")
    ).session
    reset = in_two_days()
    message = f"You've hit your session limit · resets {reset:%b} {reset.day}, {twelve_hour(reset)} (UTC)"
    assert runtime.record_stop_failure(limited.id, "rate_limit", message)
    assert runtime.store.get(limited.id).state is SessionState.RATE_LIMITED
    assert AvailabilityStore().unavailable(datetime.now(UTC))["claude"].until == reset + PRINTED_MINUTE
    assert runtime.record_stop_failure(limited.id, "rate_limit", message)  # told twice: nothing more to do
    billed = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "claude", "med")
    ).session
    assert runtime.record_stop_failure(billed.id, "billing_error", "Credit balance too low")
    assert runtime.store.get(billed.id).state is SessionState.ERRORED
    waited = runtime.wait_for_sessions([limited.id, billed.id], timeout=1)
    assert [e.kind for e in waited.events] == [EventKind.RATE_LIMITED, EventKind.ERRORED]


def test_a_limit_told_before_the_launcher_saw_the_line_taken_limits_the_session_once_it_works(
    project, runtime, monkeypatch
):
    """On a loaded machine the StopFailure hook can run before the launcher has seen its Enter taken: the
    agent is out at once, and the hook tells it again (`record`'s retries) until the session works."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    running = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "claude", "med")
    ).session
    typed = runtime.store.save(replace(running, state=SessionState.PENDING), expect=SessionState.RUNNING)
    assert typed is not None
    reset = in_two_days()
    message = f"You've hit your session limit · resets {reset:%b} {reset.day}, {twelve_hour(reset)} (UTC)"
    assert not runtime.record_stop_failure(typed.id, "rate_limit", message)  # told again later
    assert AvailabilityStore().unavailable(datetime.now(UTC))["claude"].until == reset + PRINTED_MINUTE
    taken = replace(runtime.store.get(typed.id), state=SessionState.RUNNING)  # the launcher saw it taken
    assert runtime.store.save(taken, expect=SessionState.PENDING) is not None
    assert runtime.record_stop_failure(typed.id, "rate_limit", message)
    assert runtime.store.get(typed.id).state is SessionState.RATE_LIMITED


def test_an_api_error_told_before_the_launcher_saw_the_line_taken_ends_the_turn_once_it_works(
    project, runtime, monkeypatch
):
    """Any other API error, told while the session is PENDING, is told again (the hook's retries) and ends
    the turn once the session works: it is not lost to the idle rule."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime.context.config = replace(runtime.config, idle_threshold=3600)
    running = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "claude", "med")
    ).session
    typed = runtime.store.save(replace(running, state=SessionState.PENDING), expect=SessionState.RUNNING)
    assert typed is not None
    malformed = "API Error: 400 the request was malformed"
    assert not runtime.record_stop_failure(typed.id, "invalid_request", malformed)
    assert runtime.store.get(typed.id).state is SessionState.PENDING
    taken = replace(runtime.store.get(typed.id), state=SessionState.RUNNING)
    assert runtime.store.save(taken, expect=SessionState.PENDING) is not None
    assert runtime.record_stop_failure(typed.id, "invalid_request", malformed)
    assert runtime.store.get(typed.id).state is SessionState.TURN_ENDED


def test_codexs_rollout_file_with_a_typed_error_limits_the_session(project, runtime, monkeypatch, tmp_path):
    """Codex records the API error that ended a turn in its rollout file (its UserPromptSubmit hook names the
    file); the runtime reads it as a StopFailure: a usage limit until the reset its words name."""
    import json
    from dataclasses import replace

    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime.context.config = replace(runtime.config, idle_threshold=3600)  # the turn goes on until told
    session = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "codex", "med")
    ).session
    rollout = tmp_path / "rollout-2026-11-23T16-00-00-thread.jsonl"
    reset = in_two_days().astimezone()  # codex prints its local time
    words = (
        "You’ve hit your usage limit. Upgrade to Pro (…) or try again at "
        f"{reset:%b} {reset.day}th, {reset.year} {twelve_hour(reset).upper()}."
    )
    lines = [
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}},
        {
            "type": "event_msg",
            "payload": {
                "type": "task_complete",
                "completed_at": int(datetime.now(UTC).timestamp()) + 1,
                "error": {"message": words, "codex_error_info": "usage_limit_exceeded"},
            },
        },
    ]
    rollout.write_text(json.dumps(lines[0]) + "\n")
    assert runtime.record_transcript(session.id, str(rollout))
    assert runtime.wait_for_sessions([session.id], timeout=1).events == ()  # the turn goes on
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    waited = runtime.wait_for_sessions([session.id], timeout=5)
    assert [e.kind for e in waited.events] == [EventKind.RATE_LIMITED]
    assert waited.events[0].detail.startswith("quota_exhausted until ")
    assert "codex_error_info: rate_limit" in waited.events[0].detail
    assert AvailabilityStore().unavailable(datetime.now(UTC))["codex"].until == reset + PRINTED_MINUTE


def test_a_worker_whose_stop_hook_runs_ends_its_turn_through_the_hook(project, runtime, monkeypatch, watch):
    from dataclasses import replace

    monkeypatch.setenv("FAKE_AGENT_GEMINI", "work,hook")  # commits, then runs `teleclaude hook stop`
    runtime.context.config = replace(runtime.config, idle_threshold=3600)  # so only the hook can end the turn
    started = start(runtime, dispatch(project))
    seen = watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    assert [e.detail for e in seen] == ["stop hook"]


def test_a_tmux_server_whose_last_session_just_ended_has_no_panes(runtime):
    """Between its last session ending and the server exiting, tmux answers `list-panes -a` with "no current
    target": no panes, not a failure that stops a wait."""
    runtime.tmux.cmd("new-session", "-d", "-s", "last", "sleep", "60")
    runtime.tmux.cmd("set-option", "-g", "exit-empty", "off")  # holds the server in that moment
    runtime.tmux.kill_session("last")
    assert runtime.tmux.views() == {}
    assert runtime.tmux.session_names() == set()


def test_a_quiet_worker_is_not_captured_at_every_look_and_what_it_prints_later_is_seen(
    project, runtime, monkeypatch, watch
):
    """A look does not capture a pane that printed nothing since the last (tmux's time of its last output,
    listed with the panes), and output after a quiet spell is read: a limit printed then still limits."""
    monkeypatch.setenv("FAKE_AGENT", "hang")  # busy after its command: what is typed shows as queued
    started = start(runtime, dispatch(project))
    session_id, pane, agent = started.session.id, started.session.pane_id, started.session.agent
    captures = looks_until_quiet(runtime, monkeypatch)
    before = len(captures)
    runtime.list_sessions()
    assert len(captures) == before and runtime.store.get(session_id).state is SessionState.RUNNING
    runtime.tmux.send_text(pane, LIMIT_MESSAGES[agent])
    runtime.tmux.send_key(pane, "Enter")
    watch(runtime, session_id).until(EventKind.RATE_LIMITED)
    assert len(captures) > before
    runtime.end_session(session_id)


def test_a_look_at_a_worker_that_printed_reads_it_in_one_tmux_client_beside_the_pane_list(
    project, runtime, monkeypatch
):
    """A pane that printed since the last look is read (the rows at its reading position, its new rows, the
    cursor's row, its screen) in one tmux client, not one per part: those clients were most of `run`'s own
    CPU. What it printed is seen all the same: a limit it printed limits it."""
    monkeypatch.setenv("FAKE_AGENT", "hang")  # busy after its command: what is typed shows as queued
    started = start(runtime, dispatch(project))
    session_id, pane, agent = started.session.id, started.session.pane_id, started.session.agent
    looks_until_quiet(runtime, monkeypatch)
    runtime.tmux.send_text(pane, LIMIT_MESSAGES[agent])
    runtime.tmux.send_key(pane, "Enter")
    deadline = time.monotonic() + 10
    shown = LIMIT_MESSAGES[agent][:30]
    while not any(shown in row for row in runtime.tmux.glance(pane)[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    commands = tmux_commands(runtime.tmux, monkeypatch)
    runtime.list_sessions()
    assert runtime.store.get(session_id).state is SessionState.RATE_LIMITED
    assert len(commands) == 2  # the pane list, then the pane read
    runtime.end_session(session_id)


def test_a_glance_is_one_tmux_client_with_the_panes_view_and_its_whole_screen(runtime, monkeypatch):
    """A start's prompt wait looks many times a second: each look is one tmux client for that one pane (not
    the server's pane list beside a capture), and a pane or server that is gone is no pane, not a failure."""
    tmux = runtime.tmux
    tmux.cmd("new-session", "-d", "-s", "one", "-x", "80", "-y", "12", "printf 'hello\\n'; sleep 60")
    (pane,) = tmux.views()
    tmux.cmd("new-session", "-d", "-s", "two", "sleep", "60")
    deadline = time.monotonic() + 10
    while "hello" not in tmux.glance(pane)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    commands = tmux_commands(tmux, monkeypatch)
    view, screen = tmux.glance(pane)
    assert len(commands) == 1
    assert view is not None and view.pane_id == pane and not view.dead
    assert screen[0] == "hello" and len(screen) == view.height == 12  # its blank rows too
    tmux.kill_session("one")
    assert tmux.glance(pane) == (None, [])
    tmux.kill_server()
    assert tmux.glance(pane) == (None, [])


def test_a_delivery_s_keys_go_in_the_clients_of_its_glances(runtime, monkeypatch):
    """A delivery types its line and presses Enter in the tmux clients that glance at the pane (each client
    is ~2.5 ms of CPU): the line typed whole (a trailing `;` too) before the glance, the Enter after it."""
    tmux = runtime.tmux
    tmux.cmd("new-session", "-d", "-s", "cat", "-x", "80", "-y", "12", "cat")
    (pane,) = tmux.views()
    commands = tmux_commands(tmux, monkeypatch)
    view, _ = tmux.glance(pane, typed="run the tests;")
    assert view is not None and len(commands) == 1
    deadline = time.monotonic() + 10
    while "run the tests;" not in tmux.glance(pane)[1] and time.monotonic() < deadline:
        time.sleep(0.05)  # the terminal's echo
    before = len(commands)
    _, screen = tmux.glance(pane, press="Enter")
    assert len(commands) == before + 1 and screen.count("run the tests;") == 1  # the screen before the Enter
    deadline = time.monotonic() + 10
    while tmux.glance(pane)[1].count("run the tests;") < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert tmux.glance(pane)[1].count("run the tests;") == 2  # the Enter taken: cat wrote the line back
    tmux.kill_session("cat")
    with pytest.raises(TmuxError):
        tmux.glance(pane, typed="lost")  # a line that cannot be typed is no look at a gone pane


def test_a_worker_started_ahead_is_looked_at_a_few_times_a_second_and_still_takes_its_command(
    project, runtime, monkeypatch, watch
):
    """Nobody waits on a worker started ahead of its step yet: its prompt is awaited with a look every
    quarter second (a start the run waits on looks every 50 ms), and it takes its command when given it."""
    monkeypatch.setenv("FAKE_AGENT", "slowstart")  # its prompt shows after a second
    commands = tmux_commands(runtime.tmux, monkeypatch)
    began = time.monotonic()
    warm = runtime.warm(dispatch(project))
    took = time.monotonic() - began
    assert isinstance(warm, Warm), warm
    looks = [args for args in commands if args[:1] == ("display-message",) and "-t" in args]  # a glance each
    assert 2 <= len(looks) <= took / AHEAD_POLL + 2
    started = runtime.deliver_warm(warm)
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    runtime.end_session(started.session.id)


def test_waits_that_take_a_recent_look_list_no_panes_but_a_worker_that_exits_is_looked_at_at_once(
    project, runtime, monkeypatch
):
    """`run`'s loop waits a fifth of a second at a time while a worker starts: a look less than a poll
    interval old does for it (each look lists the panes, a tmux client), and a worker's exit, which wakes the
    wait, is still looked at and reported at once."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime.context.config = replace(runtime.config, poll_interval=30.0)
    started = start(runtime, dispatch(project))
    session_id = started.session.id
    runtime.wait_for_sessions([session_id], timeout=0)  # a look
    listed: list[int] = []
    views = runtime.tmux.views

    def counted():
        listed.append(1)
        return views()

    monkeypatch.setattr(runtime.tmux, "views", counted)
    for _ in range(5):
        assert runtime.wait_for_sessions([session_id], timeout=0.05, fresh=False).events == ()
    assert listed == []
    pane_pid = started.session.pane_pid
    for child in Path(f"/proc/{pane_pid}/task/{pane_pid}/children").read_text().split():
        os.kill(int(child), signal.SIGTERM)  # the CLI exits; its pane's wrapper signals the session's waiters
    waited = runtime.wait_for_sessions([session_id], timeout=20, fresh=False)
    assert [event.kind for event in waited.events] == [EventKind.EXITED]
    runtime.end_session(session_id)


def test_a_worker_that_exits_between_two_waits_wakes_the_next_one(project, runtime, monkeypatch):
    """tmux wakes one waiter per signal: the waiter that saw a pane's exit signal while nobody waited is the
    next wait's wake-up, not replaced by a new waiter that would sleep through the whole wait."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime.context.config = replace(runtime.config, poll_interval=30.0)
    started = start(runtime, dispatch(project))
    session_id = started.session.id
    runtime.wait_for_sessions([session_id], timeout=0)  # a look
    assert runtime.wait_for_sessions([session_id], timeout=0.05, fresh=False).events == ()  # a waiter
    (waiter,) = runtime.observer._waiters.values()
    pane_pid = started.session.pane_pid
    for child in Path(f"/proc/{pane_pid}/task/{pane_pid}/children").read_text().split():
        os.kill(int(child), signal.SIGTERM)
    waiter.wait(timeout=20)  # the pane's wrapper signalled it, between two waits
    waited = runtime.wait_for_sessions([session_id], timeout=20, fresh=False)
    assert [event.kind for event in waited.events] == [EventKind.EXITED]
    runtime.end_session(session_id)


def test_a_sandboxed_workers_turn_end_wakes_the_wait_through_its_channel(project, runtime, monkeypatch):
    """A sandboxed worker's Stop hook reaches no tmux server: it pokes its channel's pipe, which the wait
    listens on, so its turn's end is told at once, not at the next look (here a minute away)."""
    from teleclaude.adapters import sandbox

    monkeypatch.setenv("FAKE_AGENT", "hook")
    runtime.context.config = replace(runtime.config, poll_interval=60.0, idle_threshold=60.0)
    started = start(runtime, dispatch(project))
    session_id = started.session.id
    if not sandbox.channel_folder(runtime.store.path, session_id).is_dir():
        runtime.end_session(session_id)
        pytest.skip("no sandbox on this machine: its hooks reach the store themselves")
    kinds: list[EventKind] = []
    while EventKind.TURN_ENDED not in kinds:
        waited = runtime.wait_for_sessions([session_id], timeout=30, fresh=False)
        assert not waited.timed_out, kinds  # woken by the hook, not by the wait's end
        kinds += [event.kind for event in waited.events]
    runtime.end_session(session_id)


def test_a_local_workers_turn_end_wakes_the_wait_through_its_pipe_not_a_tmux_client(
    project, runtime, monkeypatch
):
    """A worker that is not sandboxed records its turn's end itself and pokes the pipe the wait listens on
    beside the channels: told at once (the next look is a minute away), its wait-for client left waiting
    (a tmux client signalling it would have ended it)."""
    from teleclaude.config.profiles import SandboxMode

    monkeypatch.setenv("FAKE_AGENT", "hook")
    runtime.context.config = replace(
        runtime.config, poll_interval=60.0, idle_threshold=60.0, sandbox=SandboxMode.OFF
    )
    started = start(runtime, dispatch(project))
    session_id = started.session.id
    kinds: list[EventKind] = []
    while EventKind.TURN_ENDED not in kinds:
        waited = runtime.wait_for_sessions([session_id], timeout=30, fresh=False)
        assert not waited.timed_out, kinds  # woken by the hook, not by the wait's end
        kinds += [event.kind for event in waited.events]
    waiter = runtime.observer._waiters.get(session_id)
    assert waiter is not None and waiter.poll() is None
    runtime.end_session(session_id)


# Draws `frame N` at the top left of the alternate screen, the cursor put back there, anew at every line typed
# (not echoed): the screen changes in place, and the pane's cursor, history and mode stay as they were.
_REDRAW = """
import sys, termios
mode = termios.tcgetattr(0)
mode[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, mode)
sys.stdout.write("\\x1b[?1049h")
frame = 0
while True:
    sys.stdout.write(f"\\x1b[Hframe {frame}\\x1b[H")
    sys.stdout.flush()
    if not sys.stdin.readline():
        break
    frame += 1
"""


def test_a_pane_redrawn_in_place_on_the_alternate_screen_is_seen_to_print_and_a_quiet_one_is_not(
    tmux_socket,
):
    """What tells a look that a pane printed (`output_stamp`) moves with any output, also a redraw in place
    on the alternate screen (as codex draws), and stays while the pane prints nothing."""
    tmux = Tmux(tmux_socket)
    size = ("-x", "80", "-y", "20")
    pane = tmux.cmd(
        "new-session", "-d", "-s", "redraw", *size, "-P", "-F", "#{pane_id}", sys.executable, "-c", _REDRAW
    )[0]

    def settled(text: str) -> PaneView:
        """The pane's view, listed after it showed `text`, once a second has passed since it printed."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if tmux.screen(pane, tmux.views()[pane])[0].startswith(text):
                view = tmux.views()[pane]
                if output_stamp(view) is not None:
                    return view
            time.sleep(0.1)
        pytest.fail(f"the pane never showed {text!r} and went quiet")

    first = settled("frame 0")
    time.sleep(1.1)
    quiet = tmux.views()[pane]
    assert output_stamp(quiet) == output_stamp(first)
    tmux.send_key(pane, "Enter")
    second = settled("frame 1")
    shape = [(v.cursor_y, v.history_size, v.alternate) for v in (first, second)]
    assert shape[0] == shape[1] == (0, 0, True)  # nothing but the output time tells
    assert output_stamp(second) != output_stamp(first)
