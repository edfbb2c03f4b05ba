"""The real Codex CLI (0.169), started by teleclaude's runtime, against the scripted Responses API: what only
codex does (its refused `/prompts:`, its hooks review, its retries and typed errors, its busy screen, its MCP
namespace, its project-scope files, its alternate screen). What every CLI does is test_contract.py."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from teleclaude.adapters import sandbox
from teleclaude.adapters.tmux import TURN_END_OPTION
from teleclaude.demo.model_server import Fail, Step, Text, mcp, shell
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started, StartRequest
from teleclaude.setup.install import Scope, install

from .conftest import build_row_first, codex_keeps_todays_clock, start, trusted
from .watching import events_until, screen, screen_shows, with_profile


def test_a_command_codex_refuses_errs_the_session_with_its_words(codex, project, model_server):
    """Codex 0.169 has no custom prompts: `/prompts:next-build` is refused and nothing reaches the model. That
    is an error of the session, never a turn end (the step never ran)."""
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text() + '\n[runtime.agents.codex]\ncommand_sign = "/"\ncommand_prefix = "prompts:"\n'
    )
    trusted(project)
    runtime = open_runtime(project)
    started = runtime.run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), "codex", "med")
    )
    if isinstance(started, Started):  # the refusal came after the Enter was seen to be taken
        events = events_until(runtime, started.session.id, EventKind.ERRORED)
        assert [e.kind for e in events] == [EventKind.ERRORED]
        said, session_id = events[0].detail, started.session.id
    else:  # codex kept the refused text in its input box: the delivery itself failed
        assert started.code is ErrorCode.INVALID_ARGUMENT, started
        said, session_id = started.message, runtime.store.sessions()[0].id
    assert "Unrecognized command '/prompts:next-build'" in said
    errored = runtime.store.get(session_id)
    assert errored is not None and errored.state is SessionState.ERRORED
    assert not model_server.turns()


def test_the_hooks_review_dialog_is_reported_never_answered(codex, project):
    """Without --dangerously-bypass-hook-trust, codex asks to review the hook `teleclaude install` wrote."""
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text()
        + '\n[runtime.agents.codex]\nargs = ["--dangerously-bypass-approvals-and-sandbox", "--no-daemon"]\n'
    )
    trusted(project)
    runtime = open_runtime(project)
    started = runtime.run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), "codex", "med")
    )
    assert isinstance(started, Error) and started.code is ErrorCode.WORKER_BLOCKED, started
    assert "hooks review" in started.message


def test_a_429_codex_gave_up_on_makes_it_unavailable_and_the_next_step_falls_back(
    codex_runtime, project, model_server
):
    """A 429 codex retries with its own defaults, then gives up on. (Its usage limit: test_contract.py.)"""
    build_row_first(project, "codex", "gemini")
    first = next_work(cwd=project)
    assert isinstance(first, Dispatch) and first.agent == "codex"
    model_server.add(Fail("rate_limit", repeat=10, retry_after=1))
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith("rate_limited"), events[-1].detail
    assert "codex" in codex_runtime.context.availability.unavailable(codex_runtime.clock())
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "gemini", fallback


def test_a_transient_429_codex_retries_is_not_a_limit(codex_runtime, project, model_server):
    """While codex retries it shows `└ Exceeded retry limit, last status: 429 …` under `Server is busy,
    reconnecting 1/5`: not yet a limit. It got through: the turn ends, and codex stays available."""
    model_server.add(Fail("rate_limit", repeat=2, retry_after=1), Text("DONE: next-build greeting"))
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [e.kind for e in events] == [EventKind.TURN_ENDED]
    assert "codex" not in codex_runtime.context.availability.unavailable(codex_runtime.clock())
    assert [r.answer for r in model_server.turns()][-1] == "text"


def test_codex_retrying_a_503_with_its_defaults_is_still_seen_as_limited(
    codex_runtime, project, model_server
):
    """With codex's own retry settings (no request_max_retries/stream_max_retries): the server keeps
    refusing, codex retries under `Reconnecting... k/5`, then gives up with a `■` row: codex is
    unavailable. Its retries honour the server's retry-after: at 0 s the same 31 requests come at once."""
    model_server.add(Fail("unavailable", repeat=1000, retry_after=0))
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith("overloaded"), events[-1].detail
    assert "codex" in codex_runtime.context.availability.unavailable(codex_runtime.clock())


