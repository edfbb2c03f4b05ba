"""The real Claude Code as a worker on another computer (the loopback sshd, set up by over_ssh.py): what only
claude reports there. Every CLI's build over ssh: test_contract.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.demo.model_server import Text, Usage
from teleclaude.runtime.api import open_runtime

from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .conftest import OAUTH_TOKEN
from .over_ssh import remote_clone as remote_clone  # noqa: F401 (the fixture)
from .over_ssh import start_build
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
