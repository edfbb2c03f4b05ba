"""What the hostile stand-in builder (`FAKE_AGENT_HOSTILE`, demo/stand_in.py `attack`) tried, checked the same
way for a sandboxed worker here (tests/hostile/test_sandbox.py) and on another computer
(tests/runtime/test_remote_sandbox.py), and what a worker's `sessions report` from its channel does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from teleclaude.adapters import sandbox
from teleclaude.adapters.tmux import Tmux
from teleclaude.demo import stand_in

ATTACKS = {
    "write_home",
    "write_main",
    "write_other_tree",
    "read_ssh_key",
    "update_ref_main",
    "push",
    "kill",
    "tmux_send_keys",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def report_from_channel(channel: Path, session_id: str, text: str) -> subprocess.CompletedProcess[str]:
    """`teleclaude sessions report SESSION TEXT` as the sandboxed worker "mine" runs it from `channel`."""
    env = {**os.environ, sandbox.CHANNEL: str(channel), "TELECLAUDE_SESSION_ID": "mine"}
    argv = [sys.executable, "-m", "teleclaude", "sessions", "report", session_id, text]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def assert_every_attack_refused(
    project: Path,
    home: Path,
    checkout: Path,
    pushed_to: Path,
    bystander: subprocess.Popen[bytes],
    tmux: Tmux,
    victim: str,
) -> None:
    """Each attack of its report (committed on `project`'s main with the item, delivered) was refused, and
    none reached: the worker's `home` folder outside its sandbox, the main `checkout` it worked beside (the
    project here, its clone there) and its sibling worktree `trees/sibling`, the bare repository
    `pushed_to`, the `bystander` process standing for `teleclaude run`, the `victim` pane of `tmux`."""
    outcomes = json.loads(git(project, "show", f"main:{stand_in.HOSTILE_REPORT}"))
    assert set(outcomes) == ATTACKS
    assert {name: how for name, how in outcomes.items() if not how.startswith("refused")} == {}
    assert not (home / "outside").exists()
    assert not (checkout / "intruder.txt").exists()
    assert list((checkout / "trees" / "sibling").iterdir()) == []
    assert git(pushed_to, "for-each-ref") == ""
    assert bystander.poll() is None
    assert "pwned" not in "\n".join(tmux.capture(victim, 0, 49))
    assert "Merge greeting" in git(project, "log", "--format=%s", "main")
