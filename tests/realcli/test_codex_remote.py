"""The real Codex CLI as a worker on another computer (the loopback sshd, set up by over_ssh.py): its Stop
hook ends the turn through the pane's mark."""

from __future__ import annotations

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .over_ssh import build_over_ssh, set_up_remote


def test_a_real_codex_over_ssh_commits_and_its_stop_hook_ends_the_turn(
    agent_clis, model_server, project, sshd, tmp_path, tmux_socket, isolated_environment, monkeypatch
):
    remote = set_up_remote(
        "codex",
        agent_clis,
        model_server,
        project,
        sshd,
        tmux_socket,
        tmp_path,
        isolated_environment,
        monkeypatch,
    )
    build_over_ssh("codex", model_server, project, remote, sshd)
