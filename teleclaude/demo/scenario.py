"""`teleclaude demo`: a throwaway repository driven from `[ ]` to `done/` through `next_work`.

`drive` calls the planner in-process with the scripted workers of `teleclaude.demo.workers`; `run` drives
the same roadmap with `teleclaude run`, the fake agent CLIs of `teleclaude.demo.stand_in` working in tmux.
"""

from __future__ import annotations

import collections
import contextlib
import os
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from teleclaude.adapters.git import find_repo
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.board.gather import cost_lines, report_line
from teleclaude.demo import stand_in as fake_agent
from teleclaude.demo.workers import Workers, commit_all, git, make_repository
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Action, Complete, Dispatch, Marker
from teleclaude.planner.core.render import to_text
from teleclaude.planner.core.roadmap import parse_roadmap
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind
from teleclaude.runtime.orchestrator import Outcome

__all__ = ["Workers", "commit_all", "drive", "git", "make_repository", "rehearse", "run"]


class Console(Protocol):
    """Where the run shows itself: the front end's console (log lines, and a live status line)."""

    def show(self, text: str) -> None: ...
    def status(self, progress: orchestrator.StatusLine) -> None: ...
    def clear(self) -> None: ...


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

[prices]  # the stand-ins' tokens at a made-up price: the report's cost is an estimate from it
"stand-in" = {{input = 3.0, cached = 0.3, output = 15.0}}