FEW_RETRIES = (
    "-c",
    "model_providers.scripted.request_max_retries=0",
    "-c",
    "model_providers.scripted.stream_max_retries=1",
)


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Fail("server_error", repeat=50, retry_after=1), "overloaded"),
        (Fail("unavailable", repeat=50, retry_after=1), "overloaded"),
    ],
    ids=["500-given-up", "503-given-up"],
)
def test_a_5xx_codex_gives_up_on_makes_it_unavailable(
    codex_runtime, project, model_server, isolated_environment, failure, reason
):
    """From the screen alone (no UserPromptSubmit hook, so no typed error): the `■` row codex gave up with."""
    hooks_file = isolated_environment / ".codex" / "hooks.json"
    hooks = json.loads(hooks_file.read_text())
    del hooks["hooks"]["UserPromptSubmit"]
    hooks_file.write_text(json.dumps(hooks))
    profile = codex_runtime.config.profiles["codex"]
    with_profile(codex_runtime, "codex", args=(*profile.args, *FEW_RETRIES))
    build_row_first(project, "codex", "gemini")
    model_server.add(failure)
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith(reason), events[-1].detail
    assert ": ■ " in events[-1].detail  # the error codex gave up with, not one it was retrying
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "gemini", fallback


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Fail("rate_limit", repeat=50, retry_after=1), "rate_limited"),  # {"response_too_many_…": {…: 429}}
        (Fail("unavailable", repeat=50, retry_after=1), "overloaded"),  # "server_overloaded"
    ],
    ids=["429-given-up", "503-given-up"],
)
def test_codexs_typed_error_alone_makes_it_unavailable(codex_runtime, project, model_server, failure, reason):
    """No screen pattern: the `codex_error_info` codex writes to its rollout file (found through the
    UserPromptSubmit hook `teleclaude install` adds) is the signal. (Its usage limit so: test_contract.py.)"""
    codex_keeps_todays_clock("codex")
    profile = codex_runtime.config.profiles["codex"]
    with_profile(codex_runtime, "codex", limit_patterns=(), args=(*profile.args, *FEW_RETRIES))
    model_server.add(failure)
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith(reason), events[-1].detail
    assert "codex_error_info" in events[-1].detail
    until = codex_runtime.context.availability.unavailable(codex_runtime.clock())["codex"].until
    if reason == "quota_exhausted":  # the reset its message names ("try again at 5:29 PM.")
        expected = started.session.created_at + timedelta(seconds=failure.resets_in)
        assert abs(until - expected) < timedelta(minutes=2)


# --- the busy screen -------------------------------------------------------------------------------------


def test_a_busy_codex_is_not_idle_though_its_prompt_line_shows(codex_runtime, project, model_server):
    """`› Ask Codex to do anything` stays on screen while codex works (`• Working (3s • esc to interrupt)`):
    with the idle rule at 0.1 s, a held model turn must still not end by it."""
    codex_runtime.context.config = replace(codex_runtime.config, idle_threshold=0.1, poll_interval=0.05)
    hold = threading.Event()
    model_server.add(Text("DONE: next-build greeting", hold=hold))
    started = start(codex_runtime, project, "codex")
    model_server.wait_for(lambda r: r.turn, timeout=90)
    screen_shows(codex_runtime, started.session, "esc to interrupt")
    held = []
    for _ in range(4):  # 4 s of a busy screen whose prompt line shows
        held += codex_runtime.wait_for_sessions([started.session.id], timeout=1).events
    hold.set()
    assert not held, [(e.kind.value, e.detail) for e in held]
    assert [e.kind for e in events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)] == [
        EventKind.TURN_ENDED
    ]


