"""The contract every agent CLI of the registry keeps under teleclaude's runtime, each scenario written once
and run with each driver's real CLI against the scripted model server. A driver whose CLI lacks a capability
says so in its `lacks` (agents/profile.py): the scenario skips with that reason. What only one CLI does (its
dialogs, its retry habits, its project-scope layout, its orchestrator's MCP names) is in test_NAME.py.

What differs between the CLIs' answers (the name of their shell tool, how their command reads expanded, the
limit their provider refuses with) is `SEEN` below: facts of each CLI, as these tests saw them."""

from __future__ import annotations

import logging
import os
import re
import signal
import sqlite3
import threading
import time
import uuid
from contextlib import closing
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.agents import NAMES, PROFILES
from teleclaude.agents.profile import Capability
from teleclaude.config.spend import SpendConfig
from teleclaude.demo.model_server import Fail, Text, edit_and_commit, shell, tool_result_sent
from teleclaude.demo.workers import git
from teleclaude.errors import Error
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime import continuing, spend
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started
from teleclaude.runtime.launcher import Warm

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .conftest import build_row_first, codex_keeps_todays_clock, start
from .over_ssh import build_over_ssh
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)
from .watching import events_until, screen_shows, sessions_list, turn_ended, with_profile


@dataclass(frozen=True)
class Limit:
    """The limit a CLI's provider refuses with in a limit scenario, and what the runtime makes of it."""

    failure: Fail
    reason: str  # how the session's rate_limited event starts
    until: tuple[timedelta, timedelta] = (timedelta(0), timedelta(days=1))  # after the session's start
    source: str = ""  # in the event's detail: where the signal was read
    shows: str = ""  # what stays on its screen, never answered
    refused: int | None = None  # the requests refused (its own retries included)


@dataclass(frozen=True)
class Seen:
    expanded: tuple[str, ...]  # in the first turn's request: the role command, expanded with its arguments
    shell_tool: str  # the shell tool offered to the model
    tool_row: str  # the name its tool hook gives that tool (`teleclaude sessions list`)
    limit: Limit  # with everything it shows and runs
    hook_limit: Limit | None = None  # with no screen pattern: its own hook or event alone (LIMIT_BY_HOOK)
    # one of these is offered in the first turn (empty: the CLI may send it before its MCP servers connect)
    mcp: tuple[str, ...] = ()
    # placeholders the CLI substitutes: none left in the first turn (a codex skill keeps `$ARGUMENTS`: the
    # model reads the arguments after the skill's name)
    substituted: tuple[str, ...] = ("$ARGUMENTS", "{{args}}")


BUILDER = "You are the **builder** for the work item"
# claude: 429 with a reset 3.5 h ahead (an API key's login prints no reset: the default pause applies)
CLAUDE_429 = Limit(Fail("rate_limit", resets_in=3 * 3600 + 30 * 60), "rate_limited")
# codex: HTTP 429 usage_limit_reached, "try again at 2:21 AM." (to the minute)
CODEX_USAGE = Limit(
    Fail("session_limit", resets_in=3 * 3600),
    "quota_exhausted",
    until=(timedelta(hours=3, minutes=-2), timedelta(hours=3, minutes=2)),
)
# opencode: a 429 it retries five times (honouring Retry-After), then gives up; the wait its error names
# ("Please try again in 20s."), from when it gave up
OPENCODE_429 = Limit(
    Fail("rate_limit", repeat=10, retry_after=1), "rate_limited", until=(timedelta(0), timedelta(minutes=10))
)
SEEN = {
    "claude": Seen(
        (f"{BUILDER} `greeting`",),
        "Bash",
        "Bash",
        CLAUDE_429,
        CLAUDE_429,  # its StopFailure hook
        # its MCP servers connect in the background: until then 2.1.197 offered WaitForMcpServers; 2.1.332
        # defers MCP tools behind ToolSearch (test_claude.until_offered)
        mcp=("mcp__teleclaude__teleclaude__next_work", "WaitForMcpServers", "ToolSearch"),
    ),
    "codex": Seen(
        # a skill: the user's message names it with the arguments; the skill's text keeps `$ARGUMENTS`
        ("$next-build greeting", f"{BUILDER} `$ARGUMENTS`", "`$ARGUMENTS` stands for the text after"),
        "exec_command",
        "Bash",
        CODEX_USAGE,
        # the typed error in its rollout file, found through its UserPromptSubmit hook
        replace(CODEX_USAGE, source="codex_error_info"),
        substituted=(),
    ),
    "gemini": Seen(
        (f"{BUILDER} `greeting`",),
        "run_shell_command",
        "run_shell_command",
        # "Usage limit reached for gemini-3.8-flash." in a Keep trying / Stop dialog; no reset is printed for
        # a daily quota, so the default pause applies
        Limit(
            Fail("quota", repeat=20),
            "quota_exhausted",
            until=(timedelta(minutes=50), timedelta(days=1)),
            shows="Keep trying",
        ),
    ),
    "opencode": Seen(
        (f"{BUILDER} `greeting`",),
        "bash",
        "bash",
        OPENCODE_429,
        replace(OPENCODE_429, refused=6),  # its plugin's session.error (statusCode 429), after 1 + 5 tries
        mcp=("teleclaude_teleclaude__next_work",),
    ),
}


