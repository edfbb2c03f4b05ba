"""Arguments of the wrong kind answer a coded error, never pydantic's text or INTERNAL; one time limit; the
README's `sessions list --json` works."""

from __future__ import annotations

import asyncio
import json

import pytest

from .conftest import first_line


def _call(name: str, arguments: dict) -> str:
    from fastmcp import Client

    from teleclaude.mcp import build_server

    async def go():
        async with Client(build_server()) as client:
            return await client.call_tool(name, arguments, raise_on_error=False)

    result = asyncio.run(go())
    assert len(result.content) == 1
    return result.content[0].text


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("teleclaude__mark_agent_unavailable", {"agent": 5}),
        ("teleclaude__mark_agent_unavailable", {"agent": "claude", "reason": ["quota"]}),
        ("teleclaude__mark_agent_unavailable", {}),
        ("teleclaude__next_work", {"slug": {"x": 1}}),
        ("teleclaude__wait_for_sessions", {"timeout": "soon"}),
        ("teleclaude__get_session_output", {"session_id": "x", "max_lines": "many"}),
        ("teleclaude__agent_status", {"unexpected": 1}),
    ],
)
def test_wrong_typed_mcp_arguments_are_invalid_argument(tool, arguments):
    assert first_line(_call(tool, arguments)) == "ERROR: INVALID_ARGUMENT"


@pytest.fixture
def fresh_runtime():
    from teleclaude import mcp

    mcp._RUNTIME = None  # the server opens its runtime once; this test's database is a new one
    yield
    mcp._RUNTIME = None


def test_a_nul_in_subfolder_is_a_coded_error(fresh_runtime, tmp_path):
    arguments = dict(
        computer="local",
        command="next-build",
        args="x",
        project=str(tmp_path),
        agent="claude",
        thinking_mode="med",
        subfolder="trees/x\0y",
    )
    assert first_line(_call("teleclaude__run_agent_command", arguments)) in (
        "ERROR: INVALID_SUBFOLDER",
        "ERROR: INVALID_ARGUMENT",
    )


@pytest.mark.parametrize("until", ["9999-12-31", "9999-12-31T23:59:59Z", "100000d", "367d", "8800h"])
def test_one_limit_for_a_time_and_a_duration(cli, until):
    done = cli("agents", "unavailable", "claude", "--until", until)
    assert (done.returncode, first_line(done.stdout)) == (1, "ERROR: INVALID_TIME")


@pytest.mark.parametrize("until", ["366d", "30d"])
def test_times_within_the_limit_are_accepted(cli, until):
    assert cli("agents", "unavailable", "claude", "--until", until).returncode == 0


@pytest.mark.parametrize("argv", [("sessions", "list", "--json"), ("sessions", "--json", "list")])
def test_sessions_list_json_as_the_readme_writes_it(cli, argv):
    done = cli(*argv)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
