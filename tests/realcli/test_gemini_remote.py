"""The real Gemini CLI as a worker on another computer (the loopback sshd, set up by over_ssh.py): its
AfterAgent hook ends the turn through the pane's mark."""

from __future__ import annotations

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .over_ssh import build_over_ssh
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)


def test_a_real_gemini_over_ssh_commits_and_its_after_agent_hook_ends_the_turn(
    remote_clone, model_server, project, sshd
):
    remote = remote_clone("gemini")
    build_over_ssh("gemini", model_server, project, remote, sshd)
