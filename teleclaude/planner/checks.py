"""The shell side of `lint`, `status` and the post-commit preview: gather files and git facts, call the core.

Lint reads the working copy of the checkout it runs in (a worktree lints its own todos/), or the staged
blobs of a commit. Status and the preview decide with the planner's own `RepoFacts` and never apply the
effects a decision carries (claiming an item, creating a worktree), so they change nothing.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import StoreError
from teleclaude.config.matrix import Config
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.planner import api as app
from teleclaude.planner.core import layout, phase
from teleclaude.planner.core import lint as lintcore
from teleclaude.planner.core.decide import decide_prepare, decide_work
from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import (
    Action,
    AgentReport,
    Complete,
    Decision,
    Dispatch,
    MainStatus,
    Marker,
    Prepared,
    RunYourself,
)
from teleclaude.planner.core.tool_lines import tool_lines

CLEAR_SCREEN = "\x1b[H\x1b[2J"


def checkout_root(cwd: str | os.PathLike) -> Path:
    """The top of the checkout (main or worktree) that holds `cwd`, found from files alone."""
    start = Path(cwd).absolute()
    if not start.is_dir():
        raise gitx.NotAGitRepo(f"{start} is not a directory")
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    raise gitx.NotAGitRepo(f"{start} is not inside a git repository")


# --- lint -------------------------------------------------------------------------------------------


@guard
def lint_files(cwd: str | os.PathLike, files: Sequence[str] = ()) -> tuple[lintcore.Finding, ...] | Error:
    """The working copy: `files` (paths relative to `cwd`), or every todos/ file lint knows and done/."""
    root = checkout_root(cwd)
    paths: list[str]
    if files:
        named = [_relative(root, Path(cwd), name) for name in files]
        if None in named:
            outside = files[named.index(None)]
            return Error(
                ErrorCode.INVALID_ARGUMENT, f"{outside} is outside {root}.\nName files inside the checkout."
            )
        paths = [p for p in named if p is not None]
    else:
        paths = [layout.ROADMAP, layout.BUGS] + [
            f"todos/{folder.name}/{name}"
            for folder in sorted((root / layout.TODOS).glob("*/"))
            for name in (layout.PLAN, layout.REVIEW)
        ]
        paths = [p for p in paths if (root / p).exists()]  # a FIFO or a device is reported, not skipped
    texts = {p: _text(root / p) for p in paths if lintcore.lintable(p) and not _is_done(p)}
    check_done = not files or any(_is_done(p) for p in paths)
    names = _done_folders(root) if check_done or layout.ROADMAP in texts else ()
    missing = () if files or layout.ROADMAP in paths else (lintcore.no_roadmap(),)
    return (*missing, *lintcore.lint(texts, names, check_done))


@guard
def lint_staged(cwd: str | os.PathLike) -> tuple[lintcore.Finding, ...] | Error:
    """What is about to be committed: the index's blobs of the staged todos/ and done/ files."""
    root = checkout_root(cwd)
    staged = _git_lines(
        ["diff", "--cached", "--name-only", "-z", "--diff-filter=ACMR", "--", "todos/", "done/"], root
    )
    todo_paths = [p for p in staged if lintcore.lintable(p) and not _is_done(p)]
    texts = dict(zip(todo_paths, map(decode, _index_blobs(root, todo_paths)), strict=True))
    check_done = any(_is_done(p) for p in staged)
    names = _index_done_folders(root) if check_done or layout.ROADMAP in texts else ()
    return lintcore.lint(texts, names, check_done)


def _text(path: Path) -> str:
    data = fs.read_bytes(path)
    if data is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    return decode(data)


def _relative(root: Path, cwd: Path, name: str) -> str | None:
    """`name` as a `/`-separated path relative to `root`; None when it lies outside."""
    path = Path(name) if Path(name).is_absolute() else cwd.absolute() / name
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return None
    if not path.exists():
        raise FileNotFoundError(2, "No such file or directory", name)
    return relative.as_posix()


def _is_done(path: str) -> bool:
    return path == layout.DONE or path.startswith(layout.DONE + "/")


def _done_folders(root: Path) -> tuple[str, ...]:
    try:
        return tuple(sorted(entry.name for entry in os.scandir(root / layout.DONE) if entry.is_dir()))
    except (FileNotFoundError, NotADirectoryError):
        return ()


