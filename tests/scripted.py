"""The demo's scripted workers (teleclaude/demo/workers.py) taking an item of the demo repository through
its steps, for the tests that need it approved, and a git hook of the project's for a finalize to meet.
Test modules import these from here, never from each other."""

from __future__ import annotations

from pathlib import Path

from teleclaude.demo.workers import Workers
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step

# The project's test: every tests/test_*.py module's test_* functions, run from the checkout's root.
CHECK_PY = """\
import importlib.util, pathlib, sys
sys.path.insert(0, ".")
failed = 0
for path in sorted(pathlib.Path("tests").glob("test_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in dir(module):
        if name.startswith("test_"):
            try:
                getattr(module, name)()
            except Exception as error:
                failed += 1
                print(f"FAILED {path}::{name}: {error!r}")
print(f"{failed} failed")
sys.exit(1 if failed else 0)
"""


def approve(project: Path, slug: str) -> None:
    """Build and review `slug` with the scripted workers until its next step is the finalize."""
    workers = Workers(project)
    while True:
        action = app.next_work(slug, cwd=project)
        assert isinstance(action, Dispatch), action
        if action.step is Step.FINALIZE:
            return
        workers.run(action)


def git_hook(project: Path, name: str, script: str) -> Path:
    """`script` as the project's own git hook `name` (in .git/hooks), executable."""
    hook = project / ".git" / "hooks" / name
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(script)
    hook.chmod(0o755)
    return hook
