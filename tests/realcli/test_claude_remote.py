"""The real Claude Code as a worker on another computer (the loopback sshd, set up by over_ssh.py): what only
claude reports there. Every CLI's build over ssh: test_contract.py."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from teleclaude.adapters import sandbox, ssh
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.demo.model_server import Text, Usage
from teleclaude.runtime.api import open_runtime

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .conftest import OAUTH_TOKEN
from .over_ssh import build_over_ssh, start_build
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)
from .watching import turn_ended, with_env


def test_a_real_claudes_usage_over_ssh_reaches_this_machine_through_its_pane(
    remote_clone, model_server, project, sshd
):
    """Its status line runs over there (installed there by `teleclaude install`): it marks its pane with the
    usage claude reports, and the observer records it here, for claude."""
    remote_clone("claude")
    model_server.add(Text("Not built yet.", usage=Usage(five_hour=0.93, seven_day=0.4)))
    runtime = open_runtime(project)
    with_env(runtime, "claude", ANTHROPIC_API_KEY=None, CLAUDE_CODE_OAUTH_TOKEN=OAUTH_TOKEN)  # a subscriber
    _, started = start_build(runtime, project, "claude")
    turn_ended(runtime, started.session.id)
    deadline, recorded = time.monotonic() + 60, dict[str, float]()
    while time.monotonic() < deadline and recorded != {"5h": 93.0, "7d": 40.0}:
        runtime.list_sessions()  # a look: the pane's marks are read
        windows = AvailabilityStore().usage(datetime.now(UTC)).get("claude", ())
        recorded = {w.window: w.used_percent for w in windows}
        time.sleep(0.2)
    assert recorded == {"5h": 93.0, "7d": 40.0}
    assert not sshd.db.exists()  # nothing recorded in a database over there


def test_a_real_claude_over_ssh_builds_in_bubblewrap_there_and_its_hook_ends_the_turn(
    remote_clone, model_server, project, sshd, isolated_environment, monkeypatch
):
    """`[runtime] sandbox = "auto"` where bubblewrap works over there: claude starts inside it (its pane's
    command is bwrap's), edits and commits in its worktree, and its Stop hook's mark, left in its channel,
    reaches its pane through the relay and ends the turn (no idle rule); its home there holds no key it can
    read."""
    if not sandbox.probe(os.environ).usable:
        pytest.skip("bubblewrap does not work here (apt-get install bubblewrap)")
    config = isolated_environment / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nsandbox = "auto"\n')
    remote = remote_clone("claude")
    started_commands: list[str] = []
    real_start = ssh.RemoteTmux.start

    def start(self, name, cwd, argv, env, *args):  # what the worker's pane runs, kept
        started_commands.append(" ".join(argv))
        return real_start(self, name, cwd, argv, env, *args)

    monkeypatch.setattr(ssh.RemoteTmux, "start", start)
    build_over_ssh("claude", model_server, project, remote, sshd)
    (command,) = started_commands
    assert "bwrap" in command and "--unshare-pid" in command
