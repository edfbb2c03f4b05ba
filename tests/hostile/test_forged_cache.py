"""Issue 23.6: the parse cache in `.git/teleclaude-cache/` is a hint, never trusted. An entry is found by
the hash of the text it describes, which anyone can compute, so a forged entry under the right key is
checked against the text (each item's line holds its marker, slug and dependencies; a plan has the tasks
it counts) and ignored when it lies; a cache file that is not a regular file, or is larger than the text
could explain, is not read. The answer is always the one a fresh parse gives, never an error or a hang."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from teleclaude.adapters import parse_cache
from teleclaude.planner import api as app
from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.planner.core.plan import parse_plan_chunks
from teleclaude.planner.core.roadmap import parse_roadmap_chunks

from .conftest import git

ROADMAP = "todos/roadmap.md"
PLAN = "# Plan\n## Group 1\n- [ ] write it\n- [ ] test it\n"
REPO_ROOT = Path(__file__).resolve().parents[2]


def make_repo(root: Path, roadmap: str) -> Path:
    for slug in ("feat", "other"):
        (root / "todos" / slug).mkdir(parents=True)
        (root / "todos" / slug / "requirements.md").write_text(f"# {slug}\nDo it.\n")
        (root / "todos" / slug / "implementation-plan.md").write_text(PLAN)
    git(root, "init", "-q", "-b", "main")
    (root / ROADMAP).write_text(roadmap)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "roadmap")
    return root


@pytest.fixture
def repo(tmp_path) -> Path:
    return make_repo(tmp_path / "project", "- [ ] feat — the feature\n- [ ] other — the other one\n")


@pytest.fixture(autouse=True)
def fresh_process() -> None:
    parse_cache._last.clear()  # the in-memory copy: each call reads the cache file, as a new process does


def cache_file(root: Path, name: str = "roadmap") -> Path:
    return root / ".git" / parse_cache.FOLDER / f"{name}.json"


def forge(root: Path, change: Callable[[list], None], name: str = "roadmap", source: str = ROADMAP) -> None:
    """Cache `source` as it is (what any call would do), then `change` its chunk summary in place: the key
    stays that of the current text, so only a check against the text can tell."""
    common = root / ".git"
    text = decode((root / source).read_bytes())
    parse_cache.cached_parse(
        common, name, text, parse_roadmap_chunks if name == "roadmap" else parse_plan_chunks
    )
    parse_cache._last.clear()
    stored = json.loads(cache_file(root, name).read_text())
    chunks = stored["chunks"]
    listed = {
        pair[1] for value in chunks.values() for pair in value if pair and pair[1:] and pair[1] in chunks
    }
    summaries = [value for key, value in chunks.items() if key in listed]  # the file's one chunk
    assert len(summaries) == 1
    change(summaries[0])
    cache_file(root, name).write_text(json.dumps(stored))


def claimed(root: Path, slug: str) -> None:
    """next_work claims `slug`: its answer, and the one marker changed in the roadmap."""
    before = (root / ROADMAP).read_text()
    action = app.next_work(cwd=root)
    assert isinstance(action, Dispatch) and action.slug == slug and action.step is Step.BUILD, action
    assert (root / ROADMAP).read_text() == before.replace(f"- [ ] {slug} ", f"- [>] {slug} ")


def at(index: int, value) -> Callable[[list], None]:
    def change(summary: list) -> None:
        summary[index] = value

    return change


@pytest.mark.parametrize(
    "forgery",
    [
        pytest.param(at(2, [99, 2]), id="a line past the end"),
        pytest.param(at(2, [2, 1]), id="lines swapped"),
        pytest.param(at(1, "x "), id="feat marked done"),
        pytest.param(at(1, "> "), id="feat marked in progress"),
        pytest.param(at(0, "evil\nother"), id="another slug"),
        pytest.param(at(0, "fea\nother"), id="a slug cut short"),
        pytest.param(at(3, "other\n"), id="a dependency added"),
        pytest.param(at(5, [[1, "INVALID_SLUG", "forged"], [99, "INVALID_SLUG", "forged"]]), id="a problem"),
    ],
)
def test_a_forged_roadmap_entry_does_not_change_the_answer(repo, forgery):
    forge(repo, forgery)
    claimed(repo, "feat")


def test_a_forged_entry_cannot_take_a_dependency_away(tmp_path):
    root = make_repo(tmp_path / "project", "- [ ] feat (after: other) — later\n- [ ] other — first\n")
    forge(root, at(3, "\n"))
    claimed(root, "other")


def test_a_forged_plan_entry_does_not_make_a_build_look_done(repo):
    claimed(repo, "feat")
    forge(repo, at(-1, "11"), name="plan-feat", source="trees/feat/todos/feat/implementation-plan.md")
    action = app.next_work("feat", cwd=repo)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action


def test_a_forged_entry_is_replaced_by_what_the_text_says(repo):
    forge(repo, at(1, "x "))
    forged = cache_file(repo).read_text()
    text = decode((repo / ROADMAP).read_bytes())
    parse_cache.cached_parse(repo / ".git", "roadmap", text, parse_roadmap_chunks)
    assert cache_file(repo).read_text() not in (forged, "")
    parse_cache._last.clear()
    claimed(repo, "feat")


def teleclaude(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a process that may use 512 MB and 30 s at most, so a regression fails instead of hanging."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, 512 * 2**20))

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "teleclaude", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limit,
    )


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "sparse", "deep"])
def test_a_cache_file_that_is_not_a_cache_is_ignored(repo, kind):
    path = cache_file(repo)
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse":
        with path.open("wb") as handle:
            handle.truncate(8 * 2**30)  # 8 GB of nothing, on no disk
    else:
        path.write_text("[" * 1_000_000)
    done = teleclaude(repo, "next-work")
    assert done.stdout.startswith("TOOL_CALL:") and "next-build" in done.stdout, done.stdout + done.stderr
    assert "- [>] feat" in (repo / ROADMAP).read_text()


def test_an_honest_cache_is_used_for_items_written_in_many_ways():
    """The check reads markup and dependency lists as the parser does: a true cache is not parsed again."""
    text = (
        "# Roadmap\n- [ ] **feat** — bold\n* [x] `done-one` (after: feat) — code\n"
        "1. [>] *going* (after:feat ,  done-one) x\n  - [ ] nested-one: nested\n"
        "+ [X] Done with a free-text title\n- [ ] bad (after: Bad, feat) d\n"
        "```\n- [ ] in-code\n```\n- [ ] last\n  continued — on the next line\n"
    )
    fresh, known = parse_roadmap_chunks(text, {})
    again, used = parse_roadmap_chunks(text, known)
    assert again == fresh and len(fresh.items) == 6 and len(fresh.problems) == 2
    assert all(used[key] is known[key] for key in known)  # taken from the cache, not parsed afresh
