"""`teleclaude run`'s question to the planner, asked only while main is where teleclaude left it
(planner/mainref.py). A worker the run started on the main checkout (an architect writing an item's
requirements, a commit of pending changes) commits there by its step: its moves are accepted."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.planner import api as app
from teleclaude.planner import mainref
from teleclaude.planner.core.model import Action
from teleclaude.runtime.api import Runtime


def next_work(
    runtime: Runtime, slug: str | None, root: Path, checked: bool = False, shared: bool = False
) -> Action:
    """`next_work(slug)`, or MAIN_MOVED naming the commit main moved to behind teleclaude's back. `checked`:
    the caller has just asked `moved` (the lanes ask once for all those that ask next_work at once);
    `shared`: decided beside other readers first (`app.next_work`)."""
    found = None if checked else moved(runtime, root)
    return found or app.next_work(slug, cwd=root, shared=shared)


def moved(runtime: Runtime, root: Path) -> Error | None:
    """MAIN_MOVED naming the commit main moved to behind teleclaude's back; None while it did not (or it
    could not be told: next_work says what is wrong)."""
    project = str(root.resolve())

    def on_main_since(since: float) -> bool:
        moment = datetime.fromtimestamp(since, UTC)
        return any(
            s.project == project and not s.subfolder and (not s.state.is_final or s.updated_at >= moment)
            for s in runtime.store.sessions()
        )

    found = guard(mainref.check)(root, on_main_since)  # a failure to look is next_work's to answer
    return found if isinstance(found, Error) and found.code is ErrorCode.MAIN_MOVED else None
