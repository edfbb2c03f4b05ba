"""The demo's scripted workers (teleclaude/demo/workers.py) taking an item of the demo repository through
its steps, for the tests that need it approved, and a git hook of the project's for a finalize to meet.
Test modules import these from here, never from each other."""

from __future__ import annotations

import subprocess
from pathlib import Path

from teleclaude.demo.workers import Workers, git
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


def assert_main_green(project: Path) -> int:
    """Every first-parent commit of main that has the gate passes it, checked out one by one; how many."""
    checked = 0
    scratch = project.parent / "scratch"
    for commit in git(project, "rev-list", "--first-parent", "main").split():
        if "check.py" not in git(project, "ls-tree", "--name-only", commit).split():
            continue
        git(project, "worktree", "add", "-q", "--detach", str(scratch), commit)
        try:
            done = subprocess.run(
                ["python3", "check.py"], cwd=scratch, capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, f"{commit}: {done.stdout}"
        finally:
            git(project, "worktree", "remove", "--force", str(scratch))
        checked += 1
    return checked


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
