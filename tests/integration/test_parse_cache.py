"""The parse cache in the git common dir: keyed by content, harmless when deleted or corrupt."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from teleclaude.adapters import parse_cache
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step

from .repos import commit, tree, write
from .repos import repo as repo  # noqa: F401 (the fixture)


@pytest.fixture(autouse=True)
def fresh_process() -> None:
    parse_cache._last.clear()  # the in-memory cache, as in a fresh process


def cache_files(root: Path) -> dict[str, dict]:
    folder = root / ".git" / parse_cache.FOLDER
    return {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def fresh_process_work(root: Path, slug: str | None = None):
    parse_cache._last.clear()
    return app.next_work(slug, cwd=root)


def test_a_call_leaves_the_cache_in_the_git_common_dir(repo):
    assert isinstance(fresh_process_work(repo), Dispatch)
    files = cache_files(repo)
    assert set(files) == {"roadmap.json", "plan-feat.json"}
    assert all(data["format"] == parse_cache.FORMAT and data["chunks"] for data in files.values())


def test_an_edited_file_is_parsed_again_not_taken_from_the_cache(repo):
    assert fresh_process_work(repo).step is Step.BUILD
    before = cache_files(repo)["plan-feat.json"]["chunks"]
    plan = tree(repo) / "todos" / "feat" / "implementation-plan.md"
    plan.write_text(plan.read_text().replace("- [ ]", "- [x]"))
    subprocess.run(["git", "add", "-A"], cwd=tree(repo), check=True)
    subprocess.run(["git", "commit", "-qm", "built"], cwd=tree(repo), check=True)
    assert fresh_process_work(repo, "feat").step is Step.REVIEW
    assert cache_files(repo)["plan-feat.json"]["chunks"].keys() != before.keys()


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.unlink(),
        lambda path: path.write_bytes(b"\x00not json"),
        lambda path: path.write_text(json.dumps({"format": parse_cache.FORMAT, "chunks": []})),
        lambda path: path.write_text(json.dumps({"format": 999, "chunks": {}})),
    ],
)
def test_a_deleted_or_corrupt_cache_is_harmless(repo, damage):
    first = fresh_process_work(repo)
    for path in (repo / ".git" / parse_cache.FOLDER).glob("*.json"):
        damage(path)
    assert fresh_process_work(repo) == first
    assert set(cache_files(repo)) == {"roadmap.json", "plan-feat.json"}  # written again


def test_forged_entries_under_the_right_keys_are_not_trusted_blindly(repo):
    first = fresh_process_work(repo)
    for path in (repo / ".git" / parse_cache.FOLDER).glob("*.json"):
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "chunks": dict.fromkeys(data["chunks"], [["x"], 7])}))
    assert fresh_process_work(repo) == first


def test_the_cache_folder_may_be_a_file(repo):
    (repo / ".git" / parse_cache.FOLDER).write_text("in the way")
    assert isinstance(fresh_process_work(repo), Dispatch)


def test_a_deeply_nested_roadmap_is_a_file_error(repo):
    write(repo, "todos/roadmap.md", "".join("  " * i + f"- [ ] d{i}\n" for i in range(3000)))
    answer = fresh_process_work(repo)
    assert isinstance(answer, Error) and answer.code is ErrorCode.FILE_ERROR
    assert "todos/roadmap.md" in answer.message


def test_a_deeply_nested_plan_is_a_file_error(repo):
    write(repo, "todos/feat/implementation-plan.md", ">" * 300 + " - [ ] deep\n")
    commit(repo, "deep plan")
    answer = fresh_process_work(repo, "feat")
    assert isinstance(answer, Error) and answer.code is ErrorCode.FILE_ERROR
