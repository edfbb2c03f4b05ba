"""Where things live in a project (docs/design.md §1): every path the planner reads or writes, and the
archive-folder rule, in one place. Paths are relative to the main checkout (or to `trees/{slug}`)."""

from __future__ import annotations

from teleclaude.planner.core.lazy_re import compiled

TODOS = "todos"
ROADMAP = "todos/roadmap.md"
BUGS = "todos/bugs.md"
TREES = "trees"
DONE = "done"
REQUIREMENTS = "requirements.md"
PLAN = "implementation-plan.md"
REVIEW = "review-findings.md"
CONFIG = "teleclaude.toml"

_ARCHIVE_NAME = compiled(r"(\d{3,})-(.+)")


def item_folder(slug: str) -> str:
    return f"{TODOS}/{slug}"


def item_file(slug: str, name: str) -> str:
    """`todos/{slug}/{name}`, e.g. `item_file("x", PLAN)`."""
    return f"{TODOS}/{slug}/{name}"


def worktree(slug: str) -> str:
    return f"{TREES}/{slug}"


def archive_parts(name: str) -> tuple[int, str] | None:
    """(number, slug) of a `done/` folder name `NNN-slug`; None for any other name."""
    match = _ARCHIVE_NAME.fullmatch(name)
    return (int(match[1]), match[2]) if match else None


def archive_path(number: int, slug: str) -> str:
    """The archive folder as the planner names it: `done/NNN-slug/`."""
    return f"{DONE}/{number:03d}-{slug}/"


def next_archive(names: list[str] | tuple[str, ...], slug: str) -> str:
    """The archive folder for `slug` after the folders `names` of `done/`: one past the highest number."""
    numbers = [parts[0] for parts in map(archive_parts, names) if parts]
    return archive_path(max(numbers, default=0) + 1, slug)
