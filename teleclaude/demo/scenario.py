"""`teleclaude demo`: a throwaway repository driven from `[ ]` to `done/` through `next_work`.

The workers here are scripted stand-ins: plain functions that edit files and commit the way a builder,
reviewer, fixer, finalizer and commit-pending agent would. The tests drive the same functions.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from teleclaude.adapters.git import run_git
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Action, Complete, Dispatch, Marker, Step
from teleclaude.planner.core.render import to_text
from teleclaude.planner.core.roadmap import parse_roadmap, rewrite_marker

ROADMAP = """# Roadmap

## Demo
- [ ] greeting — A module that says hello.
- [ ] farewell (after: greeting) — A module that says goodbye.
- [ ] shouting — Upper-case variants of both.
"""

PLAN = """# Implementation plan: {slug}

## Group 1: Code
- [ ] Write src/{module}.py
- [ ] Add a docstring

## Group 2: Tests
- [ ] Write tests/test_{module}.py

## Group 5: After the build
- [ ] Announce it
"""

REVIEW = """# Review findings: {slug}

## Critical
{critical}
## Important

## Suggestions

## Verdict
- [{approve}] APPROVE
- [{request}] REQUEST CHANGES
"""


def git(cwd: Path, *args: str) -> str:
    return run_git(list(args), cwd)


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


def make_repository(root: Path) -> Path:
    """A git repository with the demo roadmap and three prepared items, all committed."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "teleclaude demo")
    git(root, "config", "user.email", "demo@teleclaude.invalid")
    (root / "todos").mkdir()
    (root / "todos" / "roadmap.md").write_text(ROADMAP)
    for item in parse_roadmap(ROADMAP).items:
        folder = root / "todos" / item.slug
        folder.mkdir()
        (folder / "requirements.md").write_text(f"# Requirements: {item.slug}\n\n{item.description}\n")
        plan = PLAN.format(slug=item.slug, module=item.slug.replace("-", "_"))
        (folder / "implementation-plan.md").write_text(plan)
    commit_all(root, "Add roadmap and prepared items")
    return root


# --- scripted workers -------------------------------------------------------------------------------


class Workers:
    """Stand-ins for the agents. `forget_commit` and `reject_first` make them misbehave once, on purpose."""

    def __init__(self, project: Path, forget_commit: str | None = None, reject_first: str | None = None):
        self.project = project
        self.forget_commit = forget_commit
        self.reject_first = reject_first
        self.reviews: dict[str, int] = {}

    def run(self, action: Dispatch) -> str:
        where = self.project / (action.subfolder or "")
        worker: Callable[[Path, Dispatch], str] = {
            Step.BUILD: self.build,
            Step.REVIEW: self.review,
            Step.FIX: self.fix,
            Step.FINALIZE: self.finalize,
            Step.COMMIT: self.commit_pending,
            Step.BUGS: self.bugs,
        }[action.step]
        return worker(where, action)

    def build(self, tree: Path, action: Dispatch) -> str:
        slug, module = action.slug, action.slug.replace("-", "_")
        (tree / "src").mkdir(exist_ok=True)
        (tree / "tests").mkdir(exist_ok=True)
        (tree / "src" / f"{module}.py").write_text(
            f'"""{slug}."""\n\n\ndef {module}():\n    return "{slug}"\n'
        )
        (tree / "tests" / f"test_{module}.py").write_text(f"def test_{module}():\n    assert True\n")
        tick_build_tasks(tree / "todos" / slug / "implementation-plan.md")
        if self.forget_commit == slug:
            self.forget_commit = None
            return "builder: did every task in Groups 1-4 and ticked them, but forgot to commit"
        commit_all(tree, f"Build {slug}")
        return "builder: did every task in Groups 1-4, ticked them, committed"

    def review(self, tree: Path, action: Dispatch) -> str:
        slug = action.slug
        self.reviews[slug] = self.reviews.get(slug, 0) + 1
        rejects = self.reject_first == slug and self.reviews[slug] == 1
        critical = "- The function has no test of its return value.\n" if rejects else ""
        text = REVIEW.format(
            slug=slug, critical=critical, approve=" " if rejects else "x", request="x" if rejects else " "
        )
        (tree / "todos" / slug / "review-findings.md").write_text(text)
        commit_all(tree, f"Review {slug}")
        return "reviewer: REQUEST CHANGES (one critical finding)" if rejects else "reviewer: APPROVE"

    def fix(self, tree: Path, action: Dispatch) -> str:
        slug, module = action.slug, action.slug.replace("-", "_")
        test = tree / "tests" / f"test_{module}.py"
        test.write_text(
            f"from src.{module} import {module}\n\n\n"
            f"def test_{module}():\n    assert {module}() == '{slug}'\n"
        )
        (tree / "todos" / slug / "review-findings.md").unlink()
        commit_all(tree, f"Fix review findings for {slug}")
        return "fixer: fixed the critical finding, deleted review-findings.md, committed"

    def finalize(self, main: Path, action: Dispatch) -> str:
        slug = action.slug
        archive = re.search(r"done/\d{3}-[a-z0-9-]+/", action.note or "")[0].rstrip("/")
        git(main, "merge", "-q", "--no-ff", "-m", f"Merge {slug}", slug)
        (main / "done").mkdir(exist_ok=True)
        git(main, "mv", f"todos/{slug}", archive)
        roadmap = main / "todos" / "roadmap.md"
        data = roadmap.read_bytes()
        roadmap.write_bytes(rewrite_marker(data, parse_roadmap(decode(data)).find(slug).line, Marker.DONE))
        commit_all(main, f"Finalize {slug}")
        git(main, "worktree", "remove", f"trees/{slug}")
        git(main, "branch", "-q", "-d", slug)
        return f"finalizer: merged {slug}, archived to {archive}/, marked [x], removed the worktree"

    def commit_pending(self, where: Path, action: Dispatch) -> str:
        changed = git(where, "status", "--porcelain").splitlines()
        commit_all(where, f"Commit pending work for {action.slug}")
        return f"commit-pending: committed {len(changed)} changed path(s)"

    def bugs(self, main: Path, action: Dispatch) -> str:
        bugs = main / "todos" / "bugs.md"
        bugs.write_text(bugs.read_text().replace("- [ ]", "- [x]"))
        commit_all(main, "Fix open bugs")
        return "bug fixer: fixed and ticked every open bug"


