"""Real git repositories for the next_work tests: a prepared item `feat` and an unprepared `other`.

Test modules import from here (the `repo` fixture too), never from each other.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PLAN = "# Plan\n## Group 1: Code\n- [ ] write it\n- [ ] test it\n## Group 5: After\n- [ ] announce\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def commit(root: Path, message: str = "change") -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def prepare(root: Path, slug: str, plan: str = PLAN) -> None:
    write(root, f"todos/{slug}/requirements.md", f"# {slug}\nDo it.\n")
    write(root, f"todos/{slug}/implementation-plan.md", plan)


def _build_repo(root: Path) -> None:
    root.mkdir()
    git(root, "init", "-q")  # as pytest-git's `git_repo` makes one: git's default branch
    write(root, "todos/roadmap.md", "# Roadmap\n- [ ] feat — the feature\n- [ ] other — later\n")
    prepare(root, "feat")
    commit(root, "roadmap")


@pytest.fixture
def repo(tmp_path, copy_repository) -> Path:
    """A committed repository with one prepared item `feat` and an unprepared `other`."""
    return copy_repository(_build_repo, tmp_path / "project")


def tree(root: Path, slug: str = "feat") -> Path:
    return root / "trees" / slug
