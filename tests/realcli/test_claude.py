"""The real Claude Code, started by teleclaude's runtime, against the scripted Anthropic server: what only
claude does (its MCP tool names, WaitForMcpServers and ToolSearch, its trust of a worktree under the root's,
its project-scope files). What every CLI does is test_contract.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from teleclaude.demo.model_server import Step, Text, Tool, mcp
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, Started, StartRequest
from teleclaude.setup.install import Scope

from .conftest import start
from .watching import events_until

NEXT_WORK = "mcp__teleclaude__teleclaude__next_work"
WAIT = "WaitForMcpServers"
SEARCH = "ToolSearch"


def orchestrator_model(body: dict) -> Step:
    """A model that calls next_work once, then says DONE; until it can, it waits for the tool as a real model
    would (`until_offered`)."""
    if NEXT_WORK in called(body):
        return Text("DONE")
    return until_offered(body, NEXT_WORK) or mcp("teleclaude", "teleclaude__next_work")


def called(body: dict) -> list[str]:
    """The tools the model called so far in the conversation, in order."""
    return [
        block.get("name")
        for message in body.get("messages", [])
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def until_offered(body: dict, name: str) -> Step | None:
    """None once claude lets the model call the MCP tool `name`, else the call that waits for it (at most ten
    times, or while claude says the server is still connecting). MCP servers connect in the background.
    2.1.197 offered an MCP tool in `tools` once connected and, until then, WaitForMcpServers (one call waits
    at most 5 s, less than `teleclaude mcp` may need on a loaded machine). 2.1.332 defers MCP tools: the
    model loads one with ToolSearch (`select:NAME`), whose result names it once its server is connected; until
    then it answers at once "Some MCP servers are still connecting: teleclaude. … try searching again", as
    often as asked, so a loaded machine needs more searches than ten."""
    offered = {tool.get("name"): tool for tool in body.get("tools", [])}
    if name in offered and not offered[name].get("defer_loading"):
        return None
    if SEARCH in offered:
        results = tool_results(body)
        if name in json.dumps(results):
            return None
        waits = called(body).count(SEARCH)
        connecting = "still connecting" in json.dumps(results[-1:])
        searching = waits < 10 or (connecting and waits < 1000)
        return Tool(SEARCH, {"query": f"select:{name}"}) if searching else Text("DONE: no MCP server")
    return Tool(WAIT, {}) if called(body).count(WAIT) < 10 else Text("DONE: the MCP server never connected")


def next_work_turns(model_server) -> tuple:
    """(the turn that called next_work, the turn that got its result) after the waits it needed (none when
    the server connected before the first turn)."""
    answers = [turn.answer for turn in model_server.turns()]
    waiting = (f"tool {WAIT}", f"tool {SEARCH}")
    waits = next((i for i, answer in enumerate(answers) if answer not in waiting), len(answers))
    assert answers[waits:] == [f"tool {NEXT_WORK}", "text"], answers
    return model_server.turns()[waits], model_server.turns()[waits + 1]


def tool_results(body: dict) -> list:
    """Every tool_result block of the request (an Anthropic request)."""
    return [
        block
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def tool_result(turn) -> str:
    """The text of the last tool_result block claude sent in `turn` (an Anthropic request)."""
    content = tool_results(turn.body)[-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def test_a_claude_orchestrator_runs_next_work_and_gets_a_tool_call(runtime, project, model_server):
    model_server.then = orchestrator_model
    started = start(runtime, project, "claude", "next-work", "")
    events_until(runtime, started.session.id, EventKind.TURN_ENDED, seconds=180)  # waits up to 10 x 5 s
    calling, answered = next_work_turns(model_server)
    assert until_offered(calling.body, NEXT_WORK) is None
    result = tool_result(answered)
    assert result.startswith("TOOL_CALL:"), result
    assert 'command="next-build"' in result and 'args="greeting"' in result, result


# --- set up by `teleclaude install` / `init` only --------------------------------------------------------


def test_a_worker_in_a_worktree_starts_unattended_under_the_roots_trust(runtime, project, model_server):
    worktree = ["git", "worktree", "add", "-q", "-b", "greeting", "trees/greeting"]
    subprocess.run(worktree, cwd=project, check=True)
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = runtime.run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), "claude", "med", "trees/greeting")
    )
    assert isinstance(started, Started), started
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert str(project / "trees" / "greeting") in model_server.turns()[0].text()  # claude worked there


def test_project_scope_names_no_path_of_this_machine_and_claude_connects(
    claude_cli, project, model_server, set_up
):
    set_up(project, Scope.PROJECT)
    written = [project / ".mcp.json", project / ".claude" / "settings.json"]
    for path in written:
        text = path.read_text()
        for machine_path in ("/usr/", "/tmp/", "/root/", "/home/", str(Path(sys.executable).parent)):
            assert machine_path not in text, f"{path} names {machine_path}"
    listed = subprocess.run(
        [str(claude_cli), "mcp", "list"], cwd=project, capture_output=True, text=True, timeout=60
    )
    (line,) = [row for row in listed.stdout.splitlines() if row.startswith("teleclaude: teleclaude mcp")]
    assert line.endswith("Connected"), listed.stdout + listed.stderr  # by name, approved
    runtime = open_runtime(project)
    model_server.then = orchestrator_model
    started = start(runtime, project, "claude", "next-work", "")
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED, seconds=180)
    assert (EventKind.TURN_ENDED, "stop hook") in [(e.kind, e.detail) for e in events]  # the hook by name
    assert tool_result(next_work_turns(model_server)[1]).startswith("TOOL_CALL:")
