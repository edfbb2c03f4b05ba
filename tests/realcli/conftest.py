"""The real agent CLIs (pinned in versions.txt, installed by scripts/agent-clis) against the scripted server.

Each test gets a private tmux server, a throwaway HOME holding only the user's login
(teleclaude.demo.agent_homes), `teleclaude install` + `init` run into it, and a fresh ModelServer. The
tests skip, saying why, only when npm is not installed; a failed install is an error.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from teleclaude import mcp_answers
from teleclaude.adapters import trust_store
from teleclaude.adapters.tmux import Tmux
from teleclaude.demo.agent_homes import claude_environment, prepare_claude_login, prepare_home
from teleclaude.demo.model_server import ModelServer
from teleclaude.demo.scenario import commit_all, git, make_repository
from teleclaude.errors import Error
from teleclaude.planner.core.terminal import printable
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.sessions import Started, StartRequest
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

from ..tmux_reaper import reaper, stop

REPO = Path(__file__).resolve().parents[2]
# a subscriber's login: claude then shows subscription limits and reads the usage headers (NOTES.md)
OAUTH_TOKEN = "sk-ant-oat01-teleclaude-scripted-model-server"

# the idle rule is kept out of the way (5 minutes): a turn end here must come from the CLI's hook; a CLI
# started cold on a loaded machine may take several times its usual few seconds to show its prompt; the
# launcher's prompt_stable and settle are each agent driver's own (the shortest its CLI allows)
SETTINGS = """[runtime]
socket = "{socket}"
idle_threshold = 300
poll_interval = 0.2
startup_timeout = 120
"""


def codex_keeps_todays_clock(agent: str) -> None:
    """Skips a test that reads codex's own timestamps (its rollout's) against ours when the run's clock is
    moved (scripts/year-ahead): codex is a static binary, which libfaketime's preload cannot reach."""
    if agent == "codex" and "FAKETIME" in os.environ:
        pytest.skip("codex keeps today's clock under libfaketime: its timestamps would be a year behind ours")


def latest() -> bool:
    """TELECLAUDE_CLIS=latest (`./scripts/test --latest`): the tests run the newest release of each CLI on npm
    (`scripts/agent-clis --latest`, installed beside the pins), to check a release before the pins move."""
    wanted = os.environ.get("TELECLAUDE_CLIS", "pinned")
    if wanted not in ("pinned", "latest"):
        pytest.exit(
            f"ERROR: BAD_ARGUMENT\nTELECLAUDE_CLIS={wanted!r}: set it to pinned or latest", returncode=2
        )
    return wanted == "latest"


@pytest.fixture(scope="session")
def agent_clis() -> dict[str, Path]:
    """name -> the folder holding its executable; installs the pinned CLIs once (quick when cached), or the
    newest releases with TELECLAUDE_CLIS=latest."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the real agent CLI tests need it (Debian: apt-get install npm)")
    argv = [str(REPO / "scripts" / "agent-clis"), *(["--latest"] if latest() else [])]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"scripts/agent-clis failed:\n{done.stderr}"
    return {name: Path(folder) for name, folder in (line.split() for line in done.stdout.splitlines())}


@pytest.fixture(scope="session", autouse=True)
def mcp_answers_recorded() -> None:
    """The MCP server's answers to a handshake in each protocol version recorded (mcp_answers.py), which the
    workers' servers (sandboxed: they cannot record them) give without importing fastmcp."""
    mcp_answers.warm()


def version_of(folder: Path) -> str:
    """The version of the CLI installed in `folder` (`.cache/agent-clis/NAME-VERSION/bin`)."""
    return folder.parent.name.split("-", 1)[1]


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    """A private tmux server for one test, killed afterwards, or, if the run itself is killed first, by a
    watcher once it has ended (tmux_reaper.py): no CLI is left running."""
    name = f"tc-real-{secrets.token_hex(4)}"
    watcher = reaper(name)
    yield name
    Tmux(name).kill_server()
    stop(watcher)
    socket_file = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", name)
    socket_file.unlink(missing_ok=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries what every pane of its tmux server showed then (its history too),
    printable: a flake seen once in CI can be read afterwards, not only guessed at."""
    outcome = yield
    report = outcome.get_result()
    socket = item.funcargs.get("tmux_socket") if hasattr(item, "funcargs") else None
    if report.when != "call" or not report.failed or not socket:
        return
    tmux = Tmux(socket)
    for pane_id, view in tmux.views().items():
        rows = tmux.capture(pane_id, -min(view.history_size, 200), view.height - 1)
        text = "\n".join(printable(row).rstrip() for row in rows).strip("\n")
        report.sections.append((f"pane {pane_id} at the failure (dead={view.dead})", text))


@pytest.fixture
def model_server():
    with ModelServer() as server:
        yield server


@pytest.fixture
def project(tmp_path, tmux_socket, copy_repository) -> Path:
    root = copy_repository(make_repository, tmp_path / "project")
    (root / "teleclaude.toml").write_text(SETTINGS.format(socket=tmux_socket))
    commit_all(root, "Runtime settings for the tests")
    return root


def give_env(project: Path, agent: str, env: dict[str, str]) -> None:
    """`[runtime.agents.AGENT] env` in the project's teleclaude.toml (committed): what its workers get."""
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
    with (project / "teleclaude.toml").open("a") as settings:
        settings.write(f"[runtime.agents.{agent}]\nenv = {{{table}}}\n")
    trusted(project)
    commit_all(project, f"Worker environment for {agent}")


def start(
    runtime: Runtime,
    project: Path,
    agent: str,
    command: str = "next-build",
    args: str = "greeting",
    mode: str = "med",
) -> Started:
    """`agent` started on the role command in the project; the test fails with the CLI's last words if not."""
    started = runtime.run_agent_command(StartRequest("local", command, args, str(project), agent, mode))
    if isinstance(started, Error):
        pytest.fail(started.message)  # the CLI's own last output, whole
    assert isinstance(started, Started), started
    return started


def build_row_first(project: Path, agent: str, then: str) -> None:
    """`[matrix] build = [agent, then]` in the project's teleclaude.toml (trusted, committed)."""
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + f'\n[matrix]\nbuild = ["{agent}:med", "{then}:med"]\n')
    trusted(project)  # the file changed: trusted again in its new content
    commit_all(project, "Build row for the test")


