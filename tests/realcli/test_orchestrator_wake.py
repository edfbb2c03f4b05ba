"""The real Claude Code as the orchestrator, in a tmux pane as a user runs it: it dispatches a worker through
teleclaude's MCP server and ends its turn; nobody calls wait_for_sessions, and the worker's digests arrive
in the orchestrator's pane as its next user messages (issue 21 item 1, seed 003 §B). The timers are
shortened in teleclaude.toml: digest_period 12 s for seed 003's 600 s, digest_period_quiet 5 s for 300 s."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import pytest

from teleclaude.adapters import fs
from teleclaude.adapters.tmux import Tmux
from teleclaude.agents import PROFILES
from teleclaude.demo.agent_homes import claude_environment
from teleclaude.demo.model_server import Step, Text, body_text, mcp, shell
from teleclaude.demo.scenario import commit_all
from teleclaude.runtime import supervisor as supervisors
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.screens import shows_typed
from teleclaude.runtime.core.sessions import EventKind, SessionState
from teleclaude.runtime.core.supervision import MARK

from .conftest import trusted
from .test_claude import until_offered

PERIOD, QUIET = 12, 5
WAKE = f"{MARK} worker "
ORDER = "Dispatch the builder of greeting, then end your turn."
DISPATCH = "teleclaude__run_agent_command"
BUILDER = "You are the **builder**"


@pytest.fixture
def timers(project):
    """The digest timers shortened, reminders out of the way (a reminder would interrupt the held worker)."""
    settings = project / "teleclaude.toml"
    shortened = (
        f"digest_period = {PERIOD}\ndigest_period_quiet = {QUIET}\nsoft_remind = 900\nhard_remind = 1800\n"
    )
    text = settings.read_text()
    assert "[runtime]\n" in text
    settings.write_text(text.replace("[runtime]\n", f"[runtime]\n{shortened}", 1))
    trusted(project)
    commit_all(project, "Short digest timers for the test")


def items(body: dict) -> list[dict]:
    """The conversation of a request: Anthropic's `messages` (claude), the Responses API's `input` (codex),
    the Gemini API's `contents` (gemini)."""
    found = body.get("messages") or body.get("input") or body.get("contents") or []
    return [item for item in found if isinstance(item, dict)]


def called(body: dict) -> list[str]:
    """The tools the model called so far (claude's tool_use blocks, codex's function_call items)."""
    names = [item.get("name", "") for item in items(body) if item.get("type") == "function_call"]
    for message in items(body):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            names += [
                block.get("name", "") for block in message["content"] if block.get("type") == "tool_use"
            ]
        if message.get("role") == "model":
            parts = message.get("parts") or []
            names += [part["functionCall"].get("name", "") for part in parts if "functionCall" in part]
    return names


def dispatched_in(body: dict) -> bool:
    return any(name.endswith(DISPATCH) for name in called(body))


def offers_dispatch(body: dict) -> bool:
    """The MCP tool is offered: by name (claude), or inside the server's namespace (codex)."""
    tools = body.get("tools") or []
    names = [tool.get("name", "") for tool in tools]
    names += [inner.get("name", "") for tool in tools for inner in tool.get("tools", [])]
    names += [inner.get("name", "") for tool in tools for inner in tool.get("functionDeclarations", [])]
    return any(name.endswith(DISPATCH) for name in names)


def last_user_text(body: dict) -> str:
    """The text of the newest user message (a tool's result is not one for codex; for claude it is)."""
    for message in reversed(items(body)):
        if message.get("role") == "user":
            content = message.get("content") or message.get("parts")
            if isinstance(content, str):
                return content
            return " ".join(
                block.get("text", "") if "text" in block else str(block.get("content", ""))
                for block in content or []
                if isinstance(block, dict)
            )
    return ""


def is_worker(body: dict) -> bool:
    return BUILDER in body_text(body)


