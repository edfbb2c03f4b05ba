"""The real agent CLIs (pinned in versions.txt, installed by scripts/agent-clis) against the scripted server.

Each test gets a private tmux server, a throwaway HOME prepared the way the CLI's first-run dialogs would
ask (teleclaude.demo.agent_homes), `teleclaude install` run into that HOME, and a fresh ModelServer. The
tests skip, saying why, only when npm is not installed; a failed install is an error.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from teleclaude.adapters.tmux import Tmux
from teleclaude.demo.agent_homes import (
    claude_environment,
    codex_environment,
    gemini_environment,
    prepare_claude_home,
    prepare_codex_home,
    prepare_gemini_home,
)
from teleclaude.demo.model_server import ModelServer
from teleclaude.demo.scenario import commit_all, make_repository
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.setup.install import Scope, install

REPO = Path(__file__).resolve().parents[2]
VERSIONS = Path(__file__).with_name("versions.txt")

# the idle rule is kept out of the way (5 minutes): a turn end here must come from the CLI's hook
SETTINGS = """[runtime]
socket = "{socket}"
idle_threshold = 300
poll_interval = 0.2
startup_timeout = 40
settle = 0.3
"""


def pinned() -> dict[str, tuple[str, str]]:
    """name -> (npm package, version), from versions.txt."""
    rows = (line.split() for line in VERSIONS.read_text().splitlines())
    return {row[0]: (row[1], row[2]) for row in rows if row and not row[0].startswith("#")}


@pytest.fixture(scope="session")
def agent_clis() -> dict[str, Path]:
    """name -> the folder holding its executable; installs the pinned CLIs once (quick when cached)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the real agent CLI tests need it (Debian: apt-get install npm)")
    done = subprocess.run(
        [str(REPO / "scripts" / "agent-clis")], cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"scripts/agent-clis failed:\n{done.stderr}"
    return {name: Path(folder) for name, folder in (line.split() for line in done.stdout.splitlines())}


@pytest.fixture
def tmux_socket() -> str:
    name = f"tc-real-{secrets.token_hex(4)}"
    yield name
    Tmux(name).kill_server()
    socket_file = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", name)
    socket_file.unlink(missing_ok=True)


@pytest.fixture
def model_server():
    with ModelServer() as server:
        yield server


@pytest.fixture
def project(tmp_path, tmux_socket) -> Path:
    root = make_repository(tmp_path / "project")
    (root / "teleclaude.toml").write_text(SETTINGS.format(socket=tmux_socket))
    commit_all(root, "Runtime settings for the tests")
    return root


@pytest.fixture
def claude(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A claude on PATH whose HOME is prepared and has teleclaude installed; its worker env points at the
    scripted server. The tmux server is started by the test process after this, so it inherits the
    environment (the runtime itself passes only PATH, HOME and its own variables to a worker)."""
    home = isolated_environment
    prepare_claude_home(home, [project], pinned()["claude"][1])
    report = install(["claude"], Scope.USER)
    assert not hasattr(report, "code"), report
    for key, value in claude_environment(model_server.url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{agent_clis['claude']}{os.pathsep}{os.environ['PATH']}")
    return agent_clis["claude"] / "claude"


@pytest.fixture
def runtime(project, claude) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def gemini(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A gemini on PATH, its HOME prepared (auth chosen) and teleclaude installed, pointed at the server."""
    prepare_gemini_home(isolated_environment)
    report = install(["gemini"], Scope.USER)
    assert not hasattr(report, "code"), report
    for key, value in gemini_environment(model_server.url).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{agent_clis['gemini']}{os.pathsep}{os.environ['PATH']}")
    return agent_clis["gemini"] / "gemini"


@pytest.fixture
def gemini_runtime(project, gemini) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def codex(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A codex on PATH, its HOME given a provider for the server, teleclaude installed (skills, MCP, hook)."""
    prepare_codex_home(isolated_environment, model_server.url)
    report = install(["codex"], Scope.USER)
    assert not hasattr(report, "code"), report
    for key, value in codex_environment().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{agent_clis['codex']}{os.pathsep}{os.environ['PATH']}")
    return agent_clis["codex"] / "codex"


@pytest.fixture
def codex_runtime(project, codex) -> Runtime:
    return open_runtime(project)