def tick_build_tasks(plan: Path) -> None:
    """Tick every task of Groups 1-4, as a builder does when it has done them."""
    groups = re.compile(r"^(## Group [1-4].*?)(?=^## Group [5-9]|\Z)", re.M | re.S)
    plan.write_text(groups.sub(lambda match: match[0].replace("- [ ]", "- [x]"), plan.read_text()))


# --- the orchestrator loop --------------------------------------------------------------------------


def drive(
    project: Path,
    workers: Workers,
    say: Callable[[str], None],
    verbose: bool = False,
    max_steps: int = 60,
    on_step: Callable[[int, Action], None] | None = None,
) -> list[Action]:
    """Call next_work like an orchestrator: follow one slug until COMPLETE, then ask for the next one."""
    actions: list[Action] = []
    slug: str | None = None
    for step in range(1, max_steps + 1):
        action = app.next_work(slug, cwd=project)
        actions.append(action)
        say(f"[{step:02d}] next_work({slug or ''}) -> {_summary(action)}")
        if verbose:
            say("     " + to_text(action).replace("\n", "\n     "))
        if on_step:
            on_step(step, action)
        if isinstance(action, Dispatch):
            slug = action.slug or slug
            say(f"     {workers.run(action)}")
        elif isinstance(action, Complete):
            slug = None
        elif isinstance(action, Error) and action.code is ErrorCode.NO_WORK:
            return actions
        else:
            return actions
    return actions


def _summary(action: Action) -> str:
    first = to_text(action).splitlines()[0].rstrip(":")
    if isinstance(action, Dispatch):
        where = action.subfolder or "main checkout"
        return f"{first} {action.command} {action.slug} ({action.agent}, {action.thinking_mode}) in {where}"
    if isinstance(action, Complete):
        return f"{first} {action.slug} -> {action.archive}"
    return first


# --- `teleclaude demo`: the same roadmap, driven by `teleclaude run` with fake agent CLIs in tmux ---------

DEMO_SETTINGS = """[runtime]
socket = "{socket}"
idle_threshold = 0.6
poll_interval = 0.1
startup_timeout = 15
settle = 0.2
"""
DEMO_AGENTS = {  # how the fake agents misbehave, once each, on purpose
    "FAKE_AGENT_GEMINI": "limit",  # gemini prints a 429: marked unavailable, builds fall back to claude
    "FAKE_AGENT_REJECT": "greeting",  # the first review of greeting requests changes
    "FAKE_AGENT_FORGET": "farewell",  # the builder of farewell leaves its work uncommitted
}
DEMO_MAX_STEPS = 40


