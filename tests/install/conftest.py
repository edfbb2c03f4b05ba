"""Fixtures for install, init and new: a real git repository, the CLI in-process, and file snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from teleclaude import cli

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_agent_env(monkeypatch):
    """Agent CLIs read these; a developer's own settings must not leak into a test."""
    monkeypatch.delenv("CODEX_HOME", raising=False)


@pytest.fixture
def home(isolated_environment) -> Path:
    return isolated_environment


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path, copy_repository) -> Path:
    return copy_repository(_build_repo, tmp_path / "project")


def _build_repo(root: Path) -> None:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "commit.gpgsign", "false")
    (root / "README.md").write_text("# project\n")
    (root / "src").mkdir()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")


@pytest.fixture
def run(capsys) -> Callable[..., tuple[int, str]]:
    """`teleclaude ARGS` in-process: (exit status, stdout)."""

    def call(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = cli.main(list(args))
        out = capsys.readouterr().out
        assert "Traceback" not in out
        return code, out

    return call


@pytest.fixture
def run_process(isolated_environment) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`python -m teleclaude ARGS` as a process, with the isolated HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "TELECLAUDE_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))

    def call(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "teleclaude", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return call


def _snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    found = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        found[str(path.relative_to(root))] = (None if path.is_dir() else path.read_bytes(), stat.st_mtime_ns)
    return found


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, tuple[bytes | None, int]]]:
    """Every file and folder under a root: its bytes (None for a folder) and modification time."""
    return _snapshot
