"""Any process of the user may set any tmux pane's options and name any session to a hook: a worker's hooks
speak for its own session only. A pane mark (`@teleclaude_turn_end`, `@teleclaude_stop_failure`,
`@teleclaude_usage`) counts
only when sealed with the session's key, and a hook's record on the database only with that key in its
environment: one worker cannot end another's turn or make its agent unavailable (a forged stop failure once
kept codex out for 16 hours)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from teleclaude.adapters import sandbox
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import STOP_FAILURE_OPTION, TURN_END_OPTION, TURN_END_TO_PANE, USAGE_OPTION
from teleclaude.agents.profile import UsageWindow
from teleclaude.errors import Error
from teleclaude.runtime.core.limits import encode_usage, parse_failure
from teleclaude.runtime.core.marks import SESSION_KEY, seal, unseal
from teleclaude.runtime.core.sessions import EventKind, SessionState

from .conftest import hook

LIMIT = json.dumps({"error": "rate_limit", "last_assistant_message": "You've hit your session limit"})


def _set_option(runtime, pane_id: str, option: str, value: str) -> None:
    """What any process of the user can do: `tmux -L SOCKET set-option` on any pane."""
    subprocess.run(
        ["tmux", "-L", runtime.tmux.socket, "set-option", "-p", "-t", pane_id, option, value], check=True
    )


def _unavailable() -> set[str]:
    return set(AvailabilityStore().unavailable(datetime.now(UTC)))


@pytest.mark.slow  # the worker runtime in tmux
def test_a_pane_mark_without_the_sessions_key_neither_ends_its_turn_nor_limits_its_agent(
    worker_runtime, start_worker
):
    runtime = worker_runtime
    other, target = start_worker("x"), start_worker("y")
    failure = parse_failure(LIMIT)
    assert failure is not None
    forged = [
        (STOP_FAILURE_OPTION, failure.encode()),  # as the hook wrote it before marks were sealed
        (STOP_FAILURE_OPTION, seal(other.key, other.id, STOP_FAILURE_OPTION, failure.encode())),
        (STOP_FAILURE_OPTION, seal(other.key, target.id, STOP_FAILURE_OPTION, failure.encode())),
        (TURN_END_OPTION, str(time.time_ns())),
        (TURN_END_OPTION, seal(other.key, target.id, TURN_END_OPTION, str(time.time_ns()))),
        (TURN_END_OPTION, seal(target.key, target.id, STOP_FAILURE_OPTION, str(time.time_ns()))),
    ]
    for option, value in forged:
        _set_option(runtime, target.pane_id, option, value)
        assert runtime.wait_for_sessions([target.id], timeout=0.5).events == (), (option, value)
        assert runtime.store.get(target.id).state is SessionState.RUNNING
        assert _unavailable() == set()
        view = runtime.tmux.views()[target.pane_id]
        assert (view.turn_end, view.stop_failure) == ("", "")  # taken away unread

    # the session's own hook still ends its turn: a mark sealed with its key
    _set_option(runtime, target.pane_id, TURN_END_OPTION, seal(target.key, target.id, TURN_END_OPTION, "1"))
    waited = runtime.wait_for_sessions([target.id], timeout=2)
    assert [(e.kind, e.detail) for e in waited.events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert runtime.store.get(other.id).state is SessionState.RUNNING


def _hook(env, project, name: str, payload: Mapping[str, object], session_id: str, key: str):
    hook_env = {**env, "TELECLAUDE_SESSION_ID": session_id, SESSION_KEY: key}
    return hook(
        hook_env, project, name, stdin=json.dumps({**payload, "cwd": str(project), "session_id": "fake"})
    )


@pytest.mark.slow  # the worker runtime in tmux
def test_a_hook_run_with_another_sessions_id_records_nothing_on_it(
    worker_runtime, worker_project, subprocess_env, start_worker
):
    runtime = worker_runtime
    own, target = start_worker("x"), start_worker("y")
    failure = {"hook_event_name": "StopFailure", "error": "rate_limit", "last_assistant_message": "limit"}
    stop = {"hook_event_name": "Stop", "stop_hook_active": False}
    prompt = {"hook_event_name": "UserPromptSubmit", "transcript_path": str(worker_project / "forged.jsonl")}
    for key in (own.key, ""):  # its own session's key, or none
        for name, payload in (("stop-failure", failure), ("stop", stop), ("prompt", prompt)):
            done = _hook(subprocess_env, worker_project, name, payload, target.id, key)
            assert done.returncode == 0 and done.stdout == ""  # a hook never breaks its agent
        assert runtime.wait_for_sessions([target.id], timeout=0.3).events == ()
        stored = runtime.store.get(target.id)
        assert (stored.state, stored.transcript) == (SessionState.RUNNING, "")
        assert _unavailable() == set()

    # with the session's own key, the hook records as it always did
    done = _hook(subprocess_env, worker_project, "stop-failure", failure, target.id, target.key)
    assert done.returncode == 0
    assert runtime.store.get(target.id).state is SessionState.RATE_LIMITED
    assert _unavailable() == {"claude"}
    assert runtime.store.get(own.id).state is SessionState.RUNNING


def test_a_mark_opens_only_with_its_key_for_its_session_and_option():
    mark = seal("k1", "s1", TURN_END_OPTION, "123")
    assert unseal("k1", "s1", TURN_END_OPTION, mark) == "123"
    for key, session_id, option, value in [
        ("k2", "s1", TURN_END_OPTION, mark),  # another session's key
        ("k1", "s2", TURN_END_OPTION, mark),  # made for another session
        ("k1", "s1", STOP_FAILURE_OPTION, mark),  # made for the other mark
        ("k1", "s1", TURN_END_OPTION, mark[:-1] + "4"),  # its payload changed
        ("k1", "s1", TURN_END_OPTION, "123"),  # no seal at all
        ("k1", "s1", TURN_END_OPTION, "\udcff 123"),  # not even text
    ]:
        assert unseal(key, session_id, option, value) is None


@pytest.mark.slow  # the worker runtime in tmux
def test_a_usage_mark_counts_only_sealed_with_the_sessions_key_and_for_its_own_agent(
    worker_runtime, start_worker
):
    """A worker on another computer marks its pane with its CLI's usage (its status line or prompt hook):
    the observer keeps it for the session's own agent, and only from that session's own hook."""
    runtime = worker_runtime
    other, target = start_worker("x"), start_worker("y")
    now = datetime.now(UTC)
    mark = encode_usage([UsageWindow("codex", "5h", 97.0, None, now)])  # names another agent: ignored
    for value in (
        mark,
        seal(other.key, target.id, USAGE_OPTION, mark),
        seal(target.key, target.id, "x", mark),
    ):
        _set_option(runtime, target.pane_id, USAGE_OPTION, value)
        runtime.wait_for_sessions([target.id], timeout=0.5)
        assert AvailabilityStore().usage(datetime.now(UTC)) == {}
        assert runtime.tmux.views()[target.pane_id].usage == ""  # taken away unread
    _set_option(runtime, target.pane_id, USAGE_OPTION, seal(target.key, target.id, USAGE_OPTION, mark))
    runtime.wait_for_sessions([target.id], timeout=0.5)
    (kept,) = AvailabilityStore().usage(datetime.now(UTC))[target.agent]
    assert (kept.window, kept.used_percent) == ("5h", 97.0)
    assert runtime.tmux.views()[target.pane_id].usage == ""  # recorded: taken away


@pytest.mark.slow  # the worker runtime in tmux
def test_a_marked_turn_end_before_the_launcher_saw_its_line_taken_still_ends_the_turn(
    worker_runtime, start_worker, monkeypatch
):
    """A worker on another computer tells its turn's end by a pane mark. On a loaded machine the mark can
    come while the launcher has typed a line but not yet seen it taken (the session not working yet): the
    look that reads the mark keeps it for the launcher, which then ends the turn the line started."""
    runtime = worker_runtime
    target = start_worker("x")
    assert runtime.record_turn_end(target.id)
    type_line = runtime.launcher.panes.type_line

    def answered_at_once(session, *args, **kwargs):
        typed = type_line(session, *args, **kwargs)
        mark = seal(target.key, target.id, TURN_END_OPTION, str(time.time_ns()))
        _set_option(runtime, target.pane_id, TURN_END_OPTION, mark)  # the remote Stop hook's mark
        runtime.observer.refresh([runtime.store.get(target.id)])  # a look before the launcher saves
        return typed

    monkeypatch.setattr(runtime.launcher.panes, "type_line", answered_at_once)
    sent = runtime.send_message(target.id, "Go on.")
    assert not isinstance(sent, Error), sent
    assert runtime.store.get(target.id).state is SessionState.TURN_ENDED
    assert runtime.tmux.views()[target.pane_id].turn_end == ""  # the mark was taken


@pytest.mark.slow  # the worker runtime in tmux
def test_a_status_report_or_tool_use_with_another_sessions_id_records_nothing_on_it(
    worker_runtime, worker_project, subprocess_env, start_worker
):
    """Issue 39.10: `report_status` (here its CLI twin, which the MCP tool shares) and `hook tool-use` took
    any session id: a worker could write another's status or tool activity. Both need the session's key."""
    runtime = worker_runtime
    own, target = start_worker("x"), start_worker("y")
    tool = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}

    def report(key: str) -> subprocess.CompletedProcess[str]:
        env = {**subprocess_env, "TELECLAUDE_SESSION_ID": own.id, SESSION_KEY: key}
        return subprocess.run(
            [sys.executable, "-m", "teleclaude", "sessions", "report", target.id, "forged: all done"],
            cwd=worker_project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    for key in (own.key, ""):  # its own session's key, or none
        done = report(key)
        assert done.stdout.splitlines()[0] == "ERROR: INVALID_ARGUMENT", done.stdout + done.stderr
        done = _hook(subprocess_env, worker_project, "tool-use", tool, target.id, key)
        assert (done.returncode, done.stdout) == (0, "")  # a hook never breaks its agent
        stored = runtime.store.get(target.id)
        assert (stored.status_text, stored.status_at) == ("", None)
        assert runtime.recent_tools([stored]) == {}

    # with the session's own key, both record as they always did
    assert report(target.key).stdout.startswith("OK:")
    assert _hook(subprocess_env, worker_project, "tool-use", tool, target.id, target.key).returncode == 0
    stored = runtime.store.get(target.id)
    assert stored.status_text == "forged: all done"
    assert [line.split(" (")[0] for line in runtime.recent_tools([stored])[target.id]] == ["Bash: rm -rf /"]
    assert runtime.store.get(own.id).status_text == ""


def _channel_hook(env, project, name: str, payload: Mapping[str, object], session, channel, *args: str):
    """A sandboxed worker's hook: its session's key and channel folder, no database (`TURN_END_TO_PANE`)."""
    hook_env = {
        **env,
        "TELECLAUDE_SESSION_ID": session.id,
        SESSION_KEY: session.key,
        sandbox.CHANNEL: str(channel),
        TURN_END_TO_PANE: "1",
    }
    return hook(hook_env, project, name, *args, stdin=json.dumps({**payload, "cwd": str(project)}))


@pytest.mark.slow  # the worker runtime in tmux
def test_a_sandboxed_workers_hooks_keep_its_conversation_and_record_through_its_channel(
    worker_runtime, worker_project, subprocess_env, start_worker, isolated_environment
):
    """What a local tool hook records on the session (the CLI's id of its conversation, its record: what a
    later worker resumes), a sandboxed one leaves in its channel, and a look of the runtime records; a
    record outside the CLI's own state folders is not taken."""
    runtime = worker_runtime
    target = start_worker("x")
    channel = sandbox.open_channel(runtime.store.path, target.id)
    record = isolated_environment / ".claude" / "projects" / "x" / "c0ffee.jsonl"
    tool = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}
    forged = {**tool, "session_id": "c0ffee", "transcript_path": str(isolated_environment / ".ssh" / "k")}
    done = _channel_hook(subprocess_env, worker_project, "tool-use", forged, target, channel)
    assert (done.returncode, done.stdout) == (0, "")
    runtime.list_sessions()
    stored = runtime.store.get(target.id)
    assert (stored.conversation, stored.transcript) == ("c0ffee", "")
    assert [line.split(" (")[0] for line in runtime.recent_tools([stored])[target.id]] == ["Bash: ls"]

    named = {**tool, "session_id": "c0ffee", "transcript_path": str(record)}
    assert _channel_hook(subprocess_env, worker_project, "tool-use", named, target, channel).returncode == 0
    runtime.list_sessions()
    stored = runtime.store.get(target.id)
    assert (stored.conversation, stored.transcript) == ("c0ffee", str(record))
    assert stored.state is SessionState.RUNNING