def run(keep: bool = False, verbose: bool = False) -> int:
    """Drive the demo roadmap to done/ with `teleclaude run`; 0 when all three items were delivered."""
    import secrets
    import time

    if shutil.which("tmux") is None:
        print(
            "ERROR: TMUX_FAILED\ntmux is not installed, and the demo runs its workers in tmux.\n"
            "Install it (apt install tmux, brew install tmux), then run the demo again."
        )
        return 1
    base = Path(tempfile.mkdtemp(prefix="teleclaude-demo-"))
    socket = f"tc-demo-{secrets.token_hex(4)}"
    started = time.monotonic()
    try:
        with environment(_demo_variables(base)):
            project = make_repository(base / "project")
            (project / "teleclaude.toml").write_text(DEMO_SETTINGS.format(socket=socket))
            commit_all(project, "Runtime settings for the demo: a private tmux server, short timings")
            print(f"teleclaude demo in {project}")
            print(f"fake agent CLIs in {base / 'bin'}; watch a worker: tmux -L {socket} attach -t tc-ID")
            print("misbehaving on purpose: " + ", ".join(f"{k}={v}" for k, v in DEMO_AGENTS.items()) + "\n")
            print((project / "todos" / "roadmap.md").read_text())
            report = _orchestrate(project, verbose)
            code = _summary_of_run(project, report, time.monotonic() - started)
    except KeyboardInterrupt:
        print("\nDemo interrupted.")
        return 130
    finally:
        remove_tmux_server(socket)
        if keep:
            print(f"Kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return code


def _demo_variables(base: Path) -> dict[str, str | None]:
    from teleclaude.demo import stand_in as fake_agent

    bin_dir = fake_agent.install(base / "bin")
    return {
        "TELECLAUDE_DB": str(base / "teleclaude.db"),  # never touch the user's sessions or availability
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_AGENT": None,
        "FAKE_AGENT_CLAUDE": None,
        "FAKE_AGENT_CODEX": None,
        **DEMO_AGENTS,
    }


@contextlib.contextmanager
def environment(values: dict[str, str | None]):
    """Set (None: remove) environment variables, and put them back afterwards. The private tmux server
    starts inside, so its workers inherit them."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _set_variables(values)
        yield
    finally:
        _set_variables(saved)


def _set_variables(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _orchestrate(project: Path, verbose: bool):
    from teleclaude.cli.run import Console
    from teleclaude.runtime import orchestrator
    from teleclaude.runtime.api import open_runtime

    console = Console()
    report = orchestrator.run(
        project,
        None,
        False,
        DEMO_MAX_STEPS,
        open_runtime(project),
        console.show,
        console.status,
        verbose=verbose,
    )
    console.clear()
    return report


def _summary_of_run(project: Path, report, seconds: float) -> int:
    """Print what happened; 0 when every item of the demo roadmap was delivered."""
    from teleclaude.runtime.orchestrator import Outcome

    if report.outcome is Outcome.COMPLETE:
        print("\n" + report.text.splitlines()[0])
    elif report.outcome is not Outcome.INTERRUPTED:
        print("\n" + report.text)
    roadmap = (project / "todos" / "roadmap.md").read_text()
    done = sorted(p.name for p in (project / "done").iterdir()) if (project / "done").is_dir() else []
    print("\n" + roadmap)
    print(f"done/: {', '.join(done) or 'nothing'}")
    print("\ngit log --oneline --first-parent (main):")
    print(git(project, "log", "--oneline", "--first-parent", "-n", "12").rstrip())
    print(f"\nworker sessions ({len(report.history)}):")
    for number, handled in enumerate(report.history, 1):
        session = handled.session
        ended = handled.kind.value if handled.kind else "ended"
        print(f"  {number:2d}. {session.agent:<6} {session.command} {session.slug}: {ended}")
    agents = collections.Counter(handled.session.agent for handled in report.history)
    print("per agent: " + ", ".join(f"{agent} {count}" for agent, count in sorted(agents.items())))
    for line in _what_went_wrong(report.history):
        print(line)
    items = parse_roadmap(roadmap).items
    finished = len(done) == len(items) and all(item.marker is Marker.DONE for item in items)
    if report.outcome is Outcome.INTERRUPTED:
        print(f"\nDemo interrupted after {seconds:.0f}s.")
        return 130
    verdict = "every item delivered" if finished else f"stopped early ({report.outcome.value})"
    print(f"\nDemo finished in {seconds:.0f}s: {verdict}.")
    return 0 if finished else 1


def _what_went_wrong(history) -> list[str]:
    """The rate-limit fallback, the review round and the forgotten commit, as they happened."""
    from teleclaude.runtime.core.sessions import EventKind

    sessions = [handled.session for handled in history]

    def later(index: int, step: str, slug: str):
        return next((s for s in sessions[index + 1 :] if (_step(s), s.slug) == (step, slug)), None)

    lines = []
    for index, handled in enumerate(history):
        session, step = handled.session, _step(handled.session)
        if handled.kind is EventKind.RATE_LIMITED:
            after = later(index, step, session.slug)
            lines.append(
                f"rate limit: {session.agent} hit its limit on {step} {session.slug} and was marked "
                "unavailable" + (f"; the planner gave the step to {after.agent}" if after else "")
            )
        if step == "next-fix-review":
            again = later(index, "next-review", session.slug)
            lines.append(
                f"review round: the review of {session.slug} requested changes; {session.agent} fixed them"
                + (f", and {again.agent}'s next review approved" if again else "")
            )
        if step == "commit-pending":
            lines.append(
                f"commit-pending: a worker on {session.slug} left its changes uncommitted; "
                f"{session.agent} committed them"
            )
    return lines


def _step(session) -> str:
    return session.command.removeprefix("prompts:")


def remove_tmux_server(socket: str) -> None:
    """Kill the demo's private tmux server (and every worker in it) and remove its socket file."""
    from teleclaude.adapters.tmux import Tmux, TmuxError

    with contextlib.suppress(TmuxError):
        Tmux(socket).kill_server()
    folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}")
    (folder / socket).unlink(missing_ok=True)