def slowed_launcher(runtime, monkeypatch) -> None:
    """The launcher on a loaded machine: it sees the Enter of a line it typed taken only once the turn the
    line started is over and codex's Stop hook has run (the hook saved the session's row, or left its mark on
    the pane or in the sandbox's channel for the runtime's next look; or 10 s went by)."""
    press_enter = runtime.launcher.panes.press_enter
    mark = TURN_END_OPTION.lstrip("@")

    def hook_ran(session) -> bool:
        if runtime.store.get(session.id).version != session.version:
            return True
        view, _ = runtime.tmux.glance(session.pane_id)
        return bool(view and view.turn_end) or mark in sandbox.listing(runtime.store.path, session.id)

    def late(session, *args, **kwargs):
        taken = press_enter(session, *args, **kwargs)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not hook_ran(session):
            time.sleep(0.05)
        return taken

    monkeypatch.setattr(runtime.launcher.panes, "press_enter", late)


@pytest.mark.parametrize("before", ["first-turn", "turn-ended", "rate-limited"])
def test_a_turn_over_before_the_launcher_saw_its_line_taken_still_ends(
    codex_runtime, project, model_server, monkeypatch, before
):
    """A turn can end (`Worked for <1s`) before the launcher has seen its line taken and made the session work
    again: codex's Stop hook then finds it pending, ended or rate-limited, not working. That turn still ends
    by the hook (the idle rule is at 300 s: nothing else would end it)."""
    if before == "first-turn":
        slowed_launcher(codex_runtime, monkeypatch)
    else:
        model_server.add(
            Fail("session_limit", resets_in=3 * 3600) if before == "rate-limited" else Text("Done.")
        )
    started = start(codex_runtime, project, "codex")
    session_id = started.session.id
    if before == "rate-limited":
        events_until(codex_runtime, session_id, EventKind.RATE_LIMITED, seconds=60)
        screen_shows(codex_runtime, started.session, "■ You’ve hit your usage limit")
        codex_runtime.context.availability.mark_available("codex")
    if before != "first-turn":
        if before == "turn-ended":
            events_until(codex_runtime, session_id, EventKind.TURN_ENDED, seconds=60)
        slowed_launcher(codex_runtime, monkeypatch)
        model_server.add(Text("DONE: next-build greeting"))
        sent = codex_runtime.send_message(session_id, "Go on.")
        assert not isinstance(sent, Error), sent
    events = events_until(codex_runtime, session_id, EventKind.TURN_ENDED, seconds=60)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert codex_runtime.store.get(session_id).state is SessionState.TURN_ENDED


# --- codex as the orchestrator ----------------------------------------------------------------------------

NEXT_WORK = "mcp__teleclaude.teleclaude__next_work"  # codex offers an MCP server's tools in a namespace


def offers_next_work(body: dict) -> bool:
    """codex offers an MCP server's tools, in a namespace, from the first request after it connected."""
    return any(
        tool.get("type") == "namespace"
        and tool.get("name") == "mcp__teleclaude"
        and any(inner.get("name") == "teleclaude__next_work" for inner in tool.get("tools", []))
        for tool in body.get("tools", [])
    )


def orchestrator_model(body: dict) -> Step:
    """A model that calls next_work once, then stops. codex does not wait for its MCP servers before the
    first turn: until teleclaude's tools are offered, this model waits a second in the shell, then looks
    again."""
    called = [item.get("name") for item in body.get("input", []) if item.get("type") == "function_call"]
    if "teleclaude__next_work" in called:
        return Text("DONE")
    if not offers_next_work(body):
        return shell("sleep 1", "Wait for the teleclaude MCP server")
    return mcp("teleclaude", "teleclaude__next_work")


