"""The runtime through its two faces: the MCP tools (in memory and over stdio) and `teleclaude sessions`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from teleclaude import mcp as mcp_server
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.marks import SESSION_KEY


def fields(line: str) -> dict[str, str]:
    return {
        key: json.loads(value) if value.startswith('"') else value
        for key, value in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)
    }


@pytest.fixture
def in_project(project, fake_agents, monkeypatch):
    monkeypatch.chdir(project)  # an MCP client starts the server in the project
    monkeypatch.setattr(mcp_server, "_RUNTIME", None)
    return project


async def call(client, name, **arguments) -> str:
    result = await client.call_tool(name, arguments)
    assert not result.is_error
    return result.content[0].text


def test_an_orchestrator_runs_the_tool_call_next_work_returned(in_project, monkeypatch):
    action = app.next_work(cwd=in_project)
    assert isinstance(action, Dispatch)

    async def go():
        async with Client(mcp_server.build_server()) as client:
            started = await call(
                client,
                "teleclaude__run_agent_command",
                computer="local",
                command=action.command,
                args=action.slug,
                project=action.project,
                agent=action.agent,
                thinking_mode=action.thinking_mode,
                subfolder=action.subfolder,
            )
            assert started.startswith("SESSION:"), started
            session_id = fields(started.splitlines()[1])["session_id"]
            events = ""
            for _ in range(6):
                events += await call(
                    client, "teleclaude__wait_for_sessions", session_ids=[session_id], timeout=10
                )
                if "turn_ended" in events:
                    break
            output = await call(client, "teleclaude__get_session_output", session_id=session_id)
            stored = SessionStore().get(session_id)
            assert stored is not None
            monkeypatch.setenv(SESSION_KEY, stored.key)  # the worker's own report: with its key
            reported = await call(
                client, "teleclaude__report_status", session_id=session_id, text="built and committed"
            )
            listing = await call(client, "teleclaude__list_sessions")
            ended = await call(client, "teleclaude__end_session", session_id=session_id)
            return events, output, reported, listing, ended

    events, output, reported, listing, ended = asyncio.run(go())
    assert reported.startswith("OK:") and fields(reported.splitlines()[1])["status"] == "built and committed"
    assert "EVENTS:" in events and 'event="turn_ended"' in events
    assert output.startswith("OUTPUT:") and fields(output.splitlines()[1])["cursor"]
    assert listing.startswith("SESSIONS: 1")
    assert ended.startswith("OK:") and fields(ended.splitlines()[1])["state"] == "done"
    following = app.next_work(cwd=in_project)
    assert isinstance(following, Dispatch) and following.step.command == "next-review"


def test_errors_come_back_as_text_over_stdio(in_project):
    transport = StdioTransport(
        sys.executable, ["-m", "teleclaude", "mcp"], env=dict(os.environ), cwd=str(in_project)
    )

    async def go():
        async with Client(transport) as client:
            unknown = await call(client, "teleclaude__get_session_output", session_id="nope")
            report = await call(client, "teleclaude__report_status", session_id="nope", text="hi")
            computer = await call(
                client,
                "teleclaude__run_agent_command",
                computer="mars",
                command="next-build",
                args="x",
                project=str(in_project),
                agent="claude",
                thinking_mode="med",
            )
            return unknown, report, computer

    unknown, report, computer = asyncio.run(go())
    assert unknown.startswith("ERROR: UNKNOWN_SESSION")
    assert unknown.splitlines()[-1] == "Next: teleclaude__list_sessions()"  # over MCP: the tool
    assert report.startswith("ERROR: UNKNOWN_SESSION")
    assert computer.startswith("ERROR: UNKNOWN_COMPUTER")


def test_the_cli_verbs(in_project):
    def cli(*args, key: str = ""):
        return subprocess.run(
            [sys.executable, "-m", "teleclaude", "sessions", *args],
            cwd=in_project,
            env={**os.environ, SESSION_KEY: key},
            capture_output=True,
            text=True,
            timeout=60,
        )

    started = cli("run", "claude", "emit", "4")
    assert started.returncode == 0, started.stdout + started.stderr
    session_id = fields(started.stdout.splitlines()[1])["session_id"]
    waited = cli("--json", "wait", session_id, "--timeout", "10")
    assert json.loads(waited.stdout)["events"][0]["event"] == "turn_ended"
    output = cli("output", session_id)
    assert "row 4" in output.stdout
    assert cli("send", session_id, "/emit 2").returncode == 0
    stored = SessionStore().get(session_id)
    assert stored is not None
    reported = cli("report", session_id, "two more rows", key=stored.key)  # as its worker reports
    assert reported.stdout.startswith("OK:") and fields(reported.stdout.splitlines()[1])["status"]
    assert cli("report", session_id, "x", "--wait-cmd", "'oops").stdout.startswith("ERROR: INVALID_ARGUMENT")
    assert cli("end", session_id).returncode == 0
    unknown = cli("output", "nope")
    assert unknown.returncode == 1
    assert unknown.stdout.splitlines()[-1] == "Next: teleclaude sessions list"  # on the CLI: the verb
    assert cli("run", "claude", "emit", "--subfolder", "../..").stdout.startswith("ERROR: INVALID_SUBFOLDER")


def test_a_cli_user_told_to_mark_a_missing_agent_unavailable_gets_the_cli_verb(in_project):
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no stand-in (nor any) claude
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "sessions", "run", "claude", "emit", "1"],
        cwd=in_project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.splitlines()[0]) == (1, "ERROR: AGENT_NOT_INSTALLED")
    assert done.stdout.splitlines()[-1] == "Next: teleclaude agents unavailable claude"
