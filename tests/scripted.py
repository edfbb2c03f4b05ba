"""The demo's scripted workers (teleclaude/demo/workers.py) taking an item of the demo repository through
its steps, for the tests that need it approved. Test modules import it from here, never from each other."""

from __future__ import annotations

from pathlib import Path

from teleclaude.demo.workers import Workers
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step


def approve(project: Path, slug: str) -> None:
    """Build and review `slug` with the scripted workers until its next step is the finalize."""
    workers = Workers(project)
    while True:
        action = app.next_work(slug, cwd=project)
        assert isinstance(action, Dispatch), action
        if action.step is Step.FINALIZE:
            return
        workers.run(action)
