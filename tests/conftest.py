"""Every test runs against a private HOME, availability database and git identity; `teleclaude_cli` starts
the CLI as a child process and kills what is left of it afterwards."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from .signals import ctrl_c_as_at_a_terminal

TESTS = Path(__file__).parent

# hypothesis fails an example that took over 200 ms (its deadline) and a strategy that drew slowly: with both
# cores busy (a loaded CI) the same example takes seconds, so neither is a fault of the code under test
settings.register_profile("loaded", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loaded")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers (README, The test suite): `realcli` runs a real agent CLI, `ssh` the loopback sshd, `slow`
    the worker runtime in tmux with stand-in CLIs. `./scripts/test --fast` runs what has none of them."""
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        if folder == "realcli":
            item.add_marker(pytest.mark.realcli)
        if folder == "runtime":
            item.add_marker(pytest.mark.slow)
        if "sshd" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ssh)


# The tests `--fast` (`--dist loadgroup`) runs on one worker together, by node id (the controller schedules
# without marks; pytest-xdist's own xdist_group marks ids the way pytest 9 no longer keeps them): those that
# import fastmcp in the test's process (~1 s of CPU for each worker that does: the other never does, not even
# to collect), and the modules whose tests share one MCP server (then it starts once).
ONE_WORKER = (
    "tests/frontends/test_mcp.py::",
    "tests/frontends/test_orchestrator_texts.py::",
    "tests/frontends/test_parity.py::",
    "tests/hostile/test_arguments.py::",
    "tests/hostile/test_http.py::",
    "tests/hostile/test_stdio.py::",
    "tests/hostile/test_untrusted_config.py::test_the_mcp_server_gives_the_same_answer",
)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run with `-p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "worksteal":  # the whole suite: the longest tests first
        from .longest_first import LongestFirst

        return LongestFirst(config, log)
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Together(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "one worker" if nodeid.startswith(ONE_WORKER) else super()._split_scope(nodeid)

    return Together(config, log)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("TELECLAUDE_DB", str(home / "teleclaude.db"))
    monkeypatch.delenv("TELECLAUDE_DEBUG", raising=False)
    monkeypatch.delenv("WORKSPACE", raising=False)  # pytest-git would put repositories there
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "teleclaude tests")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tests@teleclaude.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


@pytest.fixture(scope="session")
def copy_repository(tmp_path_factory) -> Callable[[Callable[[Path], object], Path], Path]:
    """`copy_repository(build, root)`: the repository `build(folder)` makes, built once per run (per worker,
    by the first test that asks, in its isolated environment) and copied to `root` for each test: the git
    commands that make it would otherwise be most of a small test's time."""
    templates: dict[tuple[Callable[[Path], object], str], Path] = {}

    def copy(build: Callable[[Path], object], root: Path) -> Path:
        key = (build, root.name)
        if key not in templates:
            templates[key] = tmp_path_factory.mktemp("template") / root.name
            build(templates[key])
        shutil.copytree(templates[key], root, symlinks=True)
        return root

    return copy


def stand_in_project(tmp_path: Path, monkeypatch, copy_repository, socket: str, fake_agent: str) -> Path:
    """The demo repository, every agent the stand-in CLI (`fake_agent`: its FAKE_AGENT behaviour), whose
    runtime uses tmux server `socket` and ends turns only by a hook (idle_threshold is an hour)."""
    from teleclaude.demo import stand_in
    from teleclaude.demo.scenario import commit_all, make_repository

    bin_dir = stand_in.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT", fake_agent)
    for name in ("CLAUDE", "GEMINI", "CODEX"):
        monkeypatch.delenv(f"FAKE_AGENT_{name}", raising=False)
    root = copy_repository(make_repository, tmp_path / "project")
    (root / "teleclaude.toml").write_text(
        f'[runtime]\nsocket = "{socket}"\nidle_threshold = 3600\npoll_interval = 0.05\n'
        "startup_timeout = 15\nsettle = 0.1\nprompt_stable = 0.1\n"
    )
    commit_all(root, "Runtime settings for the tests")
    return root


@pytest.fixture
def worker_project(tmp_path, monkeypatch, copy_repository):
    """A prepared demo repository whose runtime has a private tmux server (killed afterwards, with every
    process it ran) and the stand-in agent CLI as every agent (`hang`: it takes lines, shows them as queued
    and never ends a turn by itself); as tests/runtime/conftest.py sets it up. For the fast tier's few
    tests that need a worker in real tmux (tests/hostile, tests/frontends)."""
    from teleclaude.adapters.tmux import Tmux

    from .tmux_reaper import reaper, stop

    socket = f"tc-worker-{secrets.token_hex(4)}"
    watcher = reaper(socket)
    root = stand_in_project(tmp_path, monkeypatch, copy_repository, socket, "hang")
    yield root
    Tmux(socket).kill_server()
    stop(watcher)
    Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", socket).unlink(missing_ok=True)


@pytest.fixture
def teleclaude_cli():
    """Start `python -m teleclaude ARGS...` in a project; any still running when the test ends is killed."""
    started: list[subprocess.Popen] = []

    def start(project: Path, *args: str) -> subprocess.Popen:
        process = subprocess.Popen(
            [sys.executable, "-m", "teleclaude", *args],
            cwd=project,
            env=dict(os.environ),  # the test's own HOME, TELECLAUDE_DB and PATH (fake agents first)
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: whatever it started is killed with it
            preexec_fn=ctrl_c_as_at_a_terminal,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()  # reaps it and closes its pipes
