"""`teleclaude demo --real AGENT`: one roadmap item driven to `done/` by real agent CLI workers.

Everything is real except the model: the pinned CLIs (`scripts/agent-clis`, else on PATH) in a throwaway HOME
holding only a login (`agent_homes.prepare_home`), `teleclaude install` and `teleclaude init` answering their
first-run dialogs, the runtime in a private tmux server, the hooks, the planner. The model is the scripted
server (`teleclaude.demo.model_server`) on 127.0.0.1, which speaks the Anthropic, OpenAI Responses and Gemini
APIs at once: in each worker turn it has the CLI run, through the CLI's own shell tool (claude's `Bash`,
gemini's `run_shell_command`, codex's `exec_command`), `python -m teleclaude.demo.stand_in --step` (the
step's file edits and commits, the same the stand-in demo does), then answer `DONE:`.

`--real claude` has claude do every step. `--real gemini` and `--real codex` have that CLI build and review,
and then its provider runs out on the finalize (gemini: the daily quota, 429 RESOURCE_EXHAUSTED; codex: the
usage limit, 429 `usage_limit_reached`): the runtime reads the limit off the CLI's screen, marks the agent
unavailable, and the planner gives the finalize to the real claude, the next agent in the demo's matrix.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from teleclaude.config.matrix import DEFAULT_MATRIX
from teleclaude.demo.agent_homes import prepare_home
from teleclaude.demo.model_server import (
    Fail,
    ModelServer,
    Step,
    Text,
    body_text,
    provider_of,
    shell,
    tool_result_sent,
)
from teleclaude.demo.scenario import Console, environment, orchestrate, print_sessions, throwaway
from teleclaude.demo.workers import commit_all, git, make_repository
from teleclaude.errors import Error
from teleclaude.planner.core.render import to_text
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

SLUG = "greeting"
MAX_STEPS = 12
# model_server.provider_of names
PROVIDERS = {"claude": "anthropic", "gemini": "gemini", "codex": "openai", "opencode": "chat"}
LIMITED_ROLE = "You are the **finalizer**"  # commands/next-finalize.md: the step the limit hits


@dataclass(frozen=True)
class RealDemo:
    """Which real CLIs a demo runs, and how the first one's provider runs out."""

    agent: str
    fallback: str | None = None  # the CLI that takes the step the limit moved
    limit: Fail | None = None  # the provider's answer to every turn from the finalize on
    limit_name: str = ""

    @property
    def agents(self) -> tuple[str, ...]:
        return (self.agent, self.fallback) if self.fallback else (self.agent,)

    def settings(self, socket: str) -> str:
        """The demo's teleclaude.toml: only its real CLIs; the agent first on every step the item goes
        through, the fallback second; the idle rule kept out of the way (turn ends come from the CLIs'
        hooks)."""
        lines = [f"agents = {json.dumps(list(self.agents))}"]
        if self.fallback:
            lines += ["", "[matrix]"]
            for task in ("build", "review", "finalize"):
                mode = DEFAULT_MATRIX[task][0].thinking_mode  # the row's own thinking mode
                lines.append(f'{task} = ["{self.agent}:{mode}", "{self.fallback}:{mode}"]')
        lines += [
            "",
            "[runtime]",
            f'socket = "{socket}"',
            "idle_threshold = 300",
            "poll_interval = 0.2",
            "startup_timeout = 120",  # a CLI started cold on a busy machine: many times its few seconds
            "settle = 0.3",
        ]
        return "\n".join(lines) + "\n"


DEMOS = {
    "claude": RealDemo("claude"),
    "gemini": RealDemo("gemini", "claude", Fail("quota"), "its daily quota (429 RESOURCE_EXHAUSTED)"),
    "codex": RealDemo(
        "codex", "claude", Fail("session_limit", resets_in=5 * 3600), "its usage limit (usage_limit_reached)"
    ),
    # opencode retries a 429 five times, each after the Retry-After: one second each
    "opencode": RealDemo(
        "opencode",
        "claude",
        Fail("session_limit", retry_after=1, resets_in=5 * 3600),
        "its usage limit (429 usage_limit_reached)",
    ),
}
CHECKOUT = Path(__file__).resolve().parents[2]
CACHE = CHECKOUT / ".cache" / "agent-clis"  # scripts/agent-clis, in a checkout
PINS = CHECKOUT / "tests" / "realcli" / "versions.txt"


def find_cli(name: str) -> Path | None:
    """The pinned CLI from scripts/agent-clis (the version of versions.txt, else the newest installed; in
    $TELECLAUDE_AGENT_CLIS when set, as there), else `name` on PATH."""
    cache = Path(os.environ.get("TELECLAUDE_AGENT_CLIS") or CACHE)
    pinned = cache / f"{name}-{_pin(name)}" / "bin" / name
    if pinned.is_file():
        return pinned
    installed = sorted(cache.glob(f"{name}-*/bin/{name}"), key=lambda path: _version(path.parents[1].name))
    if installed:
        return installed[-1]
    found = shutil.which(name)
    return Path(found) if found else None


def _pin(name: str) -> str:
    try:
        lines = PINS.read_text().splitlines()
    except OSError:
        return ""
    rows = (line.split() for line in lines)
    return next((row[2] for row in rows if len(row) > 2 and row[0] == name), "")


