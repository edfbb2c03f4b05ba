"""Why did it say next-review? The two decision orders of docs/design.md §2, top to bottom.

`decide_work` and `decide_prepare` are pure: they read facts through the `Facts` protocol (files already
parsed, git already asked; the app answers each question at most once and only when asked, which keeps a
call to one git process), and return a `Decision`: effects to apply under the project lock, then either an
action or a request to decide again on fresh facts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime

from teleclaude.config.matrix import Config, choose_agent, over_headroom
from teleclaude.errors import Call, Error, ErrorCode, call
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import (
    Action,
    ClaimItem,
    Complete,
    CreateWorktree,
    Decision,
    Dispatch,
    MainStatus,
    MarkDone,
    Marker,
    PlanStatus,
    Prepared,
    Review,
    Roadmap,
    RoadmapItem,
    RunYourself,
    Step,
    Unavailability,
    UsageWindow,
    Worktree,
    WorktreeState,
)
from teleclaude.planner.core.roadmap import blocking_problems, slug_problem
from teleclaude.planner.core.timeparse import format_utc

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # `Facts` is a type for mypy alone: nothing subclasses it

ARCHITECT_NOTE = "Engage as collaborator - this is an architect session requiring discussion."
WORK_AGAIN = call("next_work")
PREPARE_AGAIN = call("next_prepare")


class Facts(Protocol):
    """What the planner may know about a project. Paths are relative to the main checkout."""

    project: str  # absolute path of the main checkout
    config: Config
    now: datetime

    def roadmap(self) -> Roadmap | None: ...  # None: todos/roadmap.md does not exist
    def is_pending(self, slug: str) -> bool: ...  # the roadmap marks it `[ ]`
    def open_bugs(self) -> int: ...
    def archive(self, slug: str) -> str | None: ...  # "done/004-slug/" when archived
    def next_archive(self, slug: str) -> str: ...  # "done/NNN-slug/" for the finalizer
    def worktree(self, slug: str) -> Worktree: ...
    # Requirements and plan come from trees/{slug} once it exists, else from the main checkout.
    def has_requirements(self, slug: str) -> bool: ...
    def plan(self, slug: str) -> PlanStatus | None: ...
    def review(self, slug: str) -> Review | None: ...  # worktree copy
    def main_status(self, slug: str) -> MainStatus: ...
    def main_changes(self) -> tuple[str, ...]: ...  # changed or untracked paths of the whole main checkout
    def worktree_changes(self, slug: str) -> tuple[str, ...]: ...
    def review_rounds(self, slug: str) -> int: ...  # deletions of review-findings.md on the branch
    def merge_conflicts(self, slug: str) -> tuple[str, ...]: ...  # files main and the branch both changed
    def unavailable(self) -> Mapping[str, Unavailability]: ...
    def usage(self) -> Mapping[str, tuple[UsageWindow, ...]]: ...  # agent -> its windows as last reported


def decide_work(facts: Facts, slug: str | None = None) -> Decision:
    # 1. Which item (or the bug list).
    chosen = _resolve(facts, slug, _choose_work_item)
    if isinstance(chosen, Decision):
        return chosen
    slug = chosen
    decision = _work_on(facts, slug)
    # A pending item becomes `[>]` once work on it starts; an error or a finished item claims nothing.
    if not isinstance(decision.action, (Error, Complete)) and facts.is_pending(slug):
        return replace(decision, effects=(*decision.effects, ClaimItem(slug)))  # after the worktree
    return decision


def _work_on(facts: Facts, slug: str) -> Decision:
    # 2. Already archived by the finalizer.
    archive = facts.archive(slug)
    if archive:
        item = _roadmap_item(facts, slug)
        mark = (MarkDone(slug),) if item and item.marker is not Marker.DONE else ()
        return Decision(slug, Complete(slug, archive), mark)

    # 3. Prepared? (An architect need not wait for the dependencies.)
    missing = _missing_preparation(facts, slug)
    if missing:
        return _done(slug, _not_prepared(facts, slug, missing))
    # A `[ ]` item starts only once its dependencies are delivered, whether chosen or named.
    item = _roadmap_item(facts, slug)
    roadmap = facts.roadmap()
    if item and roadmap and item.marker is Marker.PENDING:
        waiting = _unsatisfied(facts, roadmap, item)
        if waiting:
            return _done(slug, _waits_for(slug, waiting))

    # 4-5. Before the worktree exists: what it would be made from must be committed.
    worktree = facts.worktree(slug)
    if worktree.state is WorktreeState.BROKEN:
        return _done(slug, _broken_worktree(slug, worktree))
    if worktree.state in (WorktreeState.ABSENT, WorktreeState.UNFINISHED):
        status = facts.main_status(slug)
        if not status.has_commits:
            return _done(slug, _no_commits())
        if status.ignored:
            return _done(slug, _ignored_files(slug, status.ignored))
        theirs = users_changes(facts)
        if theirs:
            return _done(slug, _main_not_clean_to_start(slug, theirs))
        if status.changes:
            return _done(slug, _dispatch(facts, Step.COMMIT, slug, None, WORK_AGAIN))
        return Decision(slug, None, (CreateWorktree(slug),))

    subfolder = f"trees/{slug}"
    # 6. A worker left changes behind.
    if facts.worktree_changes(slug):
        return _done(slug, _dispatch(facts, Step.COMMIT, slug, subfolder, WORK_AGAIN))
    # 7. Build tasks left.
    plan = facts.plan(slug)
    assert plan is not None  # step 3 returned without a plan
    if not plan.built:
        return _done(slug, _dispatch(facts, Step.BUILD, slug, subfolder, WORK_AGAIN))
    # 8. Not reviewed yet.
    review = facts.review(slug)
    if review is None:
        return _done(slug, _dispatch(facts, Step.REVIEW, slug, subfolder, WORK_AGAIN))
    # 9. Changes requested.
    if not review.approved:
        rounds = facts.review_rounds(slug)
        if rounds >= facts.config.max_review_rounds:
            return _done(slug, _round_limit(slug, rounds, review.gate))
        note = (
            f"The gate ([checks] in teleclaude.toml) failed on main merged into {slug}: {review.gate}; fix "
            "it (its output is in review-findings.md), then a fresh review and the finalize follow."
            if review.gate
            else None
        )
        return _done(slug, _dispatch(facts, Step.FIX, slug, subfolder, WORK_AGAIN, note))
    # 10. Approved, but main moved on and conflicts with the branch: merge main in, in the worktree.
    conflicts = facts.merge_conflicts(slug)
    if conflicts:
        note = (
            f"Branch {slug} conflicts with the main checkout's branch in {', '.join(conflicts[:5])}: merge "
            f"it into {slug} here, resolve, commit; the finalize follows."
        )
        return _done(slug, _dispatch(facts, Step.FIX_MERGE, slug, subfolder, WORK_AGAIN, note))
    # 11. Someone's uncommitted work in the main checkout: the finalize would refuse to merge over it, and
    # those files are the user's, so no worker commits them.
    dirty = tuple(path for path in facts.main_changes() if path != layout.ROADMAP)
    if dirty:
        return _done(slug, main_not_clean(slug, dirty))
    # 12. Approved and merges cleanly: merge and archive from the main checkout.
    archive = facts.next_archive(slug)
    note = f"Archive todos/{slug} to {archive} when merging branch {slug} into the main checkout."
    return _done(slug, _dispatch(facts, Step.FINALIZE, slug, None, WORK_AGAIN, note))


def decide_prepare(facts: Facts, slug: str | None = None) -> Decision:
    chosen = _resolve(facts, slug, _choose_prepare_item)
    if isinstance(chosen, Decision):
        return chosen
    slug = chosen
    # Once the worktree exists its copy is the one read, so the architect writes there too.
    subfolder = f"trees/{slug}" if facts.worktree(slug).state is WorktreeState.PRESENT else None
    if not facts.has_requirements(slug):
        return _done(
            slug, _dispatch(facts, Step.REQUIREMENTS, slug, subfolder, PREPARE_AGAIN, ARCHITECT_NOTE)
        )
    plan = facts.plan(slug)
    if plan is None or not plan.has_build_tasks:
        return _done(slug, _dispatch(facts, Step.PLAN, slug, subfolder, PREPARE_AGAIN, ARCHITECT_NOTE))
    return _done(slug, Prepared(slug))


# --- choosing an item -------------------------------------------------------------------------------


def _resolve(facts: Facts, slug: str | None, choose: Callable[[Facts], str | Decision]) -> str | Decision:
    """The slug given (if it can name a branch), else the one `choose` picks from the files."""
    if slug is None:
        return choose(facts)
    refused = named_item_problem(facts, slug)
    return _done(None, refused) if refused else slug


def named_item_problem(facts: Facts, slug: str) -> Error | None:
    """Step 1 for a slug given: INVALID_SLUG when it cannot name a branch, UNKNOWN_ITEM when nothing in the
    files names it; None when it may be asked about."""
    problem = slug_problem(slug)
    if problem:
        return _invalid_slug(problem)
    return _unknown_item(facts, slug) if _is_unknown(facts, slug) else None


def _is_unknown(facts: Facts, slug: str) -> bool:
    """Named by nothing in the files: not on the roadmap, not archived, no worktree and no todos/{slug}/
    files (a misspelled slug, most likely). Without a roadmap the other errors say what is missing."""
    roadmap = facts.roadmap()
    if roadmap is None or any(item.slug == slug for item in roadmap.items):
        return False
    if facts.archive(slug) or facts.worktree(slug).state is not WorktreeState.ABSENT:
        return False
    return not facts.has_requirements(slug) and facts.plan(slug) is None


def _choose_work_item(facts: Facts) -> str | Decision:
    if facts.open_bugs():
        return _done(None, _dispatch(facts, Step.BUGS, "", None, WORK_AGAIN))
    roadmap = facts.roadmap()
    if roadmap is None:
        return _done(None, _no_roadmap())
    if blocking_problems(roadmap):
        return _done(None, _malformed_roadmap(roadmap))
    open_items = roadmap.open_items()
    for item in open_items:
        if item.marker is Marker.ACTIVE:
            return item.slug
    blocked: list[tuple[RoadmapItem, list[str]]] = []
    for item in open_items:
        waiting = _unsatisfied(facts, roadmap, item)
        if not waiting:
            return item.slug
        blocked.append((item, waiting))
    if blocked:
        return _done(None, _deps_unsatisfied(blocked))
    return _done(None, _nothing_open())


def ready_items(facts: Facts, delivered: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """What a parallel run may work on now, in order: the bug list ("") while bugs are open, the items in
    flight (`[>]`), then the pending items whose dependencies are delivered. A missing or malformed roadmap
    offers the bug list only: `decide_work` without a slug says what is wrong with it. With `delivered`:
    what it will be once those items are."""
    bugs = ("",) if facts.open_bugs() else ()
    roadmap = facts.roadmap()
    if roadmap is None or blocking_problems(roadmap):
        return bugs
    open_items = [i for i in roadmap.open_items() if i.slug not in delivered]
    active = [i.slug for i in open_items if i.marker is Marker.ACTIVE]
    ready = [
        i.slug
        for i in open_items
        if i.marker is not Marker.ACTIVE and not _unsatisfied(facts, roadmap, i, delivered)
    ]
    return (*bugs, *active, *ready)


def next_item_after(facts: Facts, delivered: frozenset[str], taken: frozenset[str]) -> str | None:
    """The item a lane takes next once the items `delivered` are (the first ready one not `taken`, in
    roadmap order), when it may start now too; None when there is none, it is the bug list, or it still
    waits for them (`teleclaude run` claims it ahead while they are finalized)."""
    then = next((slug for slug in ready_items(facts, delivered) if slug not in taken), None)
    return then if then and then in ready_items(facts) else None


def _choose_prepare_item(facts: Facts) -> str | Decision:
    roadmap = facts.roadmap()
    if roadmap is None:
        return _done(None, _no_roadmap())
    if blocking_problems(roadmap):
        return _done(None, _malformed_roadmap(roadmap))
    candidates = [i.slug for i in roadmap.open_items() if not facts.archive(i.slug)]
    if not candidates:
        return _done(None, _nothing_open())
    unprepared = (slug for slug in candidates if _missing_preparation(facts, slug))
    return next(unprepared, candidates[0])


def _unsatisfied(
    facts: Facts, roadmap: Roadmap, item: RoadmapItem, delivered: frozenset[str] = frozenset()
) -> list[str]:
    return open_dependencies(roadmap, item, lambda dep: dep in delivered or bool(facts.archive(dep)))


def open_dependencies(roadmap: Roadmap, item: RoadmapItem, archived: Callable[[str], bool]) -> list[str]:
    """Dependencies still open: neither `[x]`, nor archived, nor gone from the roadmap."""
    waiting = []
    for dep in item.after:
        dep_item = roadmap.find(dep)
        if dep_item and dep_item.marker is not Marker.DONE and not archived(dep):
            waiting.append(dep)
    return waiting


def users_changes(facts: Facts) -> tuple[str, ...]:
    """Uncommitted changes in the main checkout that no worker will commit, so that a finalize would refuse
    to merge over them (step 11). None while bugs are open: the bug fixer works in the main checkout, and
    its edits are not the user's."""
    return () if facts.open_bugs() else not_the_planners(facts.main_changes())


