"""`teleclaude demo --real claude`: one roadmap item driven to `done/` by real Claude Code workers.

Everything is real except the model: the pinned CLI (`scripts/agent-clis`, else `claude` on PATH) in a
throwaway HOME holding only a login (onboarding done, the dummy API key approved), `teleclaude install` and
`teleclaude init` answering its first-run dialogs, the runtime in a private tmux server, the hooks, the
planner. The model is the scripted server (`teleclaude.demo.model_server`) on 127.0.0.1: in each worker
turn it has claude run, through claude's own Bash tool, `python -m teleclaude.demo.stand_in --step` (the
step's file edits and commits, the same the stand-in demo does), then answer `DONE:`.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

from teleclaude.demo.agent_homes import claude_environment, prepare_claude_login
from teleclaude.demo.model_server import ModelServer, Step, Text, shell
from teleclaude.demo.scenario import Console, environment, remove_tmux_server
from teleclaude.demo.workers import commit_all, git, make_repository
from teleclaude.errors import Error
from teleclaude.planner.core.render import to_text
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

SLUG = "greeting"
AGENTS = ("claude",)
MAX_STEPS = 12
# `agents`: only the real CLI; the idle rule is kept out of the way: a turn ends by claude's Stop hook
SETTINGS = """agents = ["claude"]

[runtime]
socket = "{socket}"
idle_threshold = 300
poll_interval = 0.2
startup_timeout = 40
settle = 0.3
"""
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "agent-clis"  # scripts/agent-clis, in a checkout


def find_claude() -> Path | None:
    """The pinned CLI from scripts/agent-clis (newest), else `claude` on PATH."""
    pinned = sorted(CACHE.glob("claude-*/bin/claude"))
    if pinned:
        return pinned[-1]
    found = shutil.which("claude")
    return Path(found) if found else None


def worker_turn(body: dict) -> Step:
    """The scripted model: do the session's step through the shell tool, then say it is done."""
    messages = body.get("messages") or []
    last = messages[-1].get("content") if messages and isinstance(messages[-1], dict) else None
    if isinstance(last, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in last
    ):
        return Text("DONE: the step is done and committed")
    command = shlex.join([sys.executable, "-m", "teleclaude.demo.stand_in", "--step"])
    return shell(command, "Do this session's step and commit")


def run(console: Console, agent: str = "claude", keep: bool = False, verbose: bool = False) -> int:
    if agent not in AGENTS:
        print(
            f"ERROR: INVALID_ARGUMENT\n--real {agent}: only claude is verified for real runs so far "
            "(codex and gemini: issue 16)."
        )
        return 1
    if shutil.which("tmux") is None:
        print("ERROR: TMUX_FAILED\ntmux is not installed, and the demo runs its workers in tmux.")
        return 1
    claude = find_claude()
    if claude is None:
        print(
            "ERROR: AGENT_NOT_INSTALLED\nNo claude found: run scripts/agent-clis in a teleclaude checkout "
            "(the pinned CLI), or put claude on PATH."
        )
        return 1
    base = Path(tempfile.mkdtemp(prefix="teleclaude-demo-real-"))
    socket = f"tc-demo-{secrets.token_hex(4)}"
    started = time.monotonic()
    try:
        with ModelServer(then=worker_turn) as server, environment(_variables(base, claude, server.url)):
            project = _project(base, socket)
            print(f"teleclaude demo --real claude ({claude}) in {project}")
            print(f"scripted model server {server.url}; watch a worker: tmux -L {socket} attach -t tc-ID\n")
            report = _orchestrate(project, console, verbose)
            return _summary(project, report, time.monotonic() - started)
    except SetupFailed as error:
        print(error)
        return 1
    except KeyboardInterrupt:
        print("\nDemo interrupted.")
        return 130
    finally:
        remove_tmux_server(socket)
        if keep:
            print(f"Kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def _variables(base: Path, claude: Path, server_url: str) -> dict[str, str | None]:
    home = base / "home"
    home.mkdir()
    path = [str(claude.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "TELECLAUDE_DB": str(base / "teleclaude.db"),
        "PATH": os.pathsep.join(path),
        "TELECLAUDE_SESSION_ID": None,
        **claude_environment(server_url),
    }


def _project(base: Path, socket: str) -> Path:
    """The demo repository, with claude set up the way a user does it; prints what install and init did."""
    prepare_claude_login(Path(os.environ["HOME"]))
    project = make_repository(base / "project")
    (project / "teleclaude.toml").write_text(SETTINGS.format(socket=socket))
    commit_all(project, "Runtime settings for the real demo: claude only, turn ends from its hook")
    for done in (install(["claude"], Scope.USER), init(project)):
        if isinstance(done, Error):
            raise SetupFailed(to_text(done))
        print(done.text())
    return project


class SetupFailed(Exception):
    pass


def _orchestrate(project: Path, console: Console, verbose: bool) -> orchestrator.RunReport:
    report = orchestrator.run(
        project, SLUG, False, MAX_STEPS, open_runtime(project), console.show, console.status, verbose=verbose
    )
    console.clear()
    return report


def _summary(project: Path, report, seconds: float) -> int:
    print("\n" + report.text)
    done = sorted(p.name for p in (project / "done").iterdir()) if (project / "done").is_dir() else []
    print(f"\ndone/: {', '.join(done) or 'nothing'}")
    print(git(project, "log", "--oneline", "--first-parent", "-n", "8").rstrip())
    delivered = any(name.endswith(f"-{SLUG}") for name in done)
    print(f"\nDemo finished in {seconds:.0f}s: {SLUG} {'delivered' if delivered else 'NOT delivered'}.")
    return 0 if delivered else 1