def next_work_result(model_server) -> str:
    """What the orchestrator's next_work call answered (the request after the call carries it)."""
    turns = model_server.turns()
    (call,) = [i for i, turn in enumerate(turns) if turn.answer == f"tool {NEXT_WORK}"]
    (output,) = [
        item
        for item in turns[call + 1].body["input"]
        if item.get("type") == "function_call_output" and item.get("call_id") == last_call_id(turns[call + 1])
    ]
    parts = output["output"]  # a string, or codex's [{"type": "input_text", "text": …}, …]
    return parts if isinstance(parts, str) else "\n".join(part.get("text", "") for part in parts)


def last_call_id(turn) -> str:
    calls = [item for item in turn.body["input"] if item.get("type") == "function_call"]
    return calls[-1].get("call_id", "")


def test_a_codex_orchestrator_runs_next_work_over_mcp_and_gets_a_tool_call(
    codex_runtime, project, model_server
):
    model_server.then = orchestrator_model
    started = start(
        codex_runtime, project, "codex", "next-work", ""
    )  # `$next-work ` : the space closes the skill list
    events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    result = next_work_result(model_server)
    assert "TOOL_CALL:" in result, result
    assert 'command="next-build"' in result and 'args="greeting"' in result, result


def reporting_model(body: dict) -> Step:
    """A worker that reports its status once over MCP (session_id "": its server's $TELECLAUDE_SESSION_ID),
    then stops; until teleclaude's tools are offered, it waits a second in the shell."""
    called = [item.get("name") for item in body.get("input", []) if item.get("type") == "function_call"]
    if "teleclaude__report_status" in called:
        return Text("DONE: next-build greeting - reported")
    if not offers_next_work(body):
        return shell("sleep 1", "Wait for the teleclaude MCP server")
    return mcp("teleclaude", "teleclaude__report_status", session_id="", text="halfway through")


def test_a_codex_worker_reports_its_status_over_mcp_with_its_own_session_and_key(
    codex_runtime, project, model_server
):
    """codex gives its MCP server only the variables `env_vars` names (install writes the worker's session,
    key and database there): report_status finds the session and its key in the server's environment."""
    model_server.then = reporting_model
    started = start(codex_runtime, project, "codex")
    events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    turns = model_server.turns()
    (call,) = [
        i for i, turn in enumerate(turns) if turn.answer == "tool mcp__teleclaude.teleclaude__report_status"
    ]
    output = json.dumps(turns[call + 1].body["input"][-1])
    assert "OK:" in output, output
    stored = codex_runtime.store.get(started.session.id)
    assert stored is not None and stored.status_text == "halfway through"


def test_project_scope_alone_gives_codex_its_skills_mcp_server_and_hooks(
    codex_runtime, project, model_server, monkeypatch
):
    """`teleclaude install --codex --scope project` (the user-scope install undone): codex reads the skills
    from the repository's .codex/skills, the MCP server from .codex/config.toml and the hooks from
    .codex/hooks.json (a trusted project), which run `teleclaude` by name: Stop ends the turn, PreToolUse
    records the shell command."""
    undone = install(["codex"], Scope.USER, uninstall=True)
    assert not hasattr(undone, "code"), undone
    report = install(["codex"], Scope.PROJECT, cwd=project)
    assert not hasattr(report, "code"), report
    commit_all(project, "teleclaude for codex, project scope")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    model_server.add(shell("git status --short", "Look at the worktree"), Text("DONE: next-build greeting"))
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    (line,) = codex_runtime.recent_tools(codex_runtime.list_sessions())[started.session.id]
    assert line.startswith("Bash: git status --short ("), line
    turn = model_server.turns()[0]
    assert "You are the **builder** for the work item `$ARGUMENTS`" in turn.text()
    assert str(project / ".codex" / "skills" / "next-build" / "SKILL.md") in turn.text()
    assert "mcp__teleclaude.teleclaude__next_work" in turn.tools()