def not_the_planners(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The paths outside todos/ (the roadmap, the architects' and commit-pending's files) and trees/ (the
    worktrees, before the first one made excluded the folder)."""
    return tuple(path for path in paths if path.split("/")[0] not in (layout.TODOS, layout.TREES))


def _roadmap_item(facts: Facts, slug: str) -> RoadmapItem | None:
    roadmap = facts.roadmap()
    return roadmap.find(slug) if roadmap else None


def _missing_preparation(facts: Facts, slug: str) -> list[str]:
    missing = [] if facts.has_requirements(slug) else ["requirements"]
    plan = facts.plan(slug)
    if plan is None:
        missing.append("implementation plan")
    elif not plan.has_build_tasks:
        missing.append("build tasks in its implementation plan")
    return missing


# --- building actions -------------------------------------------------------------------------------


def _done(slug: str | None, action: Action) -> Decision:
    return Decision(slug, action)


def _dispatch(
    facts: Facts, step: Step, slug: str, subfolder: str | None, again: Call, note: str | None = None
) -> Action:
    unavailable = facts.unavailable()
    usage = facts.usage()
    choice = choose_agent(facts.config, step, unavailable, facts.now, usage)
    if choice is None:
        row = facts.config.row(step)
        who = tuple(unavailable[c.agent] for c in row if c.agent in unavailable)
        return RunYourself(step, slug, facts.project, subfolder, who, again)
    near = over_headroom(usage.get(choice.agent, ()), facts.config.headroom, facts.now)
    if near:
        note = "\n".join(line for line in (note, _near_limit(choice.agent, near, facts.config)) if line)
    return Dispatch(step, slug, facts.project, choice.agent, choice.thinking_mode, subfolder, note)


def _near_limit(agent: str, windows: tuple[UsageWindow, ...], config: Config) -> str:
    used = ", ".join(
        f"{w.window} {w.used_percent:.0f}% used"
        + (f" until {format_utc(w.resets_at)}" if w.resets_at is not None else "")
        for w in windows
    )
    return (
        f"{agent} is near its usage limit ({used}; headroom {config.headroom:g}%), "
        "and no other agent for this step is under it."
    )


def _invalid_slug(problem: str) -> Error:
    return Error(
        ErrorCode.INVALID_SLUG,
        f"{problem}.\nA slug names a folder and a git branch. Pass a slug from todos/roadmap.md.",
    )


def _unknown_item(facts: Facts, slug: str) -> Error:
    roadmap = facts.roadmap()
    slugs = [item.slug for item in roadmap.items] if roadmap else []
    import difflib  # here alone: every other answer of the planner's cold path does without it

    close = difflib.get_close_matches(slug, slugs, n=3, cutoff=0.6)
    guess = f"Did you mean {' or '.join(close)}? " if close else ""
    return Error(
        ErrorCode.UNKNOWN_ITEM,
        f"{slug} is not an item of todos/roadmap.md, and todos/{slug}/ has no files.\n"
        f'{guess}To make it an item, add it to the roadmap (`teleclaude new {slug} "what it delivers"`), '
        "then call again.",
    )


def _no_roadmap() -> Error:
    return Error(
        ErrorCode.NO_WORK,
        "todos/roadmap.md does not exist.\n"
        '`teleclaude init` creates it; add items with `teleclaude new my-slug "what to build"` (or one '
        "line each, e.g. `- [ ] my-slug — what to build`), then call again.",
    )


def _nothing_open() -> Error:
    return Error(
        ErrorCode.NO_WORK,
        'No pending items in roadmap.\nAdd one with `teleclaude new my-slug "what it delivers"`.',
    )


def _malformed_roadmap(roadmap: Roadmap) -> Error:
    lines = "\n".join(f"todos/roadmap.md:{p.line}: {p.message}" for p in blocking_problems(roadmap))
    return Error(
        ErrorCode.INVALID_SLUG,
        f"{lines}\nFix these roadmap lines, or pass the slug to work on explicitly.",
    )


def _deps_unsatisfied(blocked: list[tuple[RoadmapItem, list[str]]]) -> Error:
    lines = "\n".join(f"{item.slug} waits for {', '.join(deps)}" for item, deps in blocked)
    return Error(
        ErrorCode.DEPS_UNSATISFIED,
        f"Every open item waits for unfinished work:\n{lines}\n"
        "Finish (or mark [x]) the items they wait for, or edit their (after: ...) lists.",
    )


def _not_prepared(facts: Facts, slug: str, missing: list[str]) -> Error:
    in_tree = facts.worktree(slug).state is WorktreeState.PRESENT
    where = f"trees/{slug}/todos/{slug}" if in_tree else f"todos/{slug}"
    lines = [f"{where} is missing {' and '.join(missing)}: prepare it first."]
    roadmap = facts.roadmap()
    if roadmap:
        ready = [
            i.slug
            for i in roadmap.open_items()
            if i.slug != slug and not facts.archive(i.slug) and not _missing_preparation(facts, i.slug)
        ]
        if ready:
            lines.append(f"Prepared items you could work on instead: {', '.join(ready)}.")
    return Error(ErrorCode.NOT_PREPARED, "\n".join(lines), slug, call("next_prepare", slug=slug))


def _waits_for(slug: str, waiting: list[str]) -> Error:
    return Error(
        ErrorCode.DEPS_UNSATISFIED,
        f"{slug} waits for {', '.join(waiting)} (its after: list), not delivered yet: nothing was started.\n"
        f"Work on {waiting[0]} first (or mark it [x], or edit {slug}'s (after: ...) list), then call again.",
        slug,
        call("next_work", slug=waiting[0]),
    )


def _main_not_clean_to_start(slug: str, dirty: tuple[str, ...]) -> Error:
    """Before an item's worktree is made: its finalize would refuse to merge over these, so its build and
    review would be paid for and then wait."""
    return Error(
        ErrorCode.MAIN_NOT_CLEAN,
        f"The main checkout has uncommitted changes ({', '.join(dirty[:10])}): {slug}'s finalize would "
        f"refuse to merge over them, so {slug} is not started.\n"
        "Commit them (or stash or move them away), then call again.",
        slug,
    )


def main_not_clean(slug: str, dirty: tuple[str, ...]) -> Error:
    """The finalize merges into the main checkout: never over someone's uncommitted work."""
    return Error(
        ErrorCode.FINALIZE_REFUSED,
        f"{slug} is to be merged into the main checkout, but it has uncommitted changes that are not "
        f"{slug}'s ({', '.join(dirty[:10])}). They are not a worker's to commit: no finalizer was sent.\n"
        "Commit them (or move them away), then call again.",
        slug,
    )


def _broken_worktree(slug: str, worktree: Worktree) -> Error:
    repair = worktree.repair or (
        f"Move trees/{slug} aside (e.g. `mv trees/{slug} trees/{slug}.bak`), run `git worktree prune`, "
        "then call again."
    )
    return Error(
        ErrorCode.WORKTREE_FAILED,
        f"trees/{slug} exists but is not a usable git worktree of this repository ({worktree.problem}).\n"
        f"Nothing was changed. {repair}",
        slug,
    )


def _ignored_files(slug: str, ignored: tuple[str, ...]) -> Error:
    return Error(
        ErrorCode.NOT_PREPARED,
        f"git ignores {', '.join(ignored[:5])}, so trees/{slug} would be made without them.\n"
        f"Stop ignoring todos/{slug}/ (check .gitignore), commit its files, then call again.",
        slug,
    )


def _no_commits() -> Error:
    return Error(
        ErrorCode.NO_COMMITS,
        "The repository has no commits yet, so no worktree can branch from it.\n"
        "Commit todos/ (e.g. `git add todos && git commit -m 'Add roadmap'`), then call again.",
    )


def _round_limit(slug: str, rounds: int, gate: str = "") -> Error:
    who = f"the gate still fails ({gate})" if gate else "the reviewer still requests changes"
    return Error(
        ErrorCode.REVIEW_ROUND_LIMIT,
        f"todos/{slug} has been through {rounds} review rounds and {who}.\n"
        f"A human decides: read trees/{slug}/todos/{slug}/review-findings.md, then fix by hand, approve, "
        "or raise max_review_rounds in teleclaude.toml.",
        slug,
    )
