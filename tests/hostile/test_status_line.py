"""Issue 39.6: a user's own status line, run inside teleclaude's (`hook statusline --then COMMAND`), cannot
hang Claude Code's or fill the memory, whatever the processes it starts do: a process that left its group
(`setsid`) and held the output open kept the hook waiting for it, and `yes` was read into gigabytes. And a
status line of the user's that merely has `hook statusline` in its command is theirs, shown as before."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from .conftest import hook

STATUS = json.dumps({"model": {"display_name": "Opus 4.8"}})


def _status_line(env, cwd: Path, then: str, memory: int | None = None) -> subprocess.CompletedProcess[str]:
    """The hook as Claude Code runs it; at most `memory` bytes of address space when given."""

    def limited() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return hook(env, cwd, "statusline", "--agent", "claude", "--then", then, stdin=STATUS, preexec_fn=limited)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_process_of_theirs_that_left_the_group_and_holds_the_output_is_not_waited_for(
    subprocess_env, tmp_path
):
    pid_file = tmp_path / "stray.pid"
    stray = f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 3600' & echo mine"
    try:
        shown = _status_line(subprocess_env, tmp_path, stray)
        assert (shown.returncode, shown.stdout) == (0, "mine\n")  # theirs, shown as it printed it
        deadline = time.monotonic() + 60  # a hang's bound: the stray may start after ours has returned
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the stray never started"
            time.sleep(0.05)
        assert _alive(int(pid_file.read_text()))  # returned with the stray still holding the pipe
    finally:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:  # never leave it running
            time.sleep(0.05)
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_a_status_line_that_prints_without_end_is_ended_and_ours_shown(subprocess_env, tmp_path):
    # half a gigabyte of address space: teleclaude needs a tenth of it; what `yes` prints in 3.5 s is more
    shown = _status_line(subprocess_env, tmp_path, "yes", memory=512 * 1024 * 1024)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "Opus 4.8\n"  # ours, since theirs went wrong
    assert "yes\n" not in shown.stderr


def test_a_users_status_line_that_has_hook_statusline_in_its_command_is_theirs(
    isolated_environment, subprocess_env, cli
):
    home = isolated_environment
    script = home / "bin" / "ccline"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\necho "ccline: $*"\n')
    script.chmod(0o755)
    settings_file = home / ".claude" / "settings.json"
    settings_file.parent.mkdir()
    theirs = {"type": "command", "command": f"{script} hook statusline --theme dark"}
    settings_file.write_text(json.dumps({"statusLine": theirs}))
    assert cli("install", "--claude").returncode == 0
    command = json.loads(settings_file.read_text())["statusLine"]["command"]
    shown = subprocess.run(
        ["/bin/sh", "-c", command],
        input=STATUS,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (shown.returncode, shown.stdout) == (0, "ccline: hook statusline --theme dark\n")
    assert cli("install", "--claude", "--uninstall").returncode == 0
    assert json.loads(settings_file.read_text())["statusLine"] == theirs  # and it comes back as it was
