"""The real Claude Code as a worker on another computer (the loopback sshd, set up by over_ssh.py)."""

from __future__ import annotations

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .over_ssh import build_over_ssh
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)


def test_a_real_claude_over_ssh_commits_and_its_stop_hook_ends_the_turn(
    remote_clone, model_server, project, sshd
):
    remote = remote_clone("claude")
    build_over_ssh("claude", model_server, project, remote, sshd)
