"""Fixtures for the front ends: a real git project, an isolated environment, and ways to call both faces.

`project` is a repository on branch main with a roadmap of two items; the first, `alpha-feature`, is
prepared (requirements and a plan with one open build task) and committed, the second, `beta-feature`, has
no files yet. Nothing touches the real home folder or ~/.teleclaude.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ..in_process import in_process

REPO_ROOT = Path(__file__).resolve().parents[2]
PREPARED = "alpha-feature"
UNPREPARED = "beta-feature"

ROADMAP = f"""# Roadmap

## Features

- [ ] {PREPARED} — The first feature, prepared and committed.
- [ ] {UNPREPARED} — The second feature, not prepared yet.
"""

REQUIREMENTS = """# Requirements

The feature exists.
"""

PLAN = """# Implementation plan

## Group 1

- [ ] task
"""

FIELD = re.compile(r'^\s*([a-z_]+)="((?:[^"\\]|\\.)*)",?\s*$')


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def isolated_env(isolated_environment) -> dict[str, str]:
    """The private HOME, config dir and TELECLAUDE_DB of tests/conftest.py, as a dict for subprocesses."""
    keys = ("HOME", "XDG_CONFIG_HOME", "TELECLAUDE_DB", "GIT_CONFIG_NOSYSTEM")
    return {key: os.environ[key] for key in keys}


@pytest.fixture
def project(tmp_path, isolated_env, copy_repository) -> Path:
    return copy_repository(_build_project, tmp_path / "project")


def _build_project(root: Path) -> None:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test User")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "commit.gpgsign", "false")
    (root / "README.md").write_text("# project\n")
    todos = root / "todos"
    (todos / PREPARED).mkdir(parents=True)
    (todos / "roadmap.md").write_text(ROADMAP)
    (todos / PREPARED / "requirements.md").write_text(REQUIREMENTS)
    (todos / PREPARED / "implementation-plan.md").write_text(PLAN)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "Initial commit with a prepared item")


@pytest.fixture
def not_a_repo(tmp_path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


@pytest.fixture
def subprocess_env(isolated_env) -> dict[str, str]:
    """The environment for `python -m teleclaude`: the isolated one, with the package importable."""
    env = {key: value for key, value in os.environ.items() if key not in ("WORKSPACE", "TELECLAUDE_DEBUG")}
    env.update(isolated_env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture
def cli(subprocess_env, tmp_path, monkeypatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the CLI: `cli("next-work", "--cwd", str(project))`, in tmp_path by default. Parsing and output are
    tested in this process (`teleclaude.cli.main`); `process=True` or python flags start `python -m
    teleclaude` instead, for what only a whole process shows (imports, logging set-up)."""

    def run(*args: str, cwd: Path | None = None, python_flags: tuple[str, ...] = (), process: bool = False):
        if process or python_flags:
            return subprocess.run(
                [sys.executable, *python_flags, "-m", "teleclaude", *args],
                cwd=cwd or tmp_path,
                env=subprocess_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        return in_process(list(args), cwd or tmp_path, monkeypatch)

    return run


@pytest.fixture
def call_tool() -> Callable[..., str]:
    """Call one tool through `fastmcp.Client(build_server())` in memory; the text of its one content."""
    from fastmcp import Client

    from teleclaude.mcp import build_server

    def call(name: str, **arguments) -> str:
        async def go():
            async with Client(build_server()) as client:
                return await client.call_tool(name, arguments)

        result = asyncio.run(go())
        assert not result.is_error, result
        assert len(result.content) == 1
        return result.content[0].text

    return call


def parse_tool_call(text: str) -> dict[str, str]:
    """The `key="value"` fields of a `TOOL_CALL:` answer."""
    lines = text.splitlines()
    assert lines[0] == "TOOL_CALL:", text
    assert lines[1] == "teleclaude__run_agent_command(", text
    fields = {}
    for line in lines[2:]:
        if line.strip() == ")":
            break
        match = FIELD.match(line)
        assert match, f'not a key="value" line: {line!r}'
        fields[match[1]] = match[2].replace('\\"', '"').replace("\\\\", "\\")
    else:
        raise AssertionError(f"no closing parenthesis in {text!r}")
    return fields


@pytest.fixture
def tool_call_fields() -> Callable[[str], dict[str, str]]:
    return parse_tool_call


def same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


@pytest.fixture
def paths_equal() -> Callable[[str | Path, str | Path], bool]:
    return same_path