def trusted(project: Path) -> None:
    """`teleclaude trust` for the teleclaude.toml the test wrote: what starts processes needs it."""
    settings = project / "teleclaude.toml"
    trust_store.record(settings, settings.read_bytes())


@pytest.fixture
def claude_cli(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A claude on PATH (with this teleclaude beside it) in a fresh HOME holding only the user's login
    (onboarding, API key approval). Its workers get the scripted server's address and key through
    `[runtime.agents.claude] env` in the project's teleclaude.toml, not from the tmux server's environment
    (which the test process, and so the tmux server it starts, does not have)."""
    prepare_claude_login(isolated_environment, version_of(agent_clis["claude"]))
    env = claude_environment(model_server.url)
    for key in (*env, "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_MAX_RETRIES"):
        monkeypatch.delenv(key, raising=False)
    give_env(project, "claude", env | {"CLAUDE_CODE_MAX_RETRIES": "0"})
    path = [str(agent_clis["claude"]), str(Path(sys.executable).parent), os.environ["PATH"]]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    return agent_clis["claude"] / "claude"


@pytest.fixture
def set_up():
    """`set_up(project, scope)`: `teleclaude install --claude [--scope project]` and `teleclaude init`, as a
    user runs them; returns what they printed."""
    return _set_up


def _set_up(project: Path, scope: Scope) -> str:
    report = install(["claude"], scope, cwd=project, verbose=True)  # every setting, to check below
    assert not hasattr(report, "code"), report
    done = init(project)
    assert not hasattr(done, "code"), done
    if git(project, "status", "--porcelain"):  # committed, as README says (no item starts over a dirty main)
        commit_all(project, "teleclaude installed and initialised")
    return report.text() + "\n" + done.text()


@pytest.fixture
def claude(claude_cli, project) -> Path:
    """claude with teleclaude installed at user scope and the project initialised: nothing else answers its
    first-run dialogs."""
    printed = _set_up(project, Scope.USER)
    for answer in ("skipDangerousModePermissionPrompt", "enabledMcpjsonServers", "hasTrustDialogAccepted"):
        assert answer in printed
    return claude_cli


@pytest.fixture
def runtime(project, claude) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def claude_runtime(runtime) -> Runtime:
    """`runtime` by the name the other CLIs' fixtures have (`{agent}_runtime`)."""
    return runtime


def _installed(agent: str, agent_clis, url: str, home: Path, monkeypatch) -> Path:
    """`agent` on PATH, its HOME prepared for the scripted server (agent_homes.prepare_home) and teleclaude
    installed at user scope; the environment its workers need set in this process."""
    env = prepare_home(agent, home, url)
    report = install([agent], Scope.USER)
    assert not hasattr(report, "code"), report
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{agent_clis[agent]}{os.pathsep}{os.environ['PATH']}")
    return agent_clis[agent] / agent


@pytest.fixture
def gemini(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A gemini on PATH, its HOME prepared (auth chosen) and teleclaude installed, pointed at the server."""
    return _installed("gemini", agent_clis, model_server.url, isolated_environment, monkeypatch)


@pytest.fixture
def gemini_runtime(project, gemini) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def codex(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """A codex on PATH, its HOME given a provider for the server, teleclaude installed (skills, MCP, hook)."""
    return _installed("codex", agent_clis, model_server.url, isolated_environment, monkeypatch)


@pytest.fixture
def codex_runtime(project, codex) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def opencode(agent_clis, model_server, project, isolated_environment, monkeypatch) -> Path:
    """An opencode on PATH, its HOME given a provider for the server, teleclaude installed (commands, MCP,
    plugin)."""
    return _installed("opencode", agent_clis, model_server.url, isolated_environment, monkeypatch)


@pytest.fixture
def opencode_runtime(project, opencode) -> Runtime:
    return open_runtime(project)


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Both cores of a two-core machine kept busy for the test (as a machine running several agent CLIs is):
    two shell loops, each bounded by `timeout` should the run be killed before this fixture ends them. Only
    under `./scripts/test --load` (TELECLAUDE_LOAD=1): in the whole suite the burners would load every test
    running beside it for minutes, on top of the suite's own two workers a core."""
    if os.environ.get("TELECLAUDE_LOAD") != "1":
        pytest.skip("runs beside two CPU burners: ./scripts/test --load")
    burners = [
        subprocess.Popen(["timeout", "900", "sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(2)
    ]
    yield
    for burner in burners:  # the whole group: killing `timeout` alone leaves its loop running
        os.killpg(burner.pid, signal.SIGKILL)
        burner.wait()