def drivers(*capabilities: Capability):
    """Parametrise over the registry; a driver that lacks one of `capabilities` skips with its own reason."""
    params = []
    for name in NAMES:
        lacked = [PROFILES[name].lacks[c] for c in capabilities if c in PROFILES[name].lacks]
        marks = [pytest.mark.skip(reason=f"{name}: {lacked[0]}")] if lacked else []
        params.append(pytest.param(name, marks=marks))
    return pytest.mark.parametrize("agent", params)


@pytest.fixture
def agent_runtime(agent, request):
    """The agent's CLI on PATH, its HOME set up and teleclaude installed (conftest's `{agent}_runtime`)."""
    return request.getfixturevalue(f"{agent}_runtime")


def test_every_driver_has_what_its_cli_was_seen_to_do():
    assert set(SEEN) == set(NAMES)


@drivers(Capability.UNATTENDED_START, Capability.TURN_ENDS)
def test_started_ahead_it_waits_untouched_then_takes_its_command_and_twenty_turns_end_by_its_own_hook(
    agent, agent_runtime, project, model_server
):
    """`teleclaude run`'s warm start: the CLI started to its prompt and left there (its screen may change,
    its MCP servers connect), nothing typed into it, then its command typed without a second
    `prompt_stable` wait. No dialog to answer; `/next-build greeting` (a skill for codex) expanded by the
    CLI from the file `teleclaude install` wrote; that turn and nineteen more each end by the CLI's own
    hook (the idle rule is 300 s, conftest.SETTINGS: each of these turn ends can only be the hook's). One
    start for both (a start is most of a scenario's CPU, opencode's ~15 s)."""
    runtime, seen = agent_runtime, SEEN[agent]
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    warm = runtime.warm(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(warm, Warm), warm
    assert runtime.store.get(warm.session.id).state is SessionState.PENDING
    time.sleep(5)
    assert not model_server.turns()  # nothing was typed into it
    started = runtime.deliver_warm(warm)
    assert isinstance(started, Started), started
    assert started.session.state is SessionState.RUNNING
    turn = model_server.wait_for(lambda r: r.turn, timeout=90)
    sent = turn.text()
    for expanded in seen.expanded:
        assert expanded in sent, f"the user's message: {turn.last_user_text()[-2000:]!r}"
    for placeholder in seen.substituted:
        assert placeholder not in sent
    assert seen.shell_tool in turn.tools()
    if seen.mcp:
        assert set(seen.mcp) & set(turn.tools()), turn.tools()
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    # the hook may end the turn before the CLI has drawn the answer: a fast hook on a loaded machine did
    screen_shows(runtime, started.session, "DONE: next-build greeting")
    details = [event.detail for event in events]
    for turn_number in range(2, 21):
        said = runtime.send_message(started.session.id, f"Turn {turn_number}: say done.")
        assert not isinstance(said, Error), said
        details += [event.detail for event in turn_ended(runtime, started.session.id)]
    assert details == ["stop hook"] * 20
    assert len(model_server.turns()) == 20


def fallback_row(project, agent: str) -> str:
    """The build row `agent, then the next driver` (returned), and the build step given to `agent`."""
    then = NAMES[(NAMES.index(agent) + 1) % len(NAMES)]
    build_row_first(project, agent, then)
    first = next_work(cwd=project)
    assert isinstance(first, Dispatch) and first.agent == agent, first
    return then


def limit_seen(
    agent: str,
    runtime,
    project,
    model_server,
    limit: Limit,
    session,
    then: str,
    since: datetime | None = None,
) -> None:
    """The provider refused `session` with `limit` (its turn sent `since`, by default its start): the
    session is rate_limited, the agent unavailable until the reset, and the next step goes to the next
    driver (`then`)."""
    events = events_until(runtime, session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith(limit.reason), events[-1].detail
    assert limit.source in events[-1].detail, events[-1].detail
    stored = runtime.store.get(session.id)
    assert stored is not None and stored.state is SessionState.RATE_LIMITED
    until = runtime.context.availability.unavailable(runtime.clock())[agent].until
    earliest, latest = limit.until
    began = since or session.created_at
    assert began + earliest < until < began + latest, until
    if limit.refused is not None:
        assert len([r for r in model_server.turns() if r.answer.startswith("fail")]) == limit.refused
    if limit.shows:  # a dialog may be read by its title row before its options are drawn
        screen_shows(runtime, session, limit.shows)
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == then, fallback


@drivers(Capability.TOOL_ACTIVITY, Capability.TOKENS)
def test_its_tool_uses_show_a_refused_stop_makes_it_commit_its_tokens_are_recorded_its_hook_tells_a_limit(
    agent, agent_runtime, project, model_server, isolated_environment, monkeypatch
):
    """Two shell calls through the CLI's own shell tool, the second editing a file and committing it: each is
    a row of `teleclaude sessions list` under its tool's name, the long one cut short. The commit is the
    user's, whose name and email are in ~/.gitconfig alone, as most users keep them: gemini 0.61 runs its
    shell commands with GIT_CONFIG_GLOBAL=/dev/null, which hid them ("unable to auto-detect email
    address"); every CLI's worker commits as the user all the same. The scripted model reports its own token
    numbers on every answer, different each time; after each of two turns the session's recorded use (read
    by its stop hook from the CLI's own record, and read again by the runtime's looks after the turn: claude
    may write its last answer after its Stop hook read the record): their sum. The second turn leaves
    todos/greeting/ dirty: its stop hook refuses the stop (`refused_stop`). The third is refused by its
    provider with no screen pattern of its limits (the profile's `limit_patterns` emptied): its own hook or
    event alone tells the limit (`hook_limit`). One worker for all three (a start is most of a scenario's
    CPU)."""
    runtime, row = agent_runtime, SEEN[agent].tool_row
    for variable in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(variable)  # the tests' own identity: this user has none but their ~/.gitconfig
    git(project, "config", "--unset", "user.name")
    git(project, "config", "--unset", "user.email")
    (isolated_environment / ".gitconfig").write_text(
        "[user]\n\tname = Night Owl\n\temail = owl@example.invalid\n"
    )
    model_server.add(
        shell("git status --short", "Look at the worktree"),
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    started = start(runtime, project, agent)
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "Build greeting" in git(project, "log", "--oneline", "-1")
    assert (project / "src" / "greeting.py").read_text() == 'print("hello")\n'
    lines = runtime.recent_tools(runtime.list_sessions())[started.session.id]
    assert len(lines) == 2 and lines[0].startswith(f"{row}: git status --short ("), lines
    assert lines[1].startswith(f"{row}: mkdir -p src && printf"), lines
    assert all(re.search(r" \(\d+[smh] ago\)$", line) for line in lines), lines
    listed = sessions_list(project)
    assert f"    {row}: git status --short (" in listed, listed
    who = "Night Owl <owl@example.invalid>"
    assert git(project, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == f"{who}|{who}"
    for turn in (1, 2):
        if turn == 2 and Capability.REFUSED_STOP in PROFILES[agent].lacks:
            sent = runtime.send_message(started.session.id, "Turn 2: say done.")
            assert not isinstance(sent, Error), sent
            assert turn_ended(runtime, started.session.id)
        elif turn == 2:
            refused_stop(runtime, project, model_server, started.session.id)
        want = model_server.sent_total()
        tokens = recorded_until(runtime, started.session.id, want)
        assert (tokens.input, tokens.cached, tokens.output) == (want.input, want.cached, want.output), turn
        assert tokens.reasoning in (None, want.reasoning)  # claude's record has no reasoning count
    assert len(model_server.turns()) >= 4
    if agent == "claude":  # its status line says what the session cost: kept as reported, never estimated
        used = reported_cost(runtime, runtime.store.get(started.session.id))
        assert used.usd > 0 and not used.estimate and "(estimate)" not in used.text(), used
    if Capability.LIMIT_BY_HOOK not in PROFILES[agent].lacks:
        hook_limit(agent, runtime, project, model_server, started.session)


def hook_limit(agent: str, runtime, project, model_server, session) -> None:
    """A turn of `session` its provider refuses, no screen pattern of its limits left (the profile's
    `limit_patterns` emptied): the CLI's hook or event is the signal (`limit_seen`)."""
    codex_keeps_todays_clock(agent)
    limit = SEEN[agent].hook_limit
    assert limit is not None, f"{agent} tells a limit by its hook: what its provider refuses with is in SEEN"
    with_profile(runtime, agent, limit_patterns=())
    then = fallback_row(project, agent)
    model_server.add(limit.failure)
    since = runtime.clock()
    sent = runtime.send_message(session.id, "Turn 3: say done.")
    assert not isinstance(sent, Error), sent
    limit_seen(agent, runtime, project, model_server, limit, session, then, since)


def refused_stop(runtime, project, model_server, session_id: str) -> None:
    """A turn whose stop the stop hook refuses, uncommitted work left (todos/greeting/ dirty): the CLI goes
    on with the refusal as the model's next prompt, and commits."""
    asked = len(model_server.turns())
    model_server.add(
        shell("printf 'notes\\n' > todos/greeting/notes.md", "Write notes"),
        Text("Notes written."),  # the turn would end here: the hook refuses
        shell("git add todos && git commit -q -m 'Add greeting notes'", "Commit the notes"),
        Text("Committed."),
    )
    sent = runtime.send_message(session_id, "Turn 2: write the notes.")
    assert not isinstance(sent, Error), sent
    assert [e.detail for e in turn_ended(runtime, session_id)] == ["stop hook"]
    assert "Add greeting notes" in git(project, "log", "--oneline", "-1")
    assert git(project, "status", "--porcelain", "todos") == ""
    refused = model_server.turns()[asked + 2]  # the request after "Notes written."
    assert "todos/greeting/notes.md" in refused.text()  # the hook's refusal reached the model


@drivers(Capability.OVER_SSH)
def test_over_ssh_it_commits_and_its_own_hook_ends_the_turn(agent, remote_clone, model_server, project, sshd):
    """The build step on the loopback computer (over_ssh.py): the CLI edits and commits there, its hook marks
    the pane, the observer reads the mark over ssh and the commit comes back to this machine."""
    remote = remote_clone(agent)
    build_over_ssh(agent, model_server, project, remote, sshd)


def reported_cost(runtime, session, seconds: float = 60.0):
    """The session's use priced, once its CLI reported a cost (its status line runs as its screen changes)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        readings = runtime.store.spend_readings([session.id])
        if readings and readings[-1][2].cost_usd is not None:
            return spend.per_session(runtime.store, [session], SpendConfig())[session.id]
        time.sleep(0.1)
    pytest.fail("its CLI never reported what the session cost")


def recorded_until(runtime, session_id: str, want, seconds: float = 60.0):
    """The session's recorded use once it equals what the server sent (the runtime's looks read the CLI's
    record again when it changes), or the last one after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        readings = runtime.store.spend_readings([session_id])
        tokens = readings[-1][2] if readings else None
        if tokens and (tokens.input, tokens.cached, tokens.output) == (want.input, want.cached, want.output):
            return tokens
        if time.monotonic() > deadline:
            assert tokens is not None, "no reading of what the session used"
            return tokens
        runtime.list_sessions()  # a look
        time.sleep(0.1)


def written(runtime, session_id: str, seconds: float = 60.0) -> None:
    """Waits until the CLI's record of the conversation holds the first tool's result: a CLI writes its record
    a moment after the request that carries it (claude batches its writes), and a kill before that loses the
    call (its resume then drops the call it has no result of). The runtime looks meanwhile: a sandboxed
    worker's hooks name its record in its channel, which a look keeps on its session."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        session = runtime.store.get(session_id)
        said = record_of(runtime, session) if session else ""
        if "todos/greeting/notes.md" in said and any(result in said for result in RESULTS):
            return
        runtime.list_sessions()  # a look
        time.sleep(0.1)
    pytest.fail("the CLI's record of the conversation never held the first tool's result")


def holds(runtime, session_id: str, words: str, seconds: float = 60.0) -> None:
    """Waits until the CLI's record of the session's conversation holds `words` (it writes a moment after
    the request that carries them)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        session = runtime.store.get(session_id)
        if session and words in record_of(runtime, session):
            return
        runtime.list_sessions()  # a look: a sandboxed worker's prompt hook names its record in its channel
        time.sleep(0.1)
    pytest.fail(f"the CLI's record of the conversation never held {words!r}")


# how a tool's result reads in each CLI's record: claude's, codex's, gemini's, opencode's (a part's state)
RESULTS = ("tool_result", "function_call_output", "functionResponse", '"status":"completed"')


def cli_database(runtime, agent: str) -> Path | None:
    """The database a CLI keeps its conversations in (opencode's), when not in a file each."""
    resume = PROFILES[agent].resume
    return Path(runtime.context.env["HOME"]) / resume.database if resume and resume.database else None


def record_of(runtime, session) -> str:
    """What the CLI's record of the session's conversation says so far: its transcript file, or its rows in
    the CLI's database (every part of every message of the conversation)."""
    database = cli_database(runtime, session.agent)
    if database is None:
        record = Path(session.transcript) if session.transcript else None
        return record.read_text(errors="replace") if record and record.is_file() else ""
    if not session.conversation or not database.is_file():
        return ""
    with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as connection:
        parts = connection.execute("SELECT data FROM part WHERE session_id = ?", (session.conversation,))
        return "\n".join(str(data) for (data,) in parts)


def forget(runtime, left) -> None:
    """The CLI's record of `left`'s conversation deleted, as a user deletes it: its transcript file, or its
    row of the CLI's database."""
    database = cli_database(runtime, left.agent)
    if database is None:
        Path(left.transcript).unlink()
        return
    with closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("DELETE FROM session WHERE id = ?", (left.conversation,))


def killed_mid_build_turn(runtime, project, model_server, agent: str):
    """A build worker whose CLI is killed (SIGKILL) after its first tool call, while its model's next answer
    is held: its session is through with the CLI's exit. The worker's session, as stored then."""
    held = threading.Event()
    model_server.add(
        shell("printf 'first\\n' > todos/greeting/notes.md", "Write the first notes"),
        Text("never sent: the CLI is killed before", hold=held),
    )
    first = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(first, Started), first
    model_server.wait_for(lambda r: r.turn and tool_result_sent(r.body or {}), timeout=120)
    written(runtime, first.session.id)
    pane_pid = first.session.pane_pid
    for child in Path(f"/proc/{pane_pid}/task/{pane_pid}/children").read_text().split():
        os.kill(int(child), signal.SIGKILL)
    events_until(runtime, first.session.id, EventKind.EXITED)
    held.set()
    left = runtime.store.get(first.session.id)
    assert left is not None and left.state is SessionState.ERRORED, left
    return left


@drivers(Capability.RESUME)
def test_killed_before_its_first_tool_call_it_resumes_and_a_resume_the_cli_refuses_is_a_fresh_start(
    agent, agent_runtime, project, model_server, caplog, monkeypatch
):
    """The CLI is killed while its model's first answer is held: no tool hook ever ran, yet its conversation
    was on record from its first message (its prompt hook), so the next worker of the same agent resumes it:
    the first request after the restart carries the role command of the first, and the line saying what
    happened; the build is then delivered. That worker ended, the step is given again with a conversation
    id of the CLI's form it does not know (its file there, its conversation not): the CLI refuses ("No
    conversation found"), and the worker is started fresh, never left at a stuck pane (`refused_resume`).
    """
    runtime = agent_runtime
    held = threading.Event()
    model_server.add(Text("never sent: the CLI is killed before", hold=held))
    first = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(first, Started), first
    model_server.wait_for(lambda r: r.turn and BUILDER in r.text(), timeout=120)
    holds(runtime, first.session.id, "greeting")  # its record has the first message (no tool result)
    pane_pid = first.session.pane_pid
    for child in Path(f"/proc/{pane_pid}/task/{pane_pid}/children").read_text().split():
        os.kill(int(child), signal.SIGKILL)
    events_until(runtime, first.session.id, EventKind.EXITED)
    held.set()
    left = runtime.store.get(first.session.id)
    assert left is not None and left.conversation, left
    assert runtime.store.recent_tool_uses([left.id]).get(left.id, ()) == ()  # it never called a tool
    before = len(model_server.turns())
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    again = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(again, Started), again
    assert again.session.resumed_from == left.id and again.session.conversation == left.conversation
    resumed = model_server.wait_for(lambda r: r.turn and r not in model_server.turns()[:before], timeout=120)
    assert BUILDER in resumed.text() and "Your session was interrupted" in resumed.text()
    assert [e.detail for e in turn_ended(runtime, again.session.id)] == ["stop hook"]
    assert "Build greeting" in git(project, "log", "--oneline", "-1")
    refused_resume(runtime, project, model_server, ended(runtime, again.session.id), caplog, monkeypatch)


@drivers(Capability.RESUME)
def test_killed_mid_build_turn_it_resumes_in_place_of_the_worker_ahead_and_once_deleted_starts_fresh(
    agent, agent_runtime, project, model_server, caplog
):
    """The same agent takes up the step; `teleclaude run` has started a worker ahead (fresh) for it: given
    the step, the fresh worker is ended and the conversation resumed, as a start would (a start after a kill
    without one ahead: test_killed_before_its_first_tool_call_…). The first request after the restart
    carries the earlier turns (the role command expanded, the first tool call and its result) and the one
    line saying what happened; the build is then delivered. That worker ended and its conversation deleted
    (`forget`), the step given again is a fresh start, logged."""
    runtime = agent_runtime
    left = killed_mid_build_turn(runtime, project, model_server, agent)
    assert left.conversation and (left.transcript or cli_database(runtime, agent)), left
    warm = runtime.warm(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(warm, Warm), warm
    before = len(model_server.turns())
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    again = runtime.deliver_warm(warm)
    assert isinstance(again, Started), again
    assert again.session.id != warm.session.id and again.session.resumed_from == left.id
    assert again.session.conversation == left.conversation
    assert runtime.store.get(warm.session.id).state is SessionState.CANCELLED
    resumed = model_server.wait_for(lambda r: r.turn and r not in model_server.turns()[:before], timeout=120)
    sent = resumed.text()
    assert BUILDER in sent and "printf 'first" in sent and "todos/greeting/notes.md" in sent
    assert "Your session was interrupted" in sent  # (codex adds the skill it names after it)
    assert [e.detail for e in turn_ended(runtime, again.session.id)] == ["stop hook"]
    assert "Build greeting" in git(project, "log", "--oneline", "-1")
    assert f'resumed_from="tc-{left.id}"' in sessions_list(project)
    gone = ended(runtime, again.session.id)
    forget(runtime, gone)
    before = len(model_server.turns())
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello again")', "Build greeting again"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    caplog.clear()  # what this start logs
    with caplog.at_level(logging.INFO, logger="teleclaude.runtime"):
        fresh = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(fresh, Started), fresh
    assert fresh.session.resumed_from == ""
    assert [r.message for r in caplog.records if "fresh start" in r.message] == [
        f"next-build greeting: a fresh start: {gone.id}'s conversation is gone (its file was deleted)"
    ]
    first = model_server.wait_for(lambda r: r.turn and r not in model_server.turns()[:before], timeout=120)
    assert "printf 'first" not in first.text()  # the conversation's calls are not in a new one
    assert [e.detail for e in turn_ended(runtime, fresh.session.id)] == ["stop hook"]
    assert "Build greeting again" in git(project, "log", "--oneline", "-1")


def ended(runtime, session_id: str):
    """The session ended as `run` ends a worker whose turn ended (its CLI gone), as stored then."""
    assert not isinstance(runtime.end_session(session_id), Error)
    session = runtime.store.get(session_id)
    assert session is not None and session.state.is_final and session.conversation, session
    return session


def refused_resume(runtime, project, model_server, left, caplog, monkeypatch) -> None:
    """The step `left` ended taken up with a conversation id of its CLI's form the CLI does not know: the
    CLI refuses, and the worker is started fresh (logged once), its build delivered."""
    conversation = str(uuid.uuid4())
    if cli_database(runtime, left.agent):  # its database is read first: a conversation deleted after that
        conversation = f"ses_{uuid.uuid4().hex[:26]}"
        monkeypatch.setattr(continuing, "on_record", lambda *_: True)
    unknown = replace(left, conversation=conversation)
    assert runtime.store.save(unknown, expect=left.state) is not None
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello again")', "Build greeting again"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    caplog.clear()  # what this start logs
    with caplog.at_level(logging.INFO, logger="teleclaude.runtime"):
        again = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), left.agent, "med"))
    assert isinstance(again, Started), again
    assert again.session.resumed_from == ""
    assert len([r for r in caplog.records if "failed, a fresh start" in r.message]) == 1, caplog.records
    assert [e.detail for e in turn_ended(runtime, again.session.id)] == ["stop hook"]
    assert "Build greeting again" in git(project, "log", "--oneline", "-1")


@drivers(Capability.LIMIT)
def test_a_limit_makes_it_unavailable_the_next_step_falls_back_and_the_same_agent_resumes_after_it(
    agent, agent_runtime, project, model_server
):
    """The provider refuses the build's second request with the CLI's limit: the session is rate_limited,
    the agent unavailable until the reset, and the next step goes to the next driver (`limit_seen`). Then,
    for a driver that resumes, `run` ends the limited worker and, once the reset is waited out, gives the
    step to the same agent again: it resumes the conversation. The CLI paints the conversation again, the
    old limit error in it: not a new limit. One worker limited for both (a start is most of a scenario's
    CPU)."""
    runtime, limit = agent_runtime, SEEN[agent].limit
    then = fallback_row(project, agent)
    model_server.add(
        shell("printf 'first\\n' > todos/greeting/notes.md", "Write the first notes"), limit.failure
    )
    first = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(first, Started), first
    limit_seen(agent, runtime, project, model_server, limit, first.session, then)
    if Capability.RESUME in PROFILES[agent].lacks:
        return
    codex_keeps_todays_clock(agent)
    written(runtime, first.session.id)  # a loaded CLI may show the limit before it records the call
    runtime.end_session(first.session.id)  # as `run` ends a limited worker
    model_server.clear()  # its reset waited out: the refusals the CLI did not ask for are over
    before = len(model_server.turns())
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    again = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), agent, "med"))
    assert isinstance(again, Started), again
    assert again.session.resumed_from == first.session.id
    resumed = model_server.wait_for(lambda r: r.turn and r not in model_server.turns()[:before], timeout=120)
    sent = resumed.text()
    assert "printf 'first" in sent and "usage limit" in sent
    assert [e.detail for e in turn_ended(runtime, again.session.id)] == ["stop hook"]
    assert "Build greeting" in git(project, "log", "--oneline", "-1")
