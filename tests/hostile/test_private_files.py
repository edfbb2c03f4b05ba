"""`~/.teleclaude` holds who works on what (the sessions), the HTTP token and install's record: its owner's
alone. A fresh one is made 0700 with the database 0600 (its -wal and -shm follow the database's mode); an
older install's 0755 folder and 0644 files are tightened when the database is next opened."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def home_env(subprocess_env) -> dict[str, str]:
    """The CLI's environment without $TELECLAUDE_DB: the database goes to ~/.teleclaude/teleclaude.db."""
    return {key: value for key, value in subprocess_env.items() if key != "TELECLAUDE_DB"}


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teleclaude", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.umask(0o022),  # the usual umask, whatever the test runner's
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_fresh_teleclaude_folder_and_database_are_private(home_env, tmp_path):
    done = run(home_env, tmp_path, "agents", "unavailable", "claude", "--until", "1h")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = Path(home_env["HOME"]) / ".teleclaude"
    assert mode(folder) == 0o700
    assert mode(folder / "teleclaude.db") == 0o600
    assert {path.name for path in folder.iterdir() if mode(path) & 0o077} == set()


def test_an_older_installs_folder_and_files_are_tightened_when_the_database_is_read(home_env, tmp_path):
    folder = Path(home_env["HOME"]) / ".teleclaude"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    assert run(home_env, tmp_path, "agents", "unavailable", "claude").returncode == 0
    database = folder / "teleclaude.db"
    for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        path.touch()
        path.chmod(0o644)
    folder.chmod(0o755)
    done = run(home_env, tmp_path, "agents")  # only reads
    assert done.returncode == 0 and "claude" in done.stdout, done.stdout + done.stderr
    assert mode(folder) == 0o700
    assert mode(database) == 0o600
    assert {path.name for path in folder.iterdir() if mode(path) & 0o077} == set()  # -wal, -shm: gone or 0600


def test_a_folder_teleclaude_db_names_elsewhere_is_left_as_it_is(subprocess_env, tmp_path):
    shared = Path(subprocess_env["TELECLAUDE_DB"]).parent
    shared.chmod(0o755)
    assert run(subprocess_env, tmp_path, "agents", "unavailable", "claude").returncode == 0
    assert mode(shared) == 0o755  # the user's folder, not teleclaude's
    assert mode(Path(subprocess_env["TELECLAUDE_DB"])) == 0o600
