"""A computer ssh cannot reach (nothing listens on its port) is `ERROR: COMPUTER_UNREACHABLE` when a worker
is started there, not `TMUX_FAILED`: tmux is fine, the network or the login is not."""

from __future__ import annotations

import secrets

from teleclaude.demo.scenario import make_repository
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import SessionState

from ..loopback_sshd import settle_settings
from ..servers import free_port


def test_a_worker_on_a_computer_ssh_cannot_reach_is_computer_unreachable(tmp_path):
    project = make_repository(tmp_path / "project")
    settle_settings(
        project,
        f'[runtime]\nsocket = "tc-unreachable-{secrets.token_hex(4)}"\n\n'
        f'[computers.box]\nhost = "127.0.0.1"\nport = {free_port()}\nproject = "/srv/project"\n'
        'agents = { claude = "claude", gemini = "gemini", codex = "codex" }\n'
        'ssh_options = ["UserKnownHostsFile=/dev/null", "StrictHostKeyChecking=no"]\n',
        "A computer that is gone",
    )
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    runtime = open_runtime(project)
    answer = runtime.start(action, computer="box")
    assert isinstance(answer, Error) and answer.code is ErrorCode.COMPUTER_UNREACHABLE, answer
    assert "box" in answer.message
    [session] = runtime.store.sessions()
    assert session.state is SessionState.ERRORED  # the step is not held by a worker that never started