[budget]  # far above what the demo uses: a runaway item would be parked, the others go on
item_usd = 1.0
run_usd = 5.0
"""
DEMO_AGENTS = {  # how the fake agents misbehave, once each, on purpose
    "FAKE_AGENT_GEMINI": "limit",  # gemini prints a 429: marked unavailable, builds fall back to claude
    "FAKE_AGENT_REJECT": "greeting",  # the first review of greeting requests changes
    "FAKE_AGENT_FORGET": "farewell",  # the builder of farewell leaves its work uncommitted
    "FAKE_AGENT": "hook,tokens",  # each turn ends by its Stop hook, which reads the tokens it used
}
DEMO_MAX_STEPS = 40


def run(console: Console, keep: bool = False, verbose: bool = False) -> int:
    """Drive the demo roadmap to done/ with `teleclaude run`; 0 when all three items were delivered."""
    if not _has_tmux():
        return 1
    started = time.monotonic()
    try:
        with throwaway("teleclaude-demo-", keep) as (base, socket), environment(_demo_variables(base)):
            project = make_repository(base / "project")
            (project / "teleclaude.toml").write_text(DEMO_SETTINGS.format(socket=socket))
            commit_all(project, "Runtime settings for the demo: a private tmux server, short timings")
            print(f"teleclaude demo in {project}")
            print(f"fake agent CLIs in {base / 'bin'}; watch a worker: tmux -L {socket} attach -t tc-ID")
            print("misbehaving on purpose: " + ", ".join(f"{k}={v}" for k, v in DEMO_AGENTS.items()) + "\n")
            print((project / "todos" / "roadmap.md").read_text())
            report = orchestrate(project, console, verbose)
            return _summary_of_run(project, report, time.monotonic() - started)
    except KeyboardInterrupt:
        print("\nDemo interrupted.")
        return 130


def _has_tmux() -> bool:
    if shutil.which("tmux") is not None:
        return True
    print(
        "ERROR: TMUX_FAILED\ntmux is not installed, and the demo runs its workers in tmux.\n"
        "Install it (apt install tmux, brew install tmux), then run the demo again."
    )
    return False


REHEARSAL_PREFIX = "teleclaude-rehearsal-"
REHEARSAL_OF = "rehearsal-of"  # in a rehearsal's folder: the checkout it cloned
REHEARSAL_OVER = "rehearsal-over"  # in a rehearsal's folder: it ended (its clone may go)


def rehearse(
    project: Path, slug: str | None, prepare: bool, max_steps: int, parallel: int, console: Console
) -> int:
    """`teleclaude run --stand-ins`: the run on a temporary clone of `project`'s last commit, with the
    stand-in CLIs, its own database, no user settings and a private tmux server. The stand-ins commit and
    merge, so the user's checkout is only read (cloned). The clone is kept for looking at until the next
    rehearsal of the same checkout, which removes it (one kept per checkout, not a pile)."""
    repo = guard(find_repo)(project)
    if isinstance(repo, Error):
        print(to_text(repo))
        return 1
    refused = app.named_item(slug, cwd=repo.root) if slug is not None else None
    if isinstance(refused, Error):  # a typo costs no clone
        print(to_text(refused))
        return 1
    if not _has_tmux():
        return 1
    removed = remove_earlier_rehearsals(repo.root)
    if removed:
        print(f"removed the clone of the last rehearsal: {', '.join(map(str, removed))}")
    try:
        with throwaway(REHEARSAL_PREFIX, keep=True, kept=_kept_rehearsal) as (base, socket):
            (base / REHEARSAL_OF).write_text(str(repo.root))
            clone = base / "project"
            git(base, "clone", "-q", "--no-hardlinks", "--", str(repo.root), str(clone))
            git(clone, "remote", "remove", "origin")  # nothing the rehearsal does can reach the user's repo
            _same_identity(repo.root, clone)
            (clone / "teleclaude.toml").write_text(DEMO_SETTINGS.format(socket=socket))
            commit_all(clone, "Rehearsal settings: a private tmux server, short timings")
            variables = {**_demo_variables(base), **{name: None for name in DEMO_AGENTS}}
            variables["XDG_CONFIG_HOME"] = str(base / "config")  # the user's own teleclaude.toml is not read
            print(f"rehearsal on a clone of {repo.root}'s last commit (uncommitted changes are not in it):")
            print(f"  {clone}; stand-in CLIs in {base / 'bin'}; watch: tmux -L {socket} attach -t tc-ID\n")
            try:
                with environment(variables):
                    report = orchestrator.run(
                        clone,
                        slug,
                        prepare,
                        max_steps,
                        open_runtime(clone),
                        console.show,
                        console.status,
                        parallel=parallel,
                        wait_for_limits=False,
                        rehearsal_of=repo.root,
                    )
                    console.clear()
                    # its database is the rehearsal's: so is its report, in its folder
                    line = report_line(report.run_id, base / "reports") if report.run_id else ""
            finally:
                (base / REHEARSAL_OVER).touch()
            print("\n" + report.text)
            if line:
                print(line)
            done = sorted(p.name for p in (clone / "done").iterdir()) if (clone / "done").is_dir() else []
            print(f"\ndone/ in the clone: {', '.join(done) or 'nothing'}; your checkout was not changed.")
            print(f"look: git -C {shlex.quote(str(clone))} log --oneline --first-parent")
            return report.exit_code
    except KeyboardInterrupt:
        print("\nRehearsal interrupted.")
        return 130
    except subprocess.CalledProcessError as error:  # making the clone failed (disk, permissions, git)
        said = (error.stderr or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
        why = f"`{' '.join(error.cmd)}` failed" + (f": {said[0]}" if said else "")
        print(
            to_text(
                Error(
                    ErrorCode.FILE_ERROR,
                    f"The rehearsal clone could not be made: {why}.\nFix that, then run it again.",
                )
            )
        )
        return 1


def _same_identity(source: Path, clone: Path) -> None:
    """The clone commits as the user does (their git identity from any level of their config), else as the
    rehearsal: a clone keeps no repository-level settings of the original."""
    for key, fallback in (
        ("user.name", "teleclaude rehearsal"),
        ("user.email", "rehearsal@teleclaude.invalid"),
    ):
        try:
            value = git(source, "config", "--get", key).strip()
        except subprocess.CalledProcessError:  # not set anywhere
            value = ""
        git(clone, "config", key, value or fallback)


def _kept_rehearsal(base: Path) -> str:
    return (
        f"Kept {base} until the next rehearsal of this checkout; to remove it now: "
        f"rm -rf {shlex.quote(str(base))}"
    )


def remove_earlier_rehearsals(root: Path) -> list[Path]:
    """Remove the folders of the ended rehearsals of `root` in the temporary folder (ours alone: made by
    this user, with both marks, not a link), and say which."""
    removed = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(REHEARSAL_PREFIX + "*")):
        try:
            mine = not folder.is_symlink() and folder.is_dir() and folder.stat().st_uid == os.getuid()
            ours = mine and (folder / REHEARSAL_OVER).is_file()
            if ours and (folder / REHEARSAL_OF).read_text() == str(root):
                shutil.rmtree(folder)
                removed.append(folder)
        except OSError:  # another user's, half removed, unreadable: left alone
            continue
    return removed


@contextlib.contextmanager
def throwaway(
    prefix: str, keep: bool, kept: Callable[[Path], str] = lambda base: f"Kept {base}"
) -> Iterator[tuple[Path, str]]:
    """A temporary folder and the name of a private tmux server, both gone afterwards (the folder stays with
    `keep`, and `kept` says so)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    socket = f"tc-demo-{secrets.token_hex(4)}"
    try:
        yield base, socket
    finally:
        remove_tmux_server(socket)
        if keep:
            print(kept(base))
        else:
            shutil.rmtree(base, ignore_errors=True)


