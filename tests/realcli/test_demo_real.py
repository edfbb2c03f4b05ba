"""`teleclaude demo --real claude`: one roadmap item through real claude workers on the scripted server."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_real_demo_delivers_one_item_with_claude(agent_clis, isolated_environment):
    env = {key: value for key, value in os.environ.items() if not key.startswith("TELECLAUDE_SESSION")}
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "demo", "--real", "claude"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\nCOMPLETE: greeting" in done.stdout, done.stdout
    assert "turn_ended: stop hook" in done.stdout  # every turn end came from claude's own hook
    assert not list(isolated_environment.iterdir())  # the demo kept to its own HOME and database