@pytest.mark.slow  # the worker runtime in tmux
def test_a_sandboxed_workers_prompt_hook_keeps_its_conversation_before_any_tool_call(
    worker_runtime, worker_project, subprocess_env, start_worker, isolated_environment
):
    """A sandboxed CLI killed before its first tool call is resumed as an unsandboxed one: its prompt hook
    leaves its id of the conversation (and its record) in the channel at the first message; a CLI that
    keeps its conversations in a database says no record, and its id is kept all the same."""
    runtime = worker_runtime
    with_record, without = start_worker("x"), start_worker("y")
    record = isolated_environment / ".claude" / "projects" / "x" / "beef.jsonl"
    prompt = {"hook_event_name": "UserPromptSubmit", "prompt": "Build x as the plan says."}
    for session, said in (
        (with_record, {"session_id": "beef", "transcript_path": str(record)}),
        (without, {"session_id": "ses_1"}),
    ):
        channel = sandbox.open_channel(runtime.store.path, session.id)
        done = _channel_hook(subprocess_env, worker_project, "prompt", {**prompt, **said}, session, channel)
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    runtime.list_sessions()
    stored = runtime.store.get(with_record.id)
    assert (stored.conversation, stored.transcript) == ("beef", str(record))
    assert runtime.store.get(without.id).conversation == "ses_1"


@pytest.mark.slow  # the worker runtime in tmux
def test_a_sandboxed_workers_turn_end_with_its_command_line_as_the_prompt_errs_its_session(
    worker_runtime, worker_project, subprocess_env, start_worker
):
    """A CLI that did not know the role command sends the line as typed to the model; its stop hook (one
    whose input carries the prompt) tells it through the channel, and the session errs as a local one
    would, rather than ending a turn that never did the step."""
    runtime = worker_runtime
    honest, unknown = start_worker("x"), start_worker("y")
    profile = runtime.config.profiles[unknown.agent]
    stop = {"hook_event_name": "AfterAgent", "stop_hook_active": False, "session_id": "s"}
    for session, prompt in ((honest, "Build x as the plan says."), (unknown, None)):
        typed = profile.slash_command(session.command, session.args)
        channel = sandbox.open_channel(runtime.store.path, session.id)
        payload = {**stop, "prompt": typed if prompt is None else prompt}
        done = _channel_hook(
            subprocess_env, worker_project, "stop", payload, session, channel, "--agent", "gemini"
        )
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    runtime.list_sessions()
    assert runtime.store.get(honest.id).state is SessionState.TURN_ENDED
    assert runtime.store.get(unknown.id).state is SessionState.ERRORED