def models(project, agent: str, release: threading.Event):
    """The scripted model of both CLIs: the worker thinks until `release` is set; the orchestrator dispatches
    it once (waiting for the MCP tools as a real model would: claude's ToolSearch or WaitForMcpServers, a
    second in codex's shell), ends its turn, and acknowledges each digest."""

    def then(body: dict) -> Step:
        if is_worker(body):
            return Text("DONE: next-build greeting - nothing to build", hold=release)
        if WAKE in last_user_text(body):
            return Text("Noted the worker's digest.")
        if dispatched_in(body):
            return Text("The builder is dispatched; ending my turn.")
        # claude loads its MCP tools as a real model would (test_claude.until_offered)
        waiting = until_offered(body, f"mcp__teleclaude__{DISPATCH}") if agent == "claude" else None
        if waiting is None if agent == "claude" else offers_dispatch(body):
            return mcp(
                "teleclaude",
                DISPATCH,
                computer="local",
                command="next-build",
                args="greeting",
                project=str(project),
                agent=agent,
                thinking_mode="med",
            )
        if waiting is not None:
            return waiting
        if len(called(body)) >= 30:
            return Text("DONE: the MCP server never connected")
        return shell("sleep 1", "Wait for the teleclaude MCP server")

    return then


def orchestrator_pane(tmux: Tmux, project, agent: str, binary, url: str) -> str:
    """The agent CLI in a pane of the test's tmux server, started in the project as a user starts it (codex
    told the project is trusted, as the launcher tells its workers)."""
    if agent == "claude":
        env = claude_environment(url) | {"CLAUDE_CODE_MAX_RETRIES": "0"}
        argv = PROFILES["claude"].argv(str(binary), "med")
    elif agent == "codex":  # its environment is the test process's (conftest): the tmux server's
        codex = PROFILES["codex"]
        trust = codex.trust_flags((str(project),)) if codex.trust_flags else ()
        env, argv = {}, codex.argv(str(binary), "med", trust)
    else:  # gemini: its profile's variables trust the folder, as for a worker
        env, argv = dict(PROFILES["gemini"].env), PROFILES["gemini"].argv(str(binary), "med")
    options = [part for key, value in env.items() for part in ("-e", f"{key}={value}")]
    tmux.cmd(
        "new-session",
        "-d",
        "-s",
        "orchestrator",
        "-x",
        "200",
        "-y",
        "50",
        "-c",
        str(project),
        *options,
        *argv,
    )
    return tmux.cmd("list-panes", "-t", "=orchestrator", "-F", "#{pane_id}")[0]


def type_order(tmux: Tmux, pane: str, agent: str, model_server) -> None:
    """The user's order, typed once the CLI shows its prompt, and Enter once it shows the order (a CLI takes
    an Enter read with the text as a newline); Enter again while the order stays where it was typed. A
    taken order may wait in the CLI's queue (gemini: until its MCP server is connected) before the model
    gets it."""
    deadline = time.monotonic() + 120
    profile = PROFILES[agent]
    while True:
        rows = tmux.screen(pane, tmux.views()[pane])
        tail = [row for row in rows if row.strip()][-6:]
        if any(re.search(profile.prompt, row) for row in tail):
            break
        assert time.monotonic() < deadline, "\n".join(rows)
        time.sleep(0.2)
    time.sleep(1.0)  # prompt_stable: a dialog may still replace the prompt
    tmux.send_text(pane, ORDER)
    until(lambda: shows_typed(order_screen(tmux, pane), ORDER), 120, f"{agent} never showed the order")
    for _ in range(5):
        time.sleep(0.5)
        typed = order_rows(order_screen(tmux, pane))
        tmux.send_key(pane, "Enter")
        try:
            model_server.wait_for(lambda r: r.turn and ORDER in r.text(), timeout=5)
            return
        except TimeoutError:
            if order_rows(order_screen(tmux, pane)) != typed:  # taken: sent, or queued
                model_server.wait_for(lambda r: r.turn and ORDER in r.text(), timeout=180)
                return
    pytest.fail(f"{agent} never took the order:\n" + "\n".join(order_screen(tmux, pane)))


