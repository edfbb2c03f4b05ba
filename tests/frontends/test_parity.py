"""Both faces give the same answer: every MCP tool has a CLI verb, and for the same state the same text, but
for the next steps it names: each face spells them its own way (a CLI verb, an MCP tool)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

from teleclaude.errors import CLI_VERBS

PREPARED = "alpha-feature"


def tool_names() -> set[str]:
    from fastmcp import Client

    from teleclaude.mcp import build_server

    async def go():
        async with Client(build_server()) as client:
            return {tool.name for tool in await client.list_tools()}

    return asyncio.run(go())


def stdout(done) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout.removesuffix("\n")


def same_answer(by_mcp: str, by_cli: str) -> None:
    """Line by line the same, but where a line names a next step: the tool over MCP, its verb on the CLI."""
    mcp_lines, cli_lines = by_mcp.splitlines(), by_cli.splitlines()
    assert len(mcp_lines) == len(cli_lines), (by_mcp, by_cli)
    for mcp_line, cli_line in zip(mcp_lines, cli_lines, strict=True):
        if mcp_line == cli_line:
            continue
        tools = re.findall(r"teleclaude__(\w+)\(", mcp_line)
        assert tools and "teleclaude__" not in cli_line, (mcp_line, cli_line)
        for tool in tools:
            assert "teleclaude " + " ".join(CLI_VERBS[tool]) in cli_line, (mcp_line, cli_line)


def without_minutes_left(table: str) -> str:
    """The LEFT column counts down between two calls; everything else must match."""
    return re.sub(r" +-?\d+m  ", " <left>  ", table)


def test_every_tool_has_a_cli_verb(cli):
    assert tool_names() == {f"teleclaude__{tool}" for tool in CLI_VERBS}
    for words in CLI_VERBS.values():
        assert cli(*words, "--help").returncode == 0, words


def test_next_prepare(project, cli, call_tool):
    assert call_tool("teleclaude__next_prepare", cwd=str(project)) == stdout(cli("next-prepare", cwd=project))
    same_answer(
        call_tool("teleclaude__next_prepare", slug=PREPARED, cwd=str(project)),
        stdout(cli("next-prepare", PREPARED, "--cwd", str(project))),
    )


def test_next_work(project, cli, call_tool):
    # The first call claims the item and creates the worktree; the second gives the same dispatch.
    assert call_tool("teleclaude__next_work", cwd=str(project)) == stdout(cli("next-work", cwd=project))


def test_errors(project, not_a_repo, cli, call_tool, monkeypatch):
    monkeypatch.chdir(project)
    here = project
    pairs = [
        (call_tool("teleclaude__next_work", cwd=str(not_a_repo)), cli("next-work", "--cwd", str(not_a_repo))),
        (call_tool("teleclaude__next_prepare", slug="Bad Slug"), cli("next-prepare", "Bad Slug", cwd=here)),
        (
            call_tool("teleclaude__mark_agent_unavailable", agent="hal9000"),
            cli("agents", "unavailable", "hal9000", cwd=project),
        ),
        (
            call_tool("teleclaude__mark_agent_available", agent="hal9000"),
            cli("agents", "available", "hal9000", cwd=project),
        ),
        (
            call_tool("teleclaude__mark_agent_unavailable", agent="gemini", unavailable_until="soonish"),
            cli("agents", "unavailable", "gemini", "--until", "soonish", cwd=project),
        ),
    ]
    for text, done in pairs:
        assert text.startswith("ERROR: ")
        assert done.returncode == 1
        same_answer(text, stdout(done))


def test_marking_and_agent_status(project, cli, call_tool, monkeypatch):
    monkeypatch.chdir(project)
    until = (datetime.now(UTC) + timedelta(hours=4)).strftime("%Y-%m-%dT%H:%M:%SZ")

    reason = "quota_exhausted"
    by_mcp = call_tool(
        "teleclaude__mark_agent_unavailable", agent="gemini", unavailable_until=until, reason=reason
    )
    by_cli = stdout(cli("agents", "unavailable", "gemini", "--until", until, "--reason", reason, cwd=project))
    assert by_mcp.startswith("OK: ")
    same_answer(by_mcp, by_cli)

    status = call_tool("teleclaude__agent_status")
    assert "quota_exhausted" in status
    assert without_minutes_left(status) == without_minutes_left(stdout(cli("agents", cwd=project)))

    # The fallback dispatch is the same through both faces too.
    assert call_tool("teleclaude__next_work") == stdout(cli("next-work", cwd=project))

    assert call_tool("teleclaude__mark_agent_available", agent="gemini") == stdout(
        cli("agents", "available", "gemini", cwd=project)
    )
    assert call_tool("teleclaude__agent_status") == stdout(cli("agents", cwd=project))
