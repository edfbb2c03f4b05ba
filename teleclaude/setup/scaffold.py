"""`teleclaude init` and `teleclaude new`: the todos/ scaffolding of a repository."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import FILE_NAME, project_file
from teleclaude.config.checks import EXAMPLE as CHECKS_EXAMPLE
from teleclaude.config.spend import EXAMPLE as BUDGET_EXAMPLE
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core.layout import DONE, PLAN, ROADMAP, TREES, archive_parts, item_folder
from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Marker, Roadmap
from teleclaude.planner.core.roadmap import parse_roadmap, slug_problem
from teleclaude.setup import githooks, install

LIST_LINE = re.compile(rb"[ \t]|[-*+][ \t]|\d{1,9}[.)][ \t]")  # an item, or a line indented under one

# The example sits in an HTML comment, which the planner never reads as items.
ROADMAP_TEXT = """# Roadmap

Work items in order; the planner takes the first open one whose dependencies are done.
Add one with `teleclaude new SLUG "description" [--after a,b]`.

<!--
- [ ] auth-tokens — Replace session cookies with signed tokens.
- [ ] billing-export (after: auth-tokens) — CSV export of invoices.
  Lines indented under an item belong to it.

[ ] pending, [>] in progress, [x] done. A slug is lowercase letters, digits and single dashes.
-->
"""


@dataclass(frozen=True)
class Done:
    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join(self.lines)


def init(cwd: str | os.PathLike | None = None) -> Done | Error:
    repo = gitx.find_repo(cwd or os.getcwd())
    lines = [_create_roadmap(repo.root), _checks_example(repo.root), _exclude_trees(repo)]
    trusted = _trust_project(repo.root)
    if isinstance(trusted, Error):
        return trusted
    lines += trusted
    try:
        lines += githooks.install(repo.root)
    except githooks.HooksError as error:
        return Error(
            error.code,
            f"The git hooks could not be installed: {error.explain()}\n"
            "The roadmap and the trees/ exclusion are in place; fix that, then run `teleclaude init` "
            "again.",
        )
    head = f"OK: {repo.root} is ready for teleclaude."
    tail = 'Next: teleclaude new SLUG "description", then /next-prepare in your agent.'
    return Done((head, *lines, tail))


def _trust_project(root: Path) -> list[str] | Error:
    """A CLI may ask whether to trust a new folder (its driver's `project_trust`), which a detached worker
    cannot answer: answer it for the project root (recorded in the install manifest; `teleclaude install
    --uninstall` takes it back)."""
    done = install.trust_project(root)
    if isinstance(done, Error):
        return done
    return [
        f"{line.status.value:<9} {line.what} ({line.agent}: trust the project and its trees/ for workers)"
        for line in done
    ]


def _create_roadmap(root: Path) -> str:
    path = fs.inside(root, root / ROADMAP)  # a link is followed only while it stays in the repository
    if path.exists():
        return f"unchanged {ROADMAP} (it exists)"
    path.parent.mkdir(parents=True, exist_ok=True)
    fs.atomic_write(path, ROADMAP_TEXT.encode())
    return f"created   {ROADMAP}"


def _checks_example(root: Path) -> str:
    """A commented `[checks]` example in a new teleclaude.toml: it sets nothing until the user says so."""
    path = fs.inside(root, project_file(root))
    if path.exists():
        return f"unchanged {FILE_NAME} (it exists; `[checks]` gates the merges into main)"
    fs.atomic_write(path, (CHECKS_EXAMPLE + "\n" + BUDGET_EXAMPLE).encode())
    return f"created   {FILE_NAME} (a commented [checks] example: what must pass before a merge)"


def _exclude_trees(repo: gitx.Repo) -> str:
    exclude = repo.common_dir / "info" / "exclude"
    before = fs.read_bytes(exclude)
    gitx.exclude_trees(repo)
    changed = fs.read_bytes(exclude) != before
    return f"{'added    ' if changed else 'unchanged'} /{TREES}/ in .git/info/exclude"


def new(
    slug: str, description: str = "", after: tuple[str, ...] = (), cwd: str | os.PathLike | None = None
) -> Done | Error:
    repo = gitx.find_repo(cwd or os.getcwd())
    invalid = _invalid_slugs(slug, after)
    if invalid:
        return invalid
    with fs.project_lock(repo.common_dir):
        path = fs.inside(repo.root, repo.root / ROADMAP)
        data = fs.read_bytes(path)
        existed = data is not None
        data = data if data is not None else ROADMAP_TEXT.encode()
        roadmap = parse_roadmap(decode(data))
        archived = _archived(repo.root)
        refused = _already_there(repo.root, slug, roadmap, archived) or _unknown_deps(
            after, roadmap, archived
        )
        if refused:
            return refused
        line = f"- [ ] {slug}" + (f" (after: {', '.join(after)})" if after else "")
        description = " ".join(description.split())
        new_data = _append(data, line, description)
        item = parse_roadmap(decode(new_data)).find(slug)
        if item is None or item.marker is not Marker.PENDING or item.after != after:
            return Error(
                ErrorCode.INVALID_ARGUMENT,
                f"{ROADMAP} ends in a way that would hide a new item (an unclosed code block or comment?).\n"
                f"Nothing was written. Fix its end, or add this line by hand:\n{line}",
            )
        # The folder stays empty: a copied requirements template would count as written requirements, and
        # a plan template without build tasks is a lint error that the pre-commit hook refuses. The
        # architects write both files from the templates their commands carry.
        (repo.root / item_folder(slug)).mkdir(parents=True)
        fs.atomic_write(path, new_data)
    return Done(
        (
            f"OK: added {slug} to {ROADMAP}.",
            f"{'updated' if existed else 'created'} {ROADMAP}",
            f"created todos/{slug}/ (the architects write requirements.md and {PLAN} there)",
            f"Next: /next-prepare {slug} in your agent (or teleclaude next-prepare {slug}).",
        )
    )


def _invalid_slugs(slug: str, after: tuple[str, ...]) -> Error | None:
    problem = slug_problem(slug)
    for dep in after:
        problem = problem or (f"--after: {slug_problem(dep)}" if slug_problem(dep) else None)
    if problem:
        return Error(
            ErrorCode.INVALID_SLUG,
            f"{problem}.\nA slug names a folder and a git branch: lowercase letters, digits and single "
            "dashes, e.g. billing-export. Nothing was written.",
        )
    if slug in after:
        return Error(ErrorCode.INVALID_ARGUMENT, f"{slug} cannot come after itself.\nDrop it from --after.")
    return None


def _already_there(root: Path, slug: str, roadmap: Roadmap, archived: dict[str, str]) -> Error | None:
    item = roadmap.find(slug)
    if item is not None:
        where = f"{ROADMAP} has it on line {item.line}"
    elif slug in archived:
        where = f"{archived[slug]} archives a finished item of that name"
    elif (root / item_folder(slug)).exists():
        where = f"todos/{slug}/ exists"
    else:
        return None
    return Error(
        ErrorCode.ALREADY_EXISTS,
        f"{slug} already exists: {where}.\nChoose another slug. Nothing was written.",
    )


def _unknown_deps(after: tuple[str, ...], roadmap: Roadmap, archived: dict[str, str]) -> Error | None:
    # The planner treats a dependency missing from the roadmap as delivered, so a typo would never block.
    unknown = [dep for dep in after if roadmap.find(dep) is None and dep not in archived]
    if not unknown:
        return None
    return Error(
        ErrorCode.INVALID_ARGUMENT,
        f"--after names {', '.join(unknown)}, which is neither in {ROADMAP} nor archived in {DONE}/.\n"
        "Add it first (teleclaude new), or fix the name. Nothing was written.",
    )


def _archived(root: Path) -> dict[str, str]:
    """slug -> "done/NNN-slug/" for every archive folder."""
    try:
        names = sorted(os.listdir(root / DONE))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {}
    for name in names:
        parts = archive_parts(name)
        if parts and (root / DONE / name).is_dir():
            found[parts[1]] = f"{DONE}/{name}/"
    return found


def _append(data: bytes, line: str, description: str) -> bytes:
    """`data` with `line` as a new last line, in the file's line endings and encoding."""
    eol = b"\r\n" if b"\r\n" in data else b"\n"
    try:
        data.decode("utf-8")
        encoded = (line + (f" — {description}" if description else "")).encode("utf-8")
    except UnicodeDecodeError:  # a Latin-1 roadmap stays Latin-1
        encoded = (line + (f" - {description}" if description else "")).encode("latin-1", errors="replace")
    if data and not data.endswith(b"\n"):
        data += eol
    last = data.rstrip(b"\r\n").rpartition(b"\n")[2]
    if last.strip() and not LIST_LINE.match(last):  # a list after a paragraph or comment reads better apart
        data += eol
    return data + encoded + eol