def test_codex_waits_for_a_slow_teleclaude_mcp_server_before_its_first_turn(
    codex_runtime, project, model_server, tmp_path, monkeypatch
):
    """`teleclaude mcp` slow to start (a loaded machine: here 8 s): codex does not send the first turn of a
    worker before teleclaude's MCP server is connected, so its tools are offered from the first request on
    (codex would otherwise send the turn without them: NOTES.md)."""
    undone = install(["codex"], Scope.USER, uninstall=True)
    assert not hasattr(undone, "code"), undone
    report = install(["codex"], Scope.PROJECT, cwd=project)  # `teleclaude` by name: the slow one below
    assert not hasattr(report, "code"), report
    commit_all(project, "teleclaude for codex, project scope")
    slow = tmp_path / "slow"
    slow.mkdir()
    real = Path(sys.executable).parent / "teleclaude"
    (slow / "teleclaude").write_text(f'#!/bin/sh\n[ "$1" = mcp ] && sleep 8\nexec {real} "$@"\n')
    (slow / "teleclaude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    model_server.add(Text("DONE: next-build greeting"))
    started = start(codex_runtime, project, "codex")
    events = events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "mcp__teleclaude.teleclaude__next_work" in model_server.turns()[0].tools()


# --- rows already seen on the alternate screen ------------------------------------------------------------


def without_prompt_hook(isolated_environment) -> None:
    """No UserPromptSubmit hook: no rollout file is known, so the screen alone tells a limit."""
    hooks_file = isolated_environment / ".codex" / "hooks.json"
    hooks = json.loads(hooks_file.read_text())
    del hooks["hooks"]["UserPromptSubmit"]
    hooks_file.write_text(json.dumps(hooks))


@pytest.mark.parametrize("signal", ["screen-alone", "rollout-file"])
def test_an_old_usage_limit_row_does_not_limit_the_next_turn_again(
    codex_runtime, project, model_server, isolated_environment, signal
):
    """Codex draws on the alternate screen, which the observer reads whole whenever it changes. After a usage
    limit its `■ You’ve hit your usage limit …` row stays on the screen: a message sent once codex is
    available again makes a turn that succeeds (it must end, not be limited again), and later changes of the
    screen (typing into its input box) do not bring the old row back either."""
    if signal == "screen-alone":
        without_prompt_hook(isolated_environment)
    model_server.add(Fail("session_limit", resets_in=3 * 3600))
    started = start(codex_runtime, project, "codex")
    session_id = started.session.id
    events = events_until(codex_runtime, session_id, EventKind.RATE_LIMITED, seconds=60)
    assert events[-1].detail.startswith("quota_exhausted"), events[-1].detail
    screen_shows(codex_runtime, started.session, "■ You’ve hit your usage limit")
    codex_runtime.context.availability.mark_available("codex")  # as `teleclaude agents` does after the reset

    model_server.add(Text("DONE: next-build greeting"))
    sent = codex_runtime.send_message(session_id, "The limit has reset: go on.")
    assert not isinstance(sent, Error), sent
    events = events_until(codex_runtime, session_id, EventKind.TURN_ENDED, seconds=60)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "■ You’ve hit your usage limit" in screen(codex_runtime, started.session)  # still shown

    codex_runtime.tmux.send_text(started.session.pane_id, "a line not sent")  # the screen changes
    screen_shows(codex_runtime, started.session, "a line not sent")
    later = []
    for _ in range(3):
        later += codex_runtime.wait_for_sessions([session_id], timeout=1).events
    assert not later, [(e.kind.value, e.detail) for e in later]
    assert codex_runtime.store.get(session_id).state is SessionState.TURN_ENDED
    assert "codex" not in codex_runtime.context.availability.unavailable(codex_runtime.clock())
