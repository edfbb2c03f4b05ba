"""The library API both front ends use: gather facts, decide, apply effects under the lock, return a value.

Every public function returns a value and never raises: failures become `Error(code, message)`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache, wraps
from pathlib import Path

from teleclaude.adapters import fs, parse_cache
from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import AgentsOnRecord, AvailabilityStore, StoreError
from teleclaude.config.matrix import Config
from teleclaude.errors import Error, ErrorCode, Failure, guard
from teleclaude.planner.core import layout
from teleclaude.planner.core.bugs import open_bugs
from teleclaude.planner.core.decide import decide_prepare, decide_work, named_item_problem
from teleclaude.planner.core.decide import next_item_after as decide_next_item_after
from teleclaude.planner.core.decide import ready_items as decide_ready
from teleclaude.planner.core.markdown import TooComplex, conflict_lines, decode
from teleclaude.planner.core.model import (
    Action,
    AgentMarked,
    AgentReport,
    ClaimItem,
    CreateWorktree,
    Dispatch,
    Effect,
    MainStatus,
    MarkDone,
    Marker,
    PlanStatus,
    Review,
    Roadmap,
    Unavailability,
    UsageWindow,
    Worktree,
    WorktreeState,
)
from teleclaude.planner.core.plan import parse_plan_chunks
from teleclaude.planner.core.review import parse_review
from teleclaude.planner.core.roadmap import may_be_pending, parse_roadmap_chunks, rewrite_marker
from teleclaude.planner.core.timeparse import parse_until

MAX_ROUNDS_OF_EFFECTS = 4
MAX_REASON = 500  # characters of a mark_agent_unavailable reason


class RoadmapConflict(Failure):
    code = ErrorCode.ROADMAP_CONFLICT
    next_step = "Finish the merge (resolve and remove the <<<<<<< ======= >>>>>>> lines), then call again."


class RoadmapNotText(fs.FileError):
    next_step = "Save it as UTF-8 (UTF-16 needs a byte order mark), then call again."


@guard
def next_work(
    slug: str | None = None, cwd: str | os.PathLike | None = None, dry_run: bool = False, shared: bool = False
) -> Action:
    """The next step of `slug` (or of the item the planner picks). With `dry_run`, what it would say, with
    nothing applied: no item claimed `[>]`, no worktree made (its step is judged as if it had been).
    `shared` (a run's lanes, asking at once): decided first under the project lock held shared, beside other
    such readers, never beside a writer; an answer that changes nothing (a step after a step) is given from
    there, one with effects decided again under the lock of its own."""
    repo = gitx.find_repo(cwd or os.getcwd())
    config = load_config(repo.root)
    if dry_run:
        return _dry_run(repo, config, slug)
    if shared:
        with fs.project_lock(repo.common_dir, shared=True):
            facts = RepoFacts(repo, config)
            decision = decide_work(facts, slug)
            if not decision.effects and decision.action is not None:
                action = _with_note(decision.action, facts.store_problems())
                return _with_note(action, _last_error(action, repo.root))
    with fs.project_lock(repo.common_dir):
        for _ in range(MAX_ROUNDS_OF_EFFECTS):
            facts = RepoFacts(repo, config)
            decision = decide_work(facts, slug)
            failure = _apply(repo, decision.effects)
            if failure:
                return failure
            if decision.action is not None:
                action = _with_note(decision.action, facts.store_problems())
                return _with_note(action, _last_error(action, repo.root))
            slug = decision.slug
    raise RuntimeError(f"no action after {MAX_ROUNDS_OF_EFFECTS} rounds of effects for {slug}")


def _dry_run(repo: gitx.Repo, config: Config, slug: str | None) -> Action:
    facts = RepoFacts(repo, config)
    decision = decide_work(facts, slug)
    if decision.action is None:  # it would make the worktree first, then decide again
        facts = _WithWorktree(repo, config, decision.slug or "")
        decision = decide_work(facts, decision.slug)
    assert decision.action is not None  # a made worktree leaves no effect before an action
    action = _with_note(decision.action, facts.store_problems())
    return _with_note(action, _last_error(action, repo.root))


def _with_note(action: Action, line: str | None) -> Action:
    if not line or not isinstance(action, Dispatch):
        return action
    return replace(action, note=f"{action.note}\n{line}" if action.note else line)


def _last_error(action: Action, root: Path) -> str | None:
    """Why the last worker session of a dispatched slug failed, so the next worker can avoid it."""
    if not isinstance(action, Dispatch):
        return None
    from teleclaude.adapters.sessions_db import SessionStore  # on dispatch only: sqlite-utils costs ~40 ms

    try:
        last = SessionStore().latest_failure(str(root.resolve()), action.slug)
    except StoreError:
        return None
    if last is None:
        return None
    command, agent, error = last
    if command.removeprefix("prompts:") != action.command:  # another step's failure is not news for this one
        return None
    failure = f"The last worker for {action.slug} (/{action.command}, {agent}) failed: "
    return failure + " ".join(error.split())[:300]  # its lines joined: "Its last output:" keeps what follows


@guard
def named_item(slug: str, cwd: str | os.PathLike | None = None) -> Error | None:
    """Why next_work could not be about `slug` at all (`decide.named_item_problem`), else None. Reads only,
    and no settings: `run SLUG --stand-ins` asks before it makes its clone."""
    repo = gitx.find_repo(cwd or os.getcwd())
    return named_item_problem(RepoFacts(repo, Config()), slug)


@guard
def ready_items(cwd: str | os.PathLike | None = None) -> tuple[str, ...]:
    """The slugs `next_work(slug)` may be asked about side by side now ("" = the bug list, `next_work()`);
    see `decide.ready_items`. Read-only: the claims happen when `next_work` is asked."""
    repo = gitx.find_repo(cwd or os.getcwd())
    return decide_ready(RepoFacts(repo, load_config(repo.root)))


@guard
def next_item_after(
    delivered: frozenset[str], taken: frozenset[str], cwd: str | os.PathLike | None = None
) -> str | None:
    """`decide.next_item_after`: the item to claim ahead while the items `delivered` are finalized."""
    repo = gitx.find_repo(cwd or os.getcwd())
    return decide_next_item_after(RepoFacts(repo, load_config(repo.root)), delivered, taken)


@guard
def catch_up(slug: str, cwd: str | os.PathLike | None = None) -> None:
    """trees/{slug} moved up to main under the project lock when its branch has no commit of its own yet
    (`gitx.catch_up`): a worktree made ahead of its build gets what was merged meanwhile."""
    repo = gitx.find_repo(cwd or os.getcwd())
    with fs.project_lock(repo.common_dir):
        gitx.catch_up(repo, slug)


@guard
def next_prepare(slug: str | None = None, cwd: str | os.PathLike | None = None) -> Action:
    repo = gitx.find_repo(cwd or os.getcwd())
    action = decide_prepare(RepoFacts(repo, load_config(repo.root)), slug).action
    assert action is not None  # preparing has no effects to apply first: it always answers
    return action


@guard
def mark_agent_unavailable(
    agent: str, unavailable_until: str | None = None, reason: str = "", cwd: str | os.PathLike | None = None
) -> AgentMarked | Error:
    config = _config_near(cwd)
    if agent not in config.agents:
        return _unknown_agent(agent, config)
    if len(reason) > MAX_REASON:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"the reason is {len(reason)} characters long; give at most {MAX_REASON}, "
            "a short word such as quota_exhausted.",
        )
    now = datetime.now(UTC)
    local_tz = datetime.now().astimezone().tzinfo
    assert local_tz is not None  # astimezone() always sets one
    until = parse_until(unavailable_until, now, local_tz)
    marked = AvailabilityStore().mark_unavailable(agent, until, reason or "unavailable")
    return AgentMarked(agent, marked.until, marked.reason, now)


@guard
def mark_agent_available(agent: str, cwd: str | os.PathLike | None = None) -> AgentMarked | Error:
    config = _config_near(cwd)
    if agent not in config.agents:
        return _unknown_agent(agent, config)
    AvailabilityStore().mark_available(agent)
    return AgentMarked(agent)


@guard
def agent_status(cwd: str | os.PathLike | None = None) -> AgentReport | Error:
    config = _config_near(cwd)
    now = datetime.now(UTC)
    on_record = AvailabilityStore().on_record(now)
    unavailable, usage = on_record.unavailable, on_record.usage
    agents = tuple(dict.fromkeys((*config.agents, *unavailable)))
    zone = now.astimezone().tzinfo or UTC
    windows = tuple(w for found in usage.values() for w in found)
    out = tuple(unavailable[a] for a in agents if a in unavailable)
    return AgentReport(agents, out, now, windows, config.headroom, zone)


def _config_near(cwd: str | os.PathLike | None) -> Config:
    """The project's config when `cwd` is in a repository, else the user's."""
    try:
        return load_config(gitx.find_repo(cwd or os.getcwd()).root)
    except gitx.NotAGitRepo:
        return load_config(None)


def _unknown_agent(agent: str, config: Config) -> Error:
    return Error(
        ErrorCode.UNKNOWN_AGENT,
        f"{agent[:40]!r} is not a known agent.\nUse one of: {', '.join(config.agents)}.",
    )


# --- effects ----------------------------------------------------------------------------------------


def _apply(repo: gitx.Repo, effects: tuple[Effect, ...]) -> Error | None:
    for effect in effects:
        match effect:
            case ClaimItem(slug=slug):
                _set_marker(repo, slug, Marker.ACTIVE)
            case MarkDone(slug=slug):
                _set_marker(repo, slug, Marker.DONE)
            case CreateWorktree(slug=slug):
                try:
                    gitx.add_worktree(repo, slug)
                except gitx.WorktreeError as error:
                    return Error(ErrorCode.WORKTREE_FAILED, error.explain(), slug)
    return None


def _set_marker(repo: gitx.Repo, slug: str, marker: Marker) -> None:
    """Rewrite one character of the roadmap; an edit saved meanwhile is re-read, never overwritten."""
    roadmap = fs.inside(repo.root, repo.root / layout.ROADMAP)
    fs.rewrite(roadmap, lambda data: _marked(repo, data, slug, marker))


def _marked(repo: gitx.Repo, data: bytes, slug: str, marker: Marker) -> bytes | None:
    """`data`, a roadmap's bytes, with the marker of `slug` set; None: no such item, or no change."""
    item = _parse_roadmap(repo, roadmap_text(data)).find(slug)
    if item is None or item.marker is marker:
        return None
    return rewrite_marker(data, item.line, marker)


def marked_done(repo: gitx.Repo, data: bytes, slug: str) -> bytes | None:
    """`data` (a version of the roadmap, e.g. the staged one) with `slug` marked `[x]`, as in `mark_done`."""
    return _marked(repo, data, slug, Marker.DONE)


def mark_done(repo: gitx.Repo, slug: str) -> None:
    """The finalize's edit: the item's marker becomes `[x]` (the caller holds the project lock)."""
    _set_marker(repo, slug, Marker.DONE)


def _parse_roadmap(repo: gitx.Repo, text: str) -> Roadmap:
    return _parsed(repo, "roadmap", layout.ROADMAP, text, parse_roadmap_chunks)


def _plan_cache(slug: str) -> str:
    return f"plan-{slug}"


def forget_plan(repo: gitx.Repo, slug: str) -> None:
    """A delivered item's plan is parsed no more: its parse-cache file goes (one per item, else for ever)."""
    parse_cache.forget(repo.common_dir, _plan_cache(slug))


def _parsed(repo: gitx.Repo, name: str, where: str, text: str, parse):
    """`parse` through the parse cache in the git common dir; a file past the parse limits names itself."""
    try:
        return parse_cache.cached_parse(repo.common_dir, name, text, parse)
    except TooComplex as error:
        raise TooComplex(f"{where}: {error}") from None


@lru_cache(maxsize=1)  # the claim reads the roadmap again before rewriting it: the same bytes, decoded once
def roadmap_text(data: bytes) -> str:
    """The roadmap's text; refused when a merge left conflict markers in it or when it is not text."""
    text = decode(data)
    conflicts = conflict_lines(text)
    if conflicts:
        raise RoadmapConflict(
            f"{layout.ROADMAP}:{conflicts[0]}: a git conflict marker; a half-merged roadmap is not read"
        )
    if "\0" in text:
        raise RoadmapNotText(f"{layout.ROADMAP} holds NUL bytes, so it is not UTF-8 or UTF-16 text")
    return text


# --- facts ------------------------------------------------------------------------------------------


def _memo(method):
    """Answer each question once per decision: a file is read once, git is asked once."""

    @wraps(method)
    def wrapper(self, *args):
        key = (method.__name__, *args)
        if key not in self._answers:
            self._answers[key] = method(self, *args)
        return self._answers[key]

    return wrapper


class RepoFacts:
    """The `Facts` of one repository at one moment, read lazily from disk, git and the availability store."""

    def __init__(self, repo: gitx.Repo, config: Config, now: datetime | None = None) -> None:
        self.repo = repo
        self.project = str(repo.root)
        self.config = config
        self.now = now or datetime.now(UTC)
        self.store_problem: str | None = None  # set when the availability store could not be read
        self._answers: dict[tuple, object] = {}

    @_memo
    def _roadmap_text(self) -> str | None:
        path = self.repo.root / layout.ROADMAP
        data = fs.read_bytes(path)
        if data is None:
            return None
        fs.inside(self.repo.root, path)  # the claim would be written where it leads
        return roadmap_text(data)

    @_memo
    def roadmap(self) -> Roadmap | None:
        text = self._roadmap_text()
        return None if text is None else _parse_roadmap(self.repo, text)

    def is_pending(self, slug: str) -> bool:
        text = self._roadmap_text()
        if text is None or not may_be_pending(text, slug):
            return False
        item = self.roadmap().find(slug)
        return item is not None and item.marker is Marker.PENDING

    @_memo
    def open_bugs(self) -> int:
        data = fs.read_bytes(self.repo.root / layout.BUGS)
        return 0 if data is None else len(open_bugs(decode(data)))

    def archive(self, slug: str) -> str | None:
        return next((path for _, name, path in self._archive_folders() if name == slug), None)

    def next_archive(self, slug: str) -> str:
        return layout.archive_path(max((n for n, _, _ in self._archive_folders()), default=0) + 1, slug)

    @_memo
    def _archive_folders(self) -> tuple[tuple[int, str, str], ...]:
        """(number, slug, "done/NNN-slug/") for every archive folder, in name order."""
        try:
            names = sorted(os.listdir(self.repo.root / layout.DONE))
        except (FileNotFoundError, NotADirectoryError):
            return ()
        folders = []
        for name in names:
            parts = layout.archive_parts(name)
            if parts and (self.repo.root / layout.DONE / name).is_dir():
                folders.append((*parts, f"{layout.DONE}/{name}/"))
        return tuple(folders)

    @_memo
    def worktree(self, slug: str) -> Worktree:
        return gitx.worktree_state(self.repo, slug)

    def _files_of(self, slug: str) -> Path:
        """Where todos/{slug} is read: the worktree once it exists, else the main checkout."""
        in_tree = self.worktree(slug).state is WorktreeState.PRESENT
        return self.repo.tree(slug) if in_tree else self.repo.root

    def _item_file(self, slug: str, name: str) -> str | None:
        data = fs.read_bytes(self._files_of(slug) / layout.item_file(slug, name))
        return None if data is None else decode(data)

    @_memo
    def has_requirements(self, slug: str) -> bool:
        return bool((self._item_file(slug, layout.REQUIREMENTS) or "").strip())

    @_memo
    def plan(self, slug: str) -> PlanStatus | None:
        text = self._item_file(slug, layout.PLAN)
        if not text or not text.strip():
            return None
        where = layout.item_file(slug, layout.PLAN)
        return _parsed(self.repo, _plan_cache(slug), where, text, parse_plan_chunks)

    @_memo
    def review(self, slug: str) -> Review | None:
        text = self._item_file(slug, layout.REVIEW)
        return None if text is None else parse_review(text)

    @_memo
    def main_status(self, slug: str) -> MainStatus:
        return gitx.status(self.repo.root, layout.item_folder(slug))

    @_memo
    def main_changes(self) -> tuple[str, ...]:
        return gitx.status(self.repo.root).changes

    @_memo
    def worktree_changes(self, slug: str) -> tuple[str, ...]:
        return gitx.status(self.repo.tree(slug)).changes

    @_memo
    def review_rounds(self, slug: str) -> int:
        return gitx.review_rounds(self.repo, slug)

    @_memo
    def merge_conflicts(self, slug: str) -> tuple[str, ...]:
        return gitx.merge_conflicts(self.repo, slug)

    @_memo
    def _agents_on_record(self) -> AgentsOnRecord:
        try:
            return AvailabilityStore().on_record(self.now)
        except StoreError as error:
            import logging  # here: logging costs a CLI call more than it logs (cli/__init__.py)

            logging.getLogger("teleclaude").warning(
                "%s: taking every agent as available and under its headroom", error
            )
            self.store_problem = (
                f"Agent availability and usage could not be read ({error}), so every agent was taken as "
                "available and under its headroom."
            )
            return AgentsOnRecord({}, {})

    def unavailable(self) -> Mapping[str, Unavailability]:
        return self._agents_on_record().unavailable

    def usage(self) -> Mapping[str, tuple[UsageWindow, ...]]:
        return self._agents_on_record().usage

    def store_problems(self) -> str | None:
        """The note for what the availability store could not tell, if anything."""
        return self.store_problem


class _WithWorktree(RepoFacts):
    """The facts as they would be once trees/{slug} was made from HEAD (whose todos/{slug} is the main
    checkout's: a change there is committed first): the dry run's second look, with nothing made."""

    def __init__(self, repo: gitx.Repo, config: Config, slug: str) -> None:
        super().__init__(repo, config)
        self.made = slug

    def worktree(self, slug: str) -> Worktree:
        return Worktree(WorktreeState.PRESENT) if slug == self.made else super().worktree(slug)

    def _files_of(self, slug: str) -> Path:
        return self.repo.root if slug == self.made else super()._files_of(slug)

    def worktree_changes(self, slug: str) -> tuple[str, ...]:
        return () if slug == self.made else super().worktree_changes(slug)

    def review_rounds(self, slug: str) -> int:
        return 0 if slug == self.made else super().review_rounds(slug)

    def merge_conflicts(self, slug: str) -> tuple[str, ...]:
        return () if slug == self.made else super().merge_conflicts(slug)