def _version(folder: str) -> tuple[int, ...]:
    """`claude-2.1.332` -> (2, 1, 332): 2.1.332 is newer than 2.1.99."""
    return tuple(int(part) for part in folder.rpartition("-")[2].split(".") if part.isdecimal())


class ScriptedWorkers:
    """The scripted model behind every CLI of the demo: do the session's step through the shell tool, then
    say it is done. Once the limited agent's request carries the limited role, its provider answers every
    later turn with the limit (a daily quota stays spent)."""

    def __init__(self, demo: RealDemo) -> None:
        self.limited = PROVIDERS[demo.agent] if demo.limit else ""
        self.limit = demo.limit
        self.spent = threading.Event()

    def __call__(self, body: dict) -> Step:
        limit = self.limit if provider_of(body) == self.limited else None
        first_of_finalize = LIMITED_ROLE in body_text(body) and not tool_result_sent(body)
        if limit and (self.spent.is_set() or first_of_finalize):
            self.spent.set()
            return limit
        if tool_result_sent(body):
            return Text("DONE: the step is done and committed")
        command = shlex.join([sys.executable, "-m", "teleclaude.demo.stand_in", "--step"])
        return shell(command, "Do this session's step and commit")


def run(console: Console, agent: str = "claude", keep: bool = False, verbose: bool = False) -> int:
    demo = DEMOS.get(agent)
    if demo is None:
        print(f"ERROR: INVALID_ARGUMENT\n--real {agent}: choose one of {', '.join(DEMOS)}.")
        return 1
    if shutil.which("tmux") is None:
        print("ERROR: TMUX_FAILED\ntmux is not installed, and the demo runs its workers in tmux.")
        return 1
    clis = {name: find_cli(name) for name in demo.agents}
    missing = [name for name, path in clis.items() if path is None]
    if missing:
        print(
            f"ERROR: AGENT_NOT_INSTALLED\nNo {' or '.join(missing)} found: run scripts/agent-clis in a "
            "teleclaude checkout (the pinned CLIs), or put them on PATH."
        )
        return 1
    found = {name: path for name, path in clis.items() if path is not None}
    started = time.monotonic()
    try:
        with (
            throwaway("teleclaude-demo-real-", keep) as (base, socket),
            ModelServer(then=ScriptedWorkers(demo)) as server,
            environment(prepare_environment(base, found, server.url)),
        ):
            project = _project(base, socket, demo)
            for name, path in found.items():
                print(f"teleclaude demo --real {agent}: {name} is {path}")
            print(f"in {project}; scripted model server {server.url}")
            if demo.limit:
                print(
                    f"on purpose: {agent} runs out of {demo.limit_name} on the finalize; "
                    f"the matrix falls back to {demo.fallback}"
                )
            print(f"watch a worker: tmux -L {socket} attach -t tc-ID\n")
            report = orchestrate(project, console, verbose, SLUG, MAX_STEPS)
            return _summary(project, report, time.monotonic() - started, keep)
    except SetupFailed as error:
        print(error)
        return 1
    except KeyboardInterrupt:
        print("\nDemo interrupted.")
        return 130


def prepare_environment(base: Path, clis: dict[str, Path], server_url: str) -> dict[str, str | None]:
    """The demo's own HOME, with each CLI's login pre-answered there (`agent_homes.prepare_home`); returns
    the variables to run with: that HOME, the demo's database and PATH, what each CLI needs to use the
    scripted server, and none of the variables that would point a CLI at the user's own configuration."""
    home = base / "home"
    home.mkdir()
    folders = dict.fromkeys(str(path.parent) for path in clis.values())
    path = [*folders, str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    variables: dict[str, str | None] = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "TELECLAUDE_DB": str(base / "teleclaude.db"),
        "PATH": os.pathsep.join(path),
        "TELECLAUDE_SESSION_ID": None,
        "TELECLAUDE_SESSION_KEY": None,
        "CLAUDE_CONFIG_DIR": None,
        "CODEX_HOME": None,
        "GEMINI_CLI_HOME": None,
    }
    for name in clis:
        variables |= prepare_home(name, home, server_url)
    return variables


def _project(base: Path, socket: str, demo: RealDemo) -> Path:
    """The demo repository, with the CLIs set up the way a user does it; prints what install and init did."""
    project = make_repository(base / "project")
    (project / "teleclaude.toml").write_text(demo.settings(socket))
    commit_all(project, f"Runtime settings for the real demo: {', '.join(demo.agents)}, turn ends from hooks")
    for done in (install(list(demo.agents), Scope.USER), init(project)):
        if isinstance(done, Error):
            raise SetupFailed(to_text(done))
        print(done.text())
    return project


class SetupFailed(Exception):
    pass


def _summary(project: Path, report, seconds: float, keep: bool) -> int:
    lines = report.text.splitlines()
    # the run's `next:` advice is for a project that stays: this one is deleted on the way out
    print("\n" + "\n".join(line for line in lines if keep or not line.startswith("next: ")))
    done = sorted(p.name for p in (project / "done").iterdir()) if (project / "done").is_dir() else []
    print(f"\ndone/: {', '.join(done) or 'nothing'}")
    print(git(project, "log", "--oneline", "--first-parent", "-n", "8").rstrip())
    print_sessions(report.history)
    delivered = any(name.endswith(f"-{SLUG}") for name in done)
    print(f"\nDemo finished in {seconds:.0f}s: {SLUG} {'delivered' if delivered else 'NOT delivered'}.")
    return 0 if delivered else 1
