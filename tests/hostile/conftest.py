"""Hostile inputs: requests, folder names and text an attacker (or an unlucky user) sends, each refused or
made harmless. Everything runs against the private HOME and database of tests/conftest.py."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from ..in_process import in_process

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def subprocess_env(isolated_environment) -> dict[str, str]:
    """The environment for `python -m teleclaude`: the isolated one, with the package importable."""
    env = {key: value for key, value in os.environ.items() if key != "TELECLAUDE_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return env


@pytest.fixture
def cli(subprocess_env, tmp_path, monkeypatch) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the CLI: `cli("agents")`, in tmp_path, in `subprocess_env` as a test left it; stdout and stderr
    as text. In this process (`teleclaude.cli.main`) where what it prints is the point; `process=True`
    starts `python -m teleclaude` for what only a whole process shows (its start, its imports, a server)."""

    def run(*args: str, cwd: Path | None = None, timeout: float = 60, process: bool = False):
        if not process:
            with monkeypatch.context() as patch:
                for name in os.environ.keys() - subprocess_env.keys():
                    patch.delenv(name)
                for name, value in subprocess_env.items():
                    patch.setenv(name, value)
                return in_process(list(args), cwd or tmp_path, patch)
        return subprocess.run(
            [sys.executable, "-m", "teleclaude", *args],
            cwd=cwd or tmp_path,
            env=subprocess_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


def hook(
    env: Mapping[str, str], cwd: Path, *args: str, stdin: str = "", **popen
) -> subprocess.CompletedProcess[str]:
    """`teleclaude hook ARGS…` as an agent CLI runs it: a process given `stdin` (its JSON); `popen` as for
    `subprocess.run` (`preexec_fn`). Its stdout and stderr as text; never raises for its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "teleclaude", "hook", *args],
        input=stdin,
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **popen,
    )


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


PREPARED = {  # a roadmap of one item, `feat`, prepared
    "todos/roadmap.md": "- [ ] feat — the feature\n",
    "todos/feat/requirements.md": "# feat\nDo it.\n",
    "todos/feat/implementation-plan.md": "# Plan\n## Group 1\n- [ ] write it\n",
}


def committed_repo(root: Path, files: Mapping[str, str | bytes], message: str = "roadmap") -> Path:
    """A git repository at `root` (branch main) whose one commit holds `files` (path: text or bytes)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return root


def _prepared_repo(root: Path) -> None:
    committed_repo(root, PREPARED)


@pytest.fixture
def repo(tmp_path, copy_repository) -> Path:
    """A repository whose roadmap has one prepared item, `feat` (a test module may have its own `repo`)."""
    return copy_repository(_prepared_repo, tmp_path / "project")


@pytest.fixture
def tmux(tmp_path):
    """The tmux adapter on a private server, killed afterwards with every process it ran."""
    from teleclaude.adapters.tmux import Tmux

    tmux = Tmux(f"tc-hostile-{secrets.token_hex(4)}")
    yield tmux
    tmux.kill_server()
    socket_file = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", tmux.socket)
    socket_file.unlink(missing_ok=True)


@pytest.fixture
def worker_runtime(worker_project):
    from teleclaude.runtime.api import open_runtime

    return open_runtime(worker_project)


@pytest.fixture
def start_worker(worker_runtime, worker_project):
    """`start_worker(slug)`: a claude worker (the stand-in) on `slug`'s build step, in its turn for good."""
    from teleclaude.errors import Error
    from teleclaude.runtime.core.sessions import StartRequest

    def start(slug: str = "x"):
        started = worker_runtime.run_agent_command(
            StartRequest("local", "next-build", slug, str(worker_project), "claude", "med")
        )
        assert not isinstance(started, Error), started
        return started.session

    return start