def _demo_variables(base: Path) -> dict[str, str | None]:
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


def orchestrate(
    project: Path, console: Console, verbose: bool, slug: str | None = None, max_steps: int = DEMO_MAX_STEPS
) -> orchestrator.RunReport:
    """`teleclaude run` on the demo's project (one item with `slug`), shown on the console."""
    report = orchestrator.run(
        project, slug, False, max_steps, open_runtime(project), console.show, console.status, verbose=verbose
    )
    console.clear()
    return report


def _summary_of_run(project: Path, report, seconds: float) -> int:
    """Print what happened; 0 when every item of the demo roadmap was delivered."""
    if report.outcome is Outcome.COMPLETE:
        print("\n" + report.text.splitlines()[0])
    elif report.outcome is not Outcome.INTERRUPTED:
        print("\n" + report.text)
    if report.run_id:
        print("\n".join(cost_lines(report.run_id)))
    roadmap = (project / "todos" / "roadmap.md").read_text()
    done = sorted(p.name for p in (project / "done").iterdir()) if (project / "done").is_dir() else []
    print("\n" + roadmap)
    print(f"done/: {', '.join(done) or 'nothing'}")
    print("\ngit log --oneline --first-parent (main):")
    print(git(project, "log", "--oneline", "--first-parent", "-n", "12").rstrip())
    print_sessions(report.history)
    items = parse_roadmap(roadmap).items
    finished = len(done) == len(items) and all(item.marker is Marker.DONE for item in items)
    if report.outcome is Outcome.INTERRUPTED:
        print(f"\nDemo interrupted after {seconds:.0f}s.")
        return 130
    verdict = "every item delivered" if finished else f"stopped early ({report.outcome.value})"
    print(f"\nDemo finished in {seconds:.0f}s: {verdict}.")
    return 0 if finished else 1


def print_sessions(history) -> None:
    """Every worker session of the run, how it ended, and the story of what went wrong on the way."""
    print(f"\nworker sessions ({len(history)}):")
    for number, handled in enumerate(history, 1):
        session = handled.session
        ended = handled.kind.value if handled.kind else "ended"
        print(f"  {number:2d}. {session.agent:<6} {session.command} {session.slug}: {ended}")
    agents = collections.Counter(handled.session.agent for handled in history)
    print("per agent: " + ", ".join(f"{agent} {count}" for agent, count in sorted(agents.items())))
    for line in _what_went_wrong(history):
        print(line)


def _what_went_wrong(history) -> list[str]:
    """The rate-limit fallback, the review round and the forgotten commit, as they happened."""
    sessions = [handled.session for handled in history]

    def later(index: int, step: str, slug: str):
        return next((s for s in sessions[index + 1 :] if (s.command, s.slug) == (step, slug)), None)

    lines = []
    for index, handled in enumerate(history):
        session, step = handled.session, handled.session.command
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


def remove_tmux_server(socket: str) -> None:
    """Kill the demo's private tmux server (and every worker in it) and remove its socket file."""
    with contextlib.suppress(TmuxError):
        Tmux(socket).kill_server()
    folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}")
    (folder / socket).unlink(missing_ok=True)
