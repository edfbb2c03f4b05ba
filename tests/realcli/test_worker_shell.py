"""What a role command tells a worker to run (the finalizer's `teleclaude finalize SLUG`), its CLI's own shell
tool must find by name, the shell a login one or not. The runtime is started from a venv's bin, not on PATH:
the launcher adds that folder to the worker's PATH. A login bash on Debian then reads /etc/profile, which sets
PATH anew (`PATH="/usr/local/bin:/usr/bin:/bin:…"`); the worker's HOME here does the same in its
~/.bash_profile and ~/.profile, whatever this machine's /etc/profile does."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from teleclaude import __version__
from teleclaude.demo.model_server import Text, body_text, shell
from teleclaude.demo.workers import Workers
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.core.sessions import Started, StartRequest

from .watching import turn_ended

RUNTIMES = {"claude": "runtime", "codex": "codex_runtime", "gemini": "gemini_runtime"}
RESET = "PATH=/usr/bin:/bin\nexport PATH\n"  # what Debian's /etc/profile does to a login shell's PATH


def runtime_from_a_venv(agent, request, home: Path, monkeypatch):
    """The agent's runtime, this teleclaude's folder off PATH and a login shell's profile resetting PATH."""
    runtime = request.getfixturevalue(RUNTIMES[agent])
    venv_bin = str(Path(sys.executable).parent)
    path = [folder for folder in os.environ["PATH"].split(os.pathsep) if folder != venv_bin]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    for profile in (".bash_profile", ".profile"):
        (home / profile).write_text(RESET)
    return runtime


@pytest.mark.parametrize("agent", list(RUNTIMES))
def test_each_cli_as_the_finalizer_finds_teleclaude_by_name_and_the_item_is_delivered(
    agent, request, project, model_server, isolated_environment, monkeypatch
):
    """The finalize of a real run, by each CLI: its `/next-finalize greeting` step runs `teleclaude --version`
    (this teleclaude, found by name though a login shell resets PATH), then `teleclaude finalize greeting`,
    through its own shell tool, in the main checkout."""
    runtime = runtime_from_a_venv(agent, request, isolated_environment, monkeypatch)
    workers = Workers(project)
    while True:
        action = app.next_work("greeting", cwd=project)
        assert isinstance(action, Dispatch), action
        if action.step is Step.FINALIZE:
            break
        workers.run(action)
    model_server.add(
        shell("teleclaude --version", "Which teleclaude"),
        shell("teleclaude finalize greeting", "Finalize greeting"),
        Text("DONE: next-finalize greeting - merged, archived to done/001-greeting/"),
    )
    started = runtime.run_agent_command(
        StartRequest("local", "next-finalize", "greeting", str(project), agent, "med")
    )
    assert isinstance(started, Started), started
    turn_ended(runtime, started.session.id)
    version, finalized = (tool_result(turn) for turn in model_server.turns()[1:3])
    assert f"teleclaude {__version__}" in version, version
    assert "FINALIZED:" in finalized, finalized
    assert [path.name for path in (project / "done").iterdir()] == ["001-greeting"]
    assert not (project / "todos" / "greeting").exists()


def tool_result(turn) -> str:
    """The last item of the conversation the CLI sent after the call: the tool's result, in each provider's
    shape (Anthropic `messages`, OpenAI `input`, Gemini `contents`); past a `system` message after it (claude
    2.1.332's, announcing the MCP tools that connected since its last request)."""
    body = turn.body or {}
    conversation = body.get("messages") or body.get("input") or body.get("contents") or [{}]
    said = [item for item in conversation if not (isinstance(item, dict) and item.get("role") == "system")]
    return body_text(said[-1])
