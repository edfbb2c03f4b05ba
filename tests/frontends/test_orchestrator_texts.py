"""What an orchestrator is told, by the role commands it runs and by the MCP server it calls, agrees with
what the runtime does: digests pushed into a parent in tmux (polling only outside tmux), and one rule for an
unresponsive worker."""

from __future__ import annotations

import asyncio
import re

import pytest

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.runtime.core.supervision import MARK, unresponsive_after
from teleclaude.setup import install

ORCHESTRATORS = ("next-prepare", "next-work")
_ITEM = re.compile(r"^\s*(?:[-*]|\d+\.)\s")
_DURATION = re.compile(r"\b(\d+)\s*(d|h|m|s|min|minutes?|hours?|seconds?|days?)\b")
_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def served() -> dict[str, str]:
    """The MCP server's instructions and each tool's description, as a client receives them."""
    from fastmcp import Client

    from teleclaude.mcp import build_server

    async def go():
        async with Client(build_server(), mode="legacy") as client:  # the handshake that has instructions
            assert client.initialize_result is not None
            return client.initialize_result.instructions, await client.list_tools()

    instructions, tools = asyncio.run(go())
    return {"instructions": instructions or "", **{tool.name: tool.description or "" for tool in tools}}


def shipped() -> dict[str, str]:
    return {f"/{name}": install.command_markdown(name) for name in install.command_names()}


def passages(text: str) -> list[str]:
    """A text's paragraphs and list items, each as one line."""
    found: list[list[str]] = [[]]
    for line in text.splitlines():
        if not line.strip() or _ITEM.match(line):
            found.append([])
        found[-1].append(line.strip())
    return [" ".join(lines) for lines in found if any(lines)]


def seconds(text: str) -> set[int]:
    return {int(amount) * _SECONDS[unit[0]] for amount, unit in _DURATION.findall(text)}


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {**shipped(), **served()}


def test_no_command_or_tool_tells_to_poll_unless_the_orchestrator_is_outside_tmux(texts):
    polling = {
        (name, passage)
        for name, text in texts.items()
        for passage in passages(text)
        if "wait_for_sessions" in passage and "tmux" not in passage
    }
    assert polling == set()
    assert "tmux" in texts["teleclaude__wait_for_sessions"]  # the wait itself says who need not call it


@pytest.mark.parametrize("name", ["instructions", *(f"/{name}" for name in ORCHESTRATORS)])
def test_the_orchestrators_hear_of_their_workers_from_the_line_the_supervisor_types(texts, name):
    assert MARK in texts[name]
    assert "wait_for_sessions" in texts[name]  # and how to wait where nothing can be typed into them


def test_every_time_said_about_an_unresponsive_worker_is_the_runtimes(texts):
    config = RuntimeConfig()
    rule = {int(unresponsive_after(config)), int(config.unresponsive_pause)}
    stated = {
        (name, passage): seconds(passage)
        for name, text in texts.items()
        for passage in passages(text)
        if "unresponsive" in passage.lower()
    }
    assert stated, "no text tells the orchestrator what happens to an unresponsive worker"
    assert {where: times for where, times in stated.items() if not times <= rule} == {}
    assert any(times == rule for times in stated.values())  # the rule is stated, with both of its times