def order_screen(tmux: Tmux, pane: str) -> list[str]:
    return tmux.screen(pane, tmux.views()[pane])


def order_rows(rows: list[str]) -> list[tuple[int, str]]:
    """Where the order shows, and how: in the input, queued, or sent."""
    return [(i, row) for i, row in enumerate(rows) if ORDER in row]


def orchestrator_turns(model_server) -> list:
    return [t for t in model_server.turns() if not is_worker(t.body or {})]


def digests(model_server) -> list:
    """The orchestrator's turns that began with a digest typed into its pane, in order."""
    return [t for t in orchestrator_turns(model_server) if WAKE in last_user_text(t.body)]


def until(check, seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(why)
        time.sleep(0.2)


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_a_real_orchestrator_is_woken_in_its_pane_by_digests_and_a_final_one(
    agent, project, timers, model_server, tmux_socket, request, monkeypatch
):
    binary = request.getfixturevalue(agent)  # installed into a throwaway HOME, as a user does
    if agent == "codex":  # codex gives an MCP server HOME and PATH, not TELECLAUDE_DB: the default database
        monkeypatch.setenv("TELECLAUDE_DB", str(Path(os.environ["HOME"], ".teleclaude", "teleclaude.db")))
    release = threading.Event()
    model_server.then = models(project, agent, release)
    tmux = Tmux(tmux_socket)
    pane = orchestrator_pane(tmux, project, agent, binary, model_server.url)
    try:
        type_order(tmux, pane, agent, model_server)
        model_server.wait_for(lambda r: r.turn and dispatched_in(r.body or {}), timeout=180)
        runtime = open_runtime(project)
        (worker,) = [s for s in runtime.store.sessions() if s.command == "next-build"]
        assert worker.parent.startswith("pane:") and worker.parent.endswith(f":{pane}")
        assert worker.parent_agent == agent
        # the worker thinks on; the orchestrator's turn is over, and nobody polls: digests come to it
        until(lambda: len(digests(model_server)) >= 2, 6 * PERIOD + 120, "fewer than two digests arrived")
        first, second = digests(model_server)[:2]
        assert f"worker {worker.id} ({agent} /next-build greeting)" in last_user_text(first.body)
        assert "NO PROGRESS DETECTED" in last_user_text(first.body)
        assert "unchanged since the last digest" in last_user_text(second.body)
        # seed 003's 600 s, then 300 s, shortened: counted when the supervisor made them (its events, which
        # nobody has read) from the worker's delivery, not from the orchestrator's request after the
        # dispatch, which gemini on a loaded machine sent 6+ s after the worker was delivered
        made = [e.at for e in runtime.store.undelivered([worker.id]) if e.kind is EventKind.DIGEST]
        assert worker.delivered_at and (made[0] - worker.delivered_at).total_seconds() >= PERIOD
        assert QUIET <= (made[1] - made[0]).total_seconds() < PERIOD
        release.set()  # the worker answers and its turn ends (its Stop hook): a final digest
        until(
            lambda: any("turn ended" in last_user_text(t.body) for t in digests(model_server)),
            120,
            "no final digest arrived",
        )
        ended = runtime.store.get(worker.id)
        assert ended is not None and ended.state is SessionState.TURN_ENDED
        for turn in model_server.turns():
            assert not any(name.endswith("wait_for_sessions") for name in called(turn.body or {}))
        runtime.end_session(worker.id)
        lock = supervisors.lock_path(runtime.store.path, str(project.resolve()))

        def supervisor_ended() -> bool:
            with fs.try_lock(lock) as free:
                return free

        until(supervisor_ended, 30, "the supervisor did not exit once its worker was ended")
    finally:
        release.set()
