"""The real Gemini CLI (0.61), started by teleclaude's runtime, against the scripted Gemini API: what only
gemini does (its silent retries and high-demand dialog, its long shell commands, its modes, its unknown
commands, its loop detection, its MCP names, its project-scope files, its late commands). What every CLI
does is test_contract.py."""

from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from teleclaude.demo.model_server import Fail, Step, Text, Tool, body_text, mcp, shell
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started, StartRequest
from teleclaude.setup.install import Scope, install

from .conftest import start
from .watching import events_until, screen_shows, turn_ended


@pytest.mark.parametrize("failure", ["rate_limit", "overloaded"], ids=["429-per-minute", "503-overloaded"])
def test_gemini_retrying_silently_past_api_wait_limit_is_rate_limited_and_the_next_step_falls_back(
    gemini_runtime, project, model_server, failure
):
    """gemini 0.61 retries these for minutes showing only its spinner: the api_wait_limit rule sees it."""
    gemini_runtime.context.config = replace(gemini_runtime.config, api_wait_limit=6)
    model_server.add(Fail(failure, repeat=1000, retry_after=2))
    started = start(gemini_runtime, project, "gemini")
    events = events_until(gemini_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith("rate_limited until"), events[-1].detail
    assert gemini_runtime.store.get(started.session.id).state is SessionState.RATE_LIMITED
    assert model_server.turns()[-1].answer.startswith(f"fail {failure}")  # still retrying, silently
    assert "gemini" in gemini_runtime.context.availability.unavailable(gemini_runtime.clock())
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "claude", fallback


@pytest.mark.parametrize("failure", ["rate_limit", "overloaded"], ids=["429-per-minute", "503-overloaded"])
def test_with_full_error_verbosity_gemini_gives_up_in_a_dialog_that_is_a_limit(
    gemini_runtime, project, model_server, isolated_environment, failure
):
    """`ui.errorVerbosity = "full"` (a user's setting) makes gemini give up after `general.maxAttempts`: its
    "We are currently experiencing high demand … 1. Keep trying 2. Stop" dialog, never answered."""
    settings_file = isolated_environment / ".gemini" / "settings.json"
    settings = json.loads(settings_file.read_text())
    settings["ui"] = {"errorVerbosity": "full"}
    settings.setdefault("general", {})["maxAttempts"] = 2
    settings_file.write_text(json.dumps(settings))
    model_server.add(Fail(failure, repeat=1000, retry_after=1))
    started = start(gemini_runtime, project, "gemini")
    events = events_until(gemini_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    # "high demand" is an overload, whether its row or the dialog under it was read first
    assert events[-1].detail.startswith("overloaded until"), events[-1].detail
    # the row may be read before the rest of its dialog is drawn: wait for both, never answered
    screen_shows(gemini_runtime, started.session, "We are currently experiencing high demand.")
    screen_shows(gemini_runtime, started.session, "Keep trying")
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "claude", fallback


def test_a_long_shell_command_under_gemini_is_not_an_api_wait(gemini_runtime, project, model_server):
    """A command longer than api_wait_limit, then a model slow to answer (held 4 s, less than the limit),
    watched all along as an orchestrator does: the wait on the API is counted from the command's end (its
    box written out, or the last look that saw it running: NOTES.md), not from the output before it."""
    gemini_runtime.context.config = replace(gemini_runtime.config, api_wait_limit=6)
    answer = threading.Event()
    model_server.add(shell("sleep 10", "Wait for the build"), Text("DONE: next-build greeting", hold=answer))
    started = start(gemini_runtime, project, "gemini")
    seen = []
    while not any(r.turn and r.answer == "text" for r in model_server.requests):  # watched, as by `run`
        waited = gemini_runtime.wait_for_sessions([started.session.id], timeout=0.5)
        seen += waited.events
        assert not waited.events and waited.timed_out, [(e.kind.value, e.detail) for e in seen]
    for _ in range(4):  # the command ended, the answer is held: 10+ s without output
        seen += gemini_runtime.wait_for_sessions([started.session.id], timeout=1).events
    answer.set()
    seen += events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in seen] == [(EventKind.TURN_ENDED, "stop hook")]


@pytest.mark.parametrize(
    ("mode", "model"),
    [
        ("slow", "gemini-3.1-pro-preview"),  # --model pro
        ("med", "gemini-3.8-flash"),  # no flag: Auto, its router (answered by the scripted server) picks
        ("fast", "gemini-3.8-flash"),  # --model flash
    ],
)
def test_each_thinking_mode_reaches_the_model_it_names(gemini_runtime, project, model_server, mode, model):
    """The profile's modes are aliases 0.61 resolves itself (VALID_GEMINI_MODELS: tests/realcli/NOTES.md)."""
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    start(gemini_runtime, project, "gemini", mode=mode)
    turn = model_server.wait_for(lambda r: r.turn, timeout=90)
    assert turn.path.split("/models/", 1)[1].split(":", 1)[0] == model, turn.path


def test_an_unknown_command_that_gemini_sends_to_the_model_errs_the_session(
    gemini_runtime, project, model_server, isolated_environment
):
    """With its MCP servers connected (here: none), gemini 0.61 sends an unknown `/command` to the model as a
    plain prompt and shows nothing of it; the AfterAgent hook's `prompt` is that line as typed."""
    settings_file = isolated_environment / ".gemini" / "settings.json"
    settings = json.loads(settings_file.read_text())
    del settings["mcpServers"]
    settings_file.write_text(json.dumps(settings))
    # gemini never lists an unknown command under its typed name: the launcher sends it after command_wait
    gemini_runtime.context.config = replace(gemini_runtime.config, command_wait=3)
    started = gemini_runtime.run_agent_command(
        StartRequest("local", "no-such-command", "greeting", str(project), "gemini", "med")
    )
    assert isinstance(started, Started), started
    events = events_until(gemini_runtime, started.session.id, EventKind.ERRORED, seconds=120)
    assert EventKind.TURN_ENDED not in [e.kind for e in events]
    assert "/no-such-command greeting" in events[-1].detail, events[-1].detail
    assert model_server.turns()[0].last_user_text().endswith("/no-such-command greeting")


def test_geminis_loop_detection_dialog_is_never_typed_into(gemini_runtime, project, model_server):
    """gemini stops a model that repeats the same call and asks, in a dialog, whether to keep loop detection
    on; its AfterAgent hook ends the turn. A message for the worker is refused rather than typed into it."""
    model_server.then = lambda body: Tool("no_such_tool", {"again": True})  # the same call, again and again
    started = start(gemini_runtime, project, "gemini")
    turn_ended(gemini_runtime, started.session.id)
    screen_shows(gemini_runtime, started.session, "Keep loop detection enabled")
    typed = gemini_runtime.send_message(started.session.id, "continue")
    assert isinstance(typed, Error) and typed.code is ErrorCode.WORKER_BLOCKED, typed
    assert "Keep loop detection enabled" in typed.message, typed.message  # the dialog, on its screen


# --- gemini as the orchestrator -----------------------------------------------------------------------------

NEXT_WORK = "mcp_teleclaude_teleclaude__next_work"  # gemini 0.61's name for teleclaude's next_work


def function_responses(body: dict) -> list[dict]:
    """The functionResponse parts gemini sent back to the model (a Gemini API request's `contents`)."""
    return [
        part["functionResponse"]
        for content in body.get("contents") or ()
        for part in content.get("parts") or ()
        if "functionResponse" in part
    ]


def orchestrator_model(body: dict) -> Step:
    """Calls next_work once (by the name gemini offers it under), then says DONE. gemini connects its MCP
    servers in the background, after its prompt shows: until the tool is offered, the model waits a second
    with the shell (at most 20 times), as a real one would."""
    responses = [response.get("name") for response in function_responses(body)]
    if NEXT_WORK in responses:
        return Text("DONE")
    offered = [
        d.get("name") for tool in body.get("tools") or () for d in tool.get("functionDeclarations") or ()
    ]
    if NEXT_WORK in offered:
        return mcp("teleclaude", "teleclaude__next_work")
    if responses.count("run_shell_command") < 20:
        return shell("sleep 1", "Wait for the MCP servers")
    return Text("DONE: the MCP server never connected")


def test_a_gemini_orchestrator_runs_next_work_over_mcp_and_gets_a_tool_call(
    gemini_runtime, project, model_server
):
    model_server.then = orchestrator_model
    started = start(gemini_runtime, project, "gemini", "next-work", "")
    events = events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert (EventKind.TURN_ENDED, "stop hook") in [(e.kind, e.detail) for e in events]
    answers = [turn.answer for turn in model_server.turns()]
    waits = answers.count("tool run_shell_command")
    assert answers == ["tool run_shell_command"] * waits + [f"tool {NEXT_WORK}", "text"], answers
    called, answered = model_server.turns()[waits : waits + 2]
    assert NEXT_WORK in called.tools()
    assert called.answer == f"tool {NEXT_WORK}"
    (response,) = [r for r in function_responses(answered.body) if r.get("name") == NEXT_WORK]
    result = body_text(response.get("response"))
    # gemini wraps an MCP tool's text for the model: `<untrusted_context>\nTOOL_CALL:\n…</untrusted_context>`
    assert result.removeprefix("<untrusted_context>").lstrip().startswith("TOOL_CALL:"), result
    assert 'command="next-build"' in result and 'args="greeting"' in result, result
    assert 'agent="gemini"' in result, result


def test_project_scope_alone_gives_gemini_its_commands_and_hooks(
    gemini_runtime, project, model_server, monkeypatch
):
    """`teleclaude install --gemini --scope project` (the user-scope install undone): gemini reads the
    commands and the hooks from the repository's .gemini/ (trusted by the profile's environment), which run
    `teleclaude` by name: AfterAgent ends the turn, BeforeTool records the shell command."""
    undone = install(["gemini"], Scope.USER, uninstall=True)
    assert not hasattr(undone, "code"), undone
    report = install(["gemini"], Scope.PROJECT, cwd=project)
    assert not hasattr(report, "code"), report
    commit_all(project, "teleclaude for gemini, project scope")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    model_server.add(shell("git status --short", "Look at the worktree"), Text("DONE: next-build greeting"))
    started = start(gemini_runtime, project, "gemini")
    events = events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "You are the **builder** for the work item `greeting`" in model_server.turns()[0].text()
    (line,) = gemini_runtime.recent_tools(gemini_runtime.list_sessions())[started.session.id]
    assert line.startswith("run_shell_command: git status --short ("), line


# --- its commands, loaded late ---------------------------------------------------------------------------


@contextmanager
def command_loading_held(home, runtime, typed: str):
    """gemini 0.61 reads every `~/.gemini/commands/**/*.toml` before it knows any slash command, and only
    after its prompt shows: a named pipe there holds that reading (like a slow disk) until a writer opens
    it, here 2 s after `typed` first shows on a worker's input row (an Enter right after typing would have
    sent it by then). The end of file it then reads is an invalid command file that gemini skips. Every
    read gets its end of file: gemini loads its commands again once its config is initialized (aborting
    the first load), and a read left waiting for a writer would keep its commands from it for good."""
    pipe = home / ".gemini" / "commands" / "zz-held.toml"
    os.mkfifo(pipe)
    done = threading.Event()

    def typed_in_a_worker() -> bool:
        views = runtime.tmux.views()
        rows = [row for pane, view in views.items() for row in runtime.tmux.screen(pane, view)]
        return any(row.strip().startswith(f"* {typed}") for row in rows)

    def release() -> None:
        while not done.is_set() and not typed_in_a_worker():
            done.wait(0.1)
        done.wait(2)
        while not done.is_set():
            with open(pipe, "w"):  # opens once gemini reads the pipe; closing it ends the file
                pass
            done.wait(0.1)  # the reader closes its end before the next open

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        if thread.is_alive():
            fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # lets a writer still waiting to open go
            thread.join(5)
            os.close(fd)


def test_a_command_typed_while_gemini_still_loads_its_commands_reaches_the_model_expanded(
    gemini_runtime, project, model_server, isolated_environment
):
    """gemini 0.61 draws its prompt before its slash commands are loaded; a `/next-build x` taken meanwhile
    would go to the model as plain text (its handleSlashCommand says "not a command" until they are)."""
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    with command_loading_held(isolated_environment, gemini_runtime, typed="/next-build"):
        started = start(gemini_runtime, project, "gemini")
        turn = model_server.wait_for(lambda r: r.turn, timeout=90)
    assert "You are the **builder** for the work item `greeting`" in turn.text()
    events = events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