def _index_done_folders(root: Path) -> tuple[str, ...]:
    """Folder names under done/ as the index has them (a path with a part below the folder is a folder)."""
    names = {
        p.split("/")[1] for p in _git_lines(["ls-files", "-z", "--", "done/"], root) if p.count("/") >= 2
    }
    return tuple(sorted(names))


def _git_lines(args: list[str], cwd: Path) -> list[str]:
    return [line for line in gitx.run_git(args, cwd).split("\0") if line]


def _index_blobs(root: Path, paths: Sequence[str]) -> list[bytes]:
    """The staged content of each path, from one `git cat-file --batch` (it honours GIT_INDEX_FILE)."""
    if not paths:
        return []
    request = "".join(f":{path}\n" for path in paths).encode("utf-8", "surrogateescape")
    out, blobs, at = gitx.run_git_bytes(["cat-file", "--batch"], root, given=request), [], 0
    for path in paths:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        if len(header) != 3:
            raise OSError(2, "not in the index", path)
        size = int(header[2])
        blobs.append(out[end + 1 : end + 1 + size])
        at = end + 1 + size + 1
    return blobs


def lint_text(findings: Iterable[lintcore.Finding]) -> str:
    findings = tuple(findings)
    errors = sum(f.is_error for f in findings)
    lines = [f.to_text() for f in findings]
    lines.append(f"{errors} error(s), {len(findings) - errors} warning(s).")
    return "\n".join(lines)


STAGED_HELP = (
    "teleclaude: commit refused. Fix the errors above in the files, `git add` them, and commit again.\n"
    "`teleclaude lint` checks the working copy; `git commit --no-verify` skips this check."
)


# --- status -----------------------------------------------------------------------------------------


class BoardFacts(app.RepoFacts):
    """`RepoFacts` whose main-checkout status comes from one `git status -- todos` shared by every item."""

    @functools.cached_property
    def todos_status(self) -> MainStatus:
        return gitx.status(self.repo.root, layout.TODOS)

    def main_status(self, slug: str) -> MainStatus:
        everything = self.todos_status
        prefix = f"todos/{slug}/"
        return MainStatus(
            everything.has_commits,
            tuple(p for p in everything.changes if p.startswith(prefix)),
            tuple(p for p in everything.ignored if p.startswith(prefix)),
        )


@guard
def status_board(cwd: str | os.PathLike) -> phase.Board | Error:
    repo = gitx.find_repo(cwd)
    facts = BoardFacts(repo, load_config(repo.root))
    roadmap = facts.roadmap()
    if roadmap is None:
        return Error(
            ErrorCode.NO_WORK,
            "todos/roadmap.md does not exist.\n"
            "Create it with one item per line, e.g. `- [ ] my-slug — what to build`.",
        )
    agents = app.agent_status(cwd=repo.root)
    active = [item.slug for item in roadmap.items if item.marker is Marker.ACTIVE]
    tools = worker_tools(repo.root, active, datetime.now(UTC)) if active else {}
    linted = lint_files(repo.root, [layout.ROADMAP])  # what only lint would see: shown on its item's row
    findings = () if isinstance(linted, Error) else linted
    from teleclaude.planner.gate import records  # not on the post-commit hook's path

    shown_agents = agents if isinstance(agents, AgentReport) else None
    return phase.board(
        facts,
        roadmap,
        shown_agents,
        tools,
        findings,
        gates=records(repo.common_dir),
        gated=gated_line(facts.config),
    )


def gated_line(config: Config) -> str:
    """Whether merges into main are gated, in one line for the status board."""
    if config.gate_withheld() is not None:
        return (
            "merges into main are held: teleclaude.toml's [checks] is not trusted (`teleclaude trust`), so "
            "no gate runs and no finalize merges"
        )
    if config.checks is None or not config.checks.gated:
        return "merges into main are not gated: teleclaude.toml has no [checks] gate"
    return f"merges into main are gated by: {', '.join(config.checks.gate)}"


