"""The MCP face: tools, annotations and answers through a real fastmcp client (in memory, stdio, HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta

import pytest

from ..servers import http_mcp

PREPARED = "alpha-feature"
UNPREPARED = "beta-feature"
TOOLS = {
    "teleclaude__next_prepare",
    "teleclaude__next_work",
    "teleclaude__mark_agent_unavailable",
    "teleclaude__mark_agent_available",
    "teleclaude__agent_status",
    # the worker runtime
    "teleclaude__run_agent_command",
    "teleclaude__list_sessions",
    "teleclaude__get_session_output",
    "teleclaude__send_message",
    "teleclaude__end_session",
    "teleclaude__wait_for_sessions",
    "teleclaude__report_status",
}


def list_tools():
    from fastmcp import Client

    from teleclaude.mcp import build_server

    async def go():
        async with Client(build_server()) as client:
            return await client.list_tools()

    return {tool.name: tool for tool in asyncio.run(go())}


def first_line(text: str) -> str:
    return text.splitlines()[0]


# --- the tool list ---------------------------------------------------------------------------------


def test_the_server_lists_its_tools_with_descriptions():
    tools = list_tools()
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.description.strip(), tool.name
        assert tool.output_schema is None, f"{tool.name} should answer plain text only"


def test_annotations_are_honest():
    tools = list_tools()
    hints = {
        name: (
            tool.annotations.read_only_hint,
            tool.annotations.destructive_hint,
            tool.annotations.idempotent_hint,
            tool.annotations.open_world_hint,
        )
        for name, tool in tools.items()
    }
    assert hints["teleclaude__next_prepare"][0] is True
    assert hints["teleclaude__next_work"] == (False, False, False, False)
    assert hints["teleclaude__mark_agent_unavailable"][:3:2] == (False, True)
    assert hints["teleclaude__mark_agent_available"][:3:2] == (False, True)
    assert hints["teleclaude__agent_status"][0] is True
    assert all(hint[3] is False for hint in hints.values())
    assert all(hint[1] is not True for hint in hints.values())


def test_input_schemas_match_the_documented_signatures():
    tools = list_tools()
    properties = {name: set(tool.input_schema["properties"]) for name, tool in tools.items()}
    assert properties == {
        "teleclaude__next_prepare": {"slug", "cwd"},
        "teleclaude__next_work": {"slug", "cwd", "dry_run"},
        "teleclaude__mark_agent_unavailable": {"agent", "unavailable_until", "reason"},
        "teleclaude__mark_agent_available": {"agent"},
        "teleclaude__agent_status": set(),
        "teleclaude__run_agent_command": {
            "computer",
            "command",
            "args",
            "project",
            "agent",
            "thinking_mode",
            "subfolder",
            "parent",
        },
        "teleclaude__list_sessions": {"include_finished"},
        "teleclaude__get_session_output": {"session_id", "cursor", "max_lines", "max_bytes"},
        "teleclaude__send_message": {"session_id", "text", "interrupt"},
        "teleclaude__end_session": {"session_id"},
        "teleclaude__wait_for_sessions": {"session_ids", "timeout"},
        "teleclaude__report_status": {"session_id", "text", "wait_cmd"},
    }
    assert tools["teleclaude__mark_agent_unavailable"].input_schema.get("required") == ["agent"]
    assert not tools["teleclaude__next_work"].input_schema.get("required")


# --- answers -----------------------------------------------------------------------------------------


def test_next_work_dispatches_the_build_and_creates_the_worktree(
    project, call_tool, tool_call_fields, paths_equal
):
    text = call_tool("teleclaude__next_work", cwd=str(project / "todos"))  # a subfolder: the root is found

    fields = tool_call_fields(text)
    assert fields["command"] == "next-build"
    assert fields["args"] == PREPARED
    assert fields["subfolder"] == f"trees/{PREPARED}"
    assert fields["agent"] == "gemini"
    assert fields["thinking_mode"] == "med"
    assert paths_equal(fields["project"], project)
    tree = project / "trees" / PREPARED
    assert (tree / ".git").is_file()
    assert (tree / "todos" / PREPARED / "implementation-plan.md").is_file()
    assert f"- [>] {PREPARED}" in (project / "todos" / "roadmap.md").read_text()


def test_next_work_with_a_slug_argument(project, call_tool, tool_call_fields):
    fields = tool_call_fields(call_tool("teleclaude__next_work", slug=PREPARED, cwd=str(project)))
    assert (fields["command"], fields["args"]) == ("next-build", PREPARED)


def test_next_work_uses_the_server_cwd_when_no_cwd_is_given(
    project, call_tool, tool_call_fields, monkeypatch, paths_equal
):
    monkeypatch.chdir(project)
    fields = tool_call_fields(call_tool("teleclaude__next_work"))
    assert paths_equal(fields["project"], project)


def test_next_prepare_dispatches_the_requirements_architect(project, call_tool, tool_call_fields):
    text = call_tool("teleclaude__next_prepare", cwd=str(project))

    fields = tool_call_fields(text)
    assert fields["command"] == "next-requirements"
    assert fields["args"] == UNPREPARED
    assert "subfolder" not in fields  # architects work in the main checkout
    assert any(line.startswith("NOTE:") for line in text.splitlines())
    assert not (project / "trees").exists()  # read-only


def test_a_not_prepared_answer_names_the_tool_to_call(project, call_tool):
    answer = call_tool("teleclaude__next_work", slug="beta-feature", cwd=str(project))
    assert answer.splitlines()[0] == "ERROR: NOT_PREPARED"
    assert answer.splitlines()[-1] == 'Next: teleclaude__next_prepare(slug="beta-feature")'


def test_next_prepare_of_a_prepared_item(project, call_tool):
    text = call_tool("teleclaude__next_prepare", slug=PREPARED, cwd=str(project))
    assert first_line(text) == "PREPARED:"


def test_marking_the_builder_unavailable_falls_back(project, call_tool, tool_call_fields, monkeypatch):
    monkeypatch.chdir(project)
    marked = call_tool(
        "teleclaude__mark_agent_unavailable", agent="gemini", unavailable_until="2h", reason="quota_exhausted"
    )
    assert first_line(marked).startswith("OK: gemini")

    fields = tool_call_fields(call_tool("teleclaude__next_work", cwd=str(project)))
    assert (fields["command"], fields["agent"]) == ("next-build", "claude")

    status = call_tool("teleclaude__agent_status")
    gemini = next(line for line in status.splitlines() if line.startswith("gemini"))
    assert "unavailable" in gemini and "quota_exhausted" in gemini

    assert first_line(call_tool("teleclaude__mark_agent_available", agent="gemini")).startswith("OK: gemini")
    fields = tool_call_fields(call_tool("teleclaude__next_work", cwd=str(project)))
    assert fields["agent"] == "gemini"


def test_agent_status_returns_each_agents_usage_and_next_work_plans_around_it(
    project, call_tool, tool_call_fields, monkeypatch
):
    from teleclaude.adapters.store import AvailabilityStore
    from teleclaude.planner.core.model import UsageWindow

    monkeypatch.chdir(project)
    now = datetime.now(UTC)
    AvailabilityStore().record_usage(
        [
            UsageWindow("gemini", "5h", 96, now + timedelta(hours=2), now),
            UsageWindow("claude", "7d", 12, now + timedelta(days=4), now),
        ]
    )
    status = call_tool("teleclaude__agent_status")
    usage = status.split("\n\n")[1].splitlines()[1:]
    assert [line.split()[:3] for line in usage] == [["claude", "7d", "12%"], ["gemini", "5h", "96%"]]
    fields = tool_call_fields(call_tool("teleclaude__next_work", cwd=str(project)))
    assert (fields["command"], fields["agent"]) == ("next-build", "claude")


def test_every_builder_unavailable_answers_self(project, call_tool, monkeypatch):
    monkeypatch.chdir(project)
    until = (datetime.now(UTC) + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for agent in ("gemini", "claude", "codex"):
        call_tool("teleclaude__mark_agent_unavailable", agent=agent, unavailable_until=until)
    assert first_line(call_tool("teleclaude__next_work", cwd=str(project))) == "SELF:"


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("teleclaude__mark_agent_unavailable", {"agent": "hal9000"}, "UNKNOWN_AGENT"),
        ("teleclaude__mark_agent_available", {"agent": "hal9000"}, "UNKNOWN_AGENT"),
        (
            "teleclaude__mark_agent_unavailable",
            {"agent": "gemini", "unavailable_until": "soonish"},
            "INVALID_TIME",
        ),
        ("teleclaude__next_work", {"slug": "Not A Slug"}, "INVALID_SLUG"),
    ],
)
def test_errors_are_text_answers(project, call_tool, monkeypatch, tool, arguments, code):
    monkeypatch.chdir(project)
    text = call_tool(tool, **arguments)
    assert first_line(text) == f"ERROR: {code}"
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("teleclaude__run_agent_command", {"computer": "local", "command": "next-build", "args": PREPARED}),
        ("teleclaude__list_sessions", {}),
        ("teleclaude__get_session_output", {"session_id": "other"}),
        ("teleclaude__send_message", {"session_id": "other", "text": "rm -rf ~"}),
        ("teleclaude__end_session", {"session_id": "other"}),
        ("teleclaude__wait_for_sessions", {}),
        ("teleclaude__mark_agent_unavailable", {"agent": "gemini"}),
        ("teleclaude__mark_agent_available", {"agent": "gemini"}),
        ("teleclaude__agent_status", {}),
    ],
)
def test_a_sandboxed_workers_server_drives_no_worker_and_reads_no_record(
    project, call_tool, monkeypatch, tmp_path, tool, arguments
):
    """Its CLI started it inside the sandbox (its session's channel in its environment), where the sessions
    database and the workers' tmux server are hidden: a plain refusal, nothing recorded."""
    from teleclaude.adapters.store import AvailabilityStore

    monkeypatch.chdir(project)
    monkeypatch.setenv("TELECLAUDE_CHANNEL", str(tmp_path / "channel"))
    if tool == "teleclaude__run_agent_command":
        arguments = {**arguments, "project": str(project), "agent": "claude", "thinking_mode": "med"}
    text = call_tool(tool, **arguments)
    assert first_line(text) == "ERROR: SANDBOXED"
    assert AvailabilityStore().unavailable(datetime.now(UTC)) == {}


@pytest.mark.parametrize("tool", ["teleclaude__next_work", "teleclaude__next_prepare"])
def test_outside_a_repository_the_answer_is_not_a_git_repo(not_a_repo, isolated_env, call_tool, tool):
    text = call_tool(tool, cwd=str(not_a_repo))
    assert first_line(text) == "ERROR: NOT_A_GIT_REPO"
    assert "Traceback" not in text


def test_an_exception_inside_a_tool_becomes_error_internal(project, call_tool, monkeypatch):
    from teleclaude.planner import api as app

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(app, "agent_status", explode)
    text = call_tool("teleclaude__agent_status")
    assert first_line(text) == "ERROR: INTERNAL"
    assert "Traceback" not in text


# --- real transports --------------------------------------------------------------------------------


def _stdio(env: dict[str, str], cwd, tmp_path):
    """`teleclaude mcp` over stdio in `cwd`, as an agent CLI starts it; its stderr in tmp_path."""
    from fastmcp.client.transports import StdioTransport

    log = tmp_path / "stdio-server.log"
    return StdioTransport(
        sys.executable, ["-m", "teleclaude", "mcp"], env=env, cwd=str(cwd), keep_alive=False, log_file=log
    )


def test_stdio_server_uses_its_own_cwd(project, subprocess_env, tool_call_fields, paths_equal, tmp_path):
    from fastmcp import Client

    transport = _stdio(subprocess_env, project, tmp_path)

    async def go():
        async with Client(transport) as client:
            names = {tool.name for tool in await client.list_tools()}
            result = await client.call_tool("teleclaude__next_work", {})
            return names, result

    names, result = asyncio.run(go())
    assert names >= {"teleclaude__next_work", "teleclaude__next_prepare"}
    assert result.structured_content is None
    fields = tool_call_fields(result.content[0].text)
    assert fields["command"] == "next-build"
    assert paths_equal(fields["project"], project)
    assert (project / "trees" / PREPARED / ".git").is_file()


def test_a_worker_started_over_stdio_opens_its_pane(worker_project, subprocess_env, tmp_path):
    """`run_agent_command` through `teleclaude mcp` over stdio (the server that answers the handshake from
    its record and hands the tool call to fastmcp through its wire) starts the worker: its pane opens in
    tmux with the stand-in CLI, and `end_session` there ends it. Through the wire, `sys.stdout` once lacked
    the `encoding` libtmux reads: every start over stdio answered `ERROR: INTERNAL`, its worker left pending,
    and only the real-CLI suite saw it."""
    from fastmcp import Client

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.api import open_runtime
    from teleclaude.runtime.core.sessions import SessionState

    env = {**subprocess_env, "PATH": os.environ["PATH"], "FAKE_AGENT": os.environ["FAKE_AGENT"]}
    transport = _stdio(env, worker_project, tmp_path)
    tmux = open_runtime(worker_project).tmux

    async def go():
        async with Client(transport) as client:

            async def call(tool: str, **arguments) -> str:
                result = await client.call_tool(tool, arguments)
                return result.content[0].text

            started = await call(
                "teleclaude__run_agent_command",
                computer="local",
                command="next-build",
                args="greeting",
                project=str(worker_project),
                agent="claude",
                thinking_mode="med",
            )
            assert started.startswith("SESSION:"), started + (tmp_path / "stdio-server.log").read_text()
            session_id = parse_fields(started)["session_id"]
            session = SessionStore().get(session_id)
            assert session is not None and session.state is SessionState.RUNNING  # not left pending
            assert session.pane_id in tmux.views()  # its pane, with the stand-in in it
            ended = await call("teleclaude__end_session", session_id=session_id)
            return session.pane_id, ended

    pane_id, ended = asyncio.run(go())
    assert ended.startswith("OK:") and parse_fields(ended)["state"] == "cancelled", ended
    assert pane_id not in tmux.views()


def parse_fields(text: str) -> dict[str, str]:
    """The `key="value"` fields of an answer's second line."""
    return {
        key: json.loads(value)
        for key, value in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*")', text.splitlines()[1])
    }


def test_http_server_answers_agent_status(project, subprocess_env, tmp_path):
    from fastmcp import Client

    log = tmp_path / "http-server.log"
    with http_mcp(project, subprocess_env, log, "--host", "127.0.0.1") as (url, token):

        async def go():
            async with Client(url, auth=token) as client:
                return await client.call_tool("teleclaude__agent_status", {})

        result = asyncio.run(go())
    text = result.content[0].text
    assert first_line(text).split() == ["AGENT", "STATUS", "UNTIL", "LEFT", "REASON"]
    assert {line.split()[0] for line in text.splitlines()[1:]} >= {"claude", "gemini", "codex"}
