"""The real Codex CLI as a worker on another computer (the loopback sshd, set up by over_ssh.py): what only
codex shows there. Every CLI's build over ssh, its hook ending the turn through the pane's mark:
test_contract.py."""

from __future__ import annotations

from datetime import timedelta

from teleclaude.demo.model_server import Fail
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import Ended, EventKind, SessionState

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)
from .over_ssh import start_build
from .watching import events_until


def test_a_remote_codexs_usage_limit_reaches_this_machine_from_its_screen(
    remote_clone, model_server, project, sshd
):
    """Its rollout file is over there (the UserPromptSubmit hook keeps nothing for a remote worker): the `■`
    row codex ends the turn with, read over ssh, makes codex unavailable here until the reset it names."""
    remote_clone("codex")
    model_server.add(Fail("session_limit", resets_in=3 * 3600))  # HTTP 429 usage_limit_reached
    runtime = open_runtime(project)
    _, started = start_build(runtime, project, "codex")
    events = events_until(runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith("quota_exhausted"), events[-1].detail
    assert ": ■ " in events[-1].detail  # "■ You’ve hit your usage limit. … try again at 10:25 PM."
    until = runtime.context.availability.unavailable(runtime.clock())["codex"].until
    expected = started.session.created_at + timedelta(seconds=3 * 3600)
    assert abs(until - expected) < timedelta(minutes=2)
    limited = runtime.store.get(started.session.id)
    assert limited is not None and limited.state is SessionState.RATE_LIMITED
    assert not sshd.db.exists()
    ended = runtime.end_session(started.session.id)
    assert isinstance(ended, Ended) and ended.session.state.is_final
