"""The real Claude Code as a worker on another computer (the loopback sshd, set up by over_ssh.py)."""

from __future__ import annotations

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .over_ssh import build_over_ssh, set_up_remote


def test_a_real_claude_over_ssh_commits_and_its_stop_hook_ends_the_turn(
    agent_clis, model_server, project, sshd, tmp_path, tmux_socket, isolated_environment, monkeypatch
):
    remote = set_up_remote(
        "claude",
        agent_clis,
        model_server,
        project,
        sshd,
        tmux_socket,
        tmp_path,
        isolated_environment,
        monkeypatch,
    )
    build_over_ssh("claude", model_server, project, remote, sshd)