def worker_tools(root: Path, slugs: Iterable[str], now: datetime) -> dict[str, tuple[str, ...]]:
    """slug -> the last tool uses of its newest worker session, a line each as `sessions list` shows them;
    nothing when the sessions database cannot be read (the board is shown without them)."""
    from teleclaude.adapters.sessions_db import SessionStore  # only with an item in progress (~40 ms)

    store, project = SessionStore(), str(root.resolve())
    try:
        sessions = {slug: store.latest(project, slug) for slug in slugs}
        ids = {slug: session.id for slug, session in sessions.items() if session is not None}
        uses = store.recent_tool_uses(ids.values())
    except StoreError:
        return {}
    return {slug: tuple(tool_lines(uses[sid], now)) for slug, sid in ids.items() if sid in uses}


def watch(
    frame: Callable[[], str],
    interval: float,
    write: Callable[[str], None],
    clear: bool,
    iterations: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print `frame()` every `interval` seconds until Ctrl-C (or `iterations` frames); exit status 0."""
    count = 0
    try:
        while True:
            write((CLEAR_SCREEN if clear else "") + frame())
            count += 1
            if iterations is not None and count >= iterations:
                return 0
            sleep(interval)
    except KeyboardInterrupt:
        return 0


# --- the post-commit preview ------------------------------------------------------------------------


@guard
def next_preview(cwd: str | os.PathLike) -> str | Error | None:
    """One or two lines: what the planner would do next for the slug just committed; None to stay silent.

    Read-only: the decision's effects are not applied. In `trees/{slug}` the slug is the worktree's; in the
    main checkout it is the one folder under todos/ (or done/) the commit touched, and a commit that touched
    neither says nothing.
    """
    repo = gitx.find_repo(cwd)
    if not (repo.root / layout.ROADMAP).is_file():
        return None
    slug = tree_slug(repo, Path(cwd))
    if slug is None:
        touched = _touched_slugs(repo.root)
        if touched is None:
            return None
        slug = next(iter(touched)) if len(touched) == 1 else None
    facts = app.RepoFacts(repo, load_config(repo.root))
    decision = decide_work(facts, slug)
    if isinstance(decision.action, Error) and decision.action.code is ErrorCode.NOT_PREPARED and slug:
        decision = decide_prepare(facts, slug)
    return preview_text(decision)


def tree_slug(repo: gitx.Repo, cwd: Path) -> str | None:
    """`slug` when `cwd` is inside the worktree trees/{slug} of `repo`."""
    try:
        parts = cwd.absolute().relative_to(repo.root).parts
    except ValueError:
        return None
    if len(parts) >= 2 and parts[0] == layout.TREES:
        return parts[1]
    return None


def _touched_slugs(root: Path) -> set[str] | None:
    """Slugs whose todos/{slug}/ or done/NNN-{slug}/ the last commit touched; None: it touched neither."""
    args = ["diff-tree", "-r", "--root", "--no-commit-id", "--name-only", "-z", "--diff-merges=first-parent"]
    paths = _git_lines([*args, "HEAD", "--", layout.TODOS, layout.DONE], root)
    if not paths:
        return None
    slugs = set()
    for path in paths:
        parts = path.split("/")
        if len(parts) >= 3 and parts[0] == layout.TODOS:
            slugs.add(parts[1])
        elif len(parts) >= 3 and parts[0] == layout.DONE and "-" in parts[1]:
            slugs.add(parts[1].split("-", 1)[1])
    return slugs


def preview_text(decision: Decision) -> str:
    action, slug = decision.action, decision.slug
    return "teleclaude: " + (_creates_worktree(slug) if action is None else describe(action))


def _creates_worktree(slug: str | None) -> str:
    return f"next → next-work creates trees/{slug} and starts the build"


def describe(action: Action) -> str:
    """An action in one or two short lines, e.g. `next → next-review my-slug (AGENT, slow)`."""
    match action:
        case Dispatch(step=step, slug=slug, agent=agent, thinking_mode=mode):
            return f"next → {step.command} {slug} ({agent}, {mode})".replace("  ", " ")
        case RunYourself(step=step, slug=slug):
            return f"next → {step.command} {slug}: no agent is available, the orchestrator does it".replace(
                "  ", " "
            )
        case Prepared(slug=slug):
            return f"{slug} is prepared; next → next-work {slug}"
        case Complete(slug=slug, archive=archive):
            return f"{slug} is complete ({archive})"
        case Error(code=code, message=message):
            return f"next → ERROR: {code.value}\n  {message.splitlines()[0] if message else ''}".rstrip()
    return "next → unknown"
