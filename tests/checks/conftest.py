"""Fixtures for lint, hooks, the stop hook and status: real repositories and the CLI, in process or as one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ..in_process import in_process

REPO_ROOT = Path(__file__).resolve().parents[2]

ROADMAP = "# Roadmap\n\n- [ ] feat — the feature\n- [ ] other (after: feat) — later\n"
REQUIREMENTS = "# Requirements\n\nIt works.\n"
PLAN = "# Plan\n\n## Group 1: Code\n\n- [ ] write it\n- [ ] test it\n"


def git(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, env=env)


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def commit(root: Path, message: str = "change", env: dict[str, str] | None = None):
    git(root, "add", "-A", env=env)
    return git(root, "commit", "-q", "-m", message, env=env)


@pytest.fixture
def cli_env(isolated_environment) -> dict[str, str]:
    """The environment for `python -m teleclaude` and for git (whose hooks start it): isolated, importable."""
    env = {key: value for key, value in os.environ.items() if key not in ("WORKSPACE", "TELECLAUDE_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env.pop("NO_COLOR", None)
    return env


def build_repo(root: Path) -> None:
    """The repository of `repo`, made at `root`."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "commit.gpgsign", "false")
    write(root, "README.md", "# project\n")
    write(root, "todos/roadmap.md", ROADMAP)
    write(root, "todos/feat/requirements.md", REQUIREMENTS)
    write(root, "todos/feat/implementation-plan.md", PLAN)
    commit(root, "Initial commit")


@pytest.fixture
def repo(tmp_path, cli_env, copy_repository) -> Path:
    """A repository on main with a committed roadmap of two items; `feat` is prepared."""
    return copy_repository(build_repo, tmp_path / "project")


def add_tree(root: Path, slug: str) -> Path:
    """`git worktree add trees/{slug} -b {slug}`, with trees/ excluded the way next_work does it."""
    exclude = root / ".git" / "info" / "exclude"
    if "/trees/" not in exclude.read_text():
        exclude.write_text(exclude.read_text() + "/trees/\n")
    git(root, "worktree", "add", "-q", f"trees/{slug}", "-b", slug)
    return root / "trees" / slug


@pytest.fixture(name="add_tree")
def add_tree_fixture() -> Callable[[Path, str], Path]:
    return add_tree


@pytest.fixture
def cli(cli_env, tmp_path, monkeypatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`cli("lint", "--cwd", str(repo))`: the CLI in this process (`teleclaude.cli.main`), `stdin=` what it
    reads (a hook's JSON); `process=True` or `env=` start `python -m teleclaude` instead, for what a whole
    process shows: its exit status, its stderr, its environment."""

    def run(
        *args: str,
        cwd: Path | None = None,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        process: bool = False,
    ):
        if not (process or env):
            return in_process(list(args), cwd or tmp_path, monkeypatch, stdin or "")
        return subprocess.run(
            [sys.executable, "-m", "teleclaude", *args],
            cwd=cwd or tmp_path,
            env={**cli_env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


class Tools:
    """The helpers above, for test modules (which cannot import this conftest under importlib mode)."""

    git = staticmethod(git)
    write = staticmethod(write)
    commit = staticmethod(commit)


@pytest.fixture
def tools() -> type[Tools]:
    return Tools
