"""`teleclaude demo --real AGENT`: one roadmap item through real CLI workers on the scripted server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..tmux_reaper import reaper


def demo(agent: str) -> subprocess.CompletedProcess:
    """The demo as a user runs it, its tmux servers in a folder of their own: whatever way it ends (a hang's
    timeout kills it mid-run), a watcher then ends every server there, with the CLIs in their panes."""
    folder = Path(tempfile.mkdtemp(prefix="tc-tmux-", dir="/tmp"))  # short: a socket path fits 108 bytes
    env = {key: value for key, value in os.environ.items() if not key.startswith("TELECLAUDE_SESSION")}
    process = subprocess.Popen(
        [sys.executable, "-m", "teleclaude", "demo", "--real", agent, "--verbose"],
        env=env | {"TMUX_TMPDIR": str(folder)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watcher = reaper(owner=process.pid, tmux_dir=folder)
    try:
        # only a hang's bound: opencode's demo takes ~70 s quiet, and passed 240 s at load 40
        stdout, stderr = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        stderr += "\n(killed after 600 s)"
    finally:
        watcher.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def tool_calls(printed: str) -> list[tuple[str, str]]:
    """(command, agent) of every TOOL_CALL the planner answered, in order; the same call again right after
    it is one step whose start the run tried again (a CLI slow to take its Enter on a loaded machine)."""
    calls: list[tuple[str, str]] = []
    for block in printed.split("TOOL_CALL:")[1:]:
        fields = dict(re.findall(r'^\s*(\w+)="([^"]*)",?$', block.split(")", 1)[0], re.MULTILINE))
        call = (fields["command"], fields["agent"])
        if not calls or calls[-1] != call:
            calls.append(call)
    return calls


def test_the_real_demo_delivers_one_item_with_claude(agent_clis, isolated_environment):
    done = demo("claude")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\nCOMPLETE: greeting" in done.stdout, done.stdout
    assert "turn_ended: stop hook" in done.stdout  # every turn end came from claude's own hook
    assert {agent for _, agent in tool_calls(done.stdout)} == {"claude"}
    assert not list(isolated_environment.iterdir())  # the demo kept to its own HOME and database


# opencode's demo is test_run_quirks.py's quiet run, in that process (its requests looked at too): its three
# starts cost ~45 s of CPU, and the run there was the same one less the finalize
@pytest.mark.parametrize("agent", ["gemini", "codex"])
def test_the_real_demo_moves_a_rate_limited_step_to_claude(agent_clis, isolated_environment, agent):
    """The agent builds and reviews with its own shell tool; its provider runs out on the finalize (gemini:
    the daily-quota dialog, codex: the usage limit), the runtime reads the limit off its screen, and the
    planner gives the finalize to the real claude, which delivers the item."""
    done = demo(agent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\nCOMPLETE: greeting" in done.stdout, done.stdout
    assert tool_calls(done.stdout) == [
        ("next-build", agent),
        ("next-review", agent),
        ("next-finalize", agent),
        ("next-finalize", "claude"),  # after the limit: the next agent of the demo's matrix
    ], done.stdout
    limited = [line for line in done.stdout.splitlines() if " rate_limited: " in line]
    assert len(limited) == 1 and "rate_limited: quota_exhausted" in limited[0], done.stdout
    ended = re.findall(r" turn_ended: (.*)", done.stdout)
    assert ended == ["stop hook"] * 3, done.stdout  # gemini's AfterAgent / codex's Stop hook, then claude's
    assert not list(isolated_environment.iterdir())  # the demo kept to its own HOME and database
