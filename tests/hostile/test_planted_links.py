"""Issue 23.3: links a repository plants where teleclaude writes. Every temporary file is created
exclusively under a fresh name in the target's folder, so a link planted at a temporary name is never
written through; a link at the target's own name is replaced by a regular file (the hooks, the caches) or,
for the roadmap, refused when it leads out of the repository. The file outside is never written or chmod-ed.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from teleclaude import methodcache
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.setup import githooks, scaffold

from .conftest import first_line, git

VICTIM = b"the user's own file\n"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim"
    path.write_bytes(VICTIM)
    path.chmod(0o600)
    return path


def untouched(victim: Path) -> bool:
    return victim.read_bytes() == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o600


def commit_hooks_folder(repo: Path, links: dict[str, Path]) -> Path:
    """A committed `.githooks/` holding `links` (name -> target), made the hooks folder (`core.hooksPath`)."""
    folder = repo / ".githooks"
    folder.mkdir()
    for name, target in links.items():
        (folder / name).symlink_to(os.path.relpath(target, folder))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    return folder


@pytest.mark.parametrize("command", [("hooks", "install"), ("init",)])
def test_a_link_at_a_hook_temp_name_is_not_written_through(repo, victim, cli, command):
    folder = commit_hooks_folder(
        repo, {f".{hook}.teleclaude.tmp": victim for hook in ("pre-commit", "post-commit")}
    )
    done = cli(*command, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert untouched(victim)
    for hook in ("pre-commit", "post-commit"):
        assert githooks.MARK in (folder / hook).read_bytes()
        assert os.access(folder / hook, os.X_OK)


def test_a_link_at_a_hook_name_is_replaced_not_written_through(repo, victim):
    folder = commit_hooks_folder(repo, {"pre-commit": victim})
    githooks.install(repo)
    assert untouched(victim)
    hook = folder / "pre-commit"
    assert not hook.is_symlink() and githooks.MARK in hook.read_bytes()
    # The link is kept aside and chained, as any hook found in place: the commit runs what it ran before.
    assert (folder / f"pre-commit{githooks.CHAINED_SUFFIX}").readlink() == Path("../../victim")
    githooks.uninstall(repo)
    assert (folder / "pre-commit").readlink() == Path("../../victim") and untouched(victim)


def test_a_hooks_folder_linked_out_of_the_repository_is_refused(repo, tmp_path, cli):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / ".githooks").symlink_to(outside)
    git(repo, "config", "core.hooksPath", ".githooks")
    done = cli("hooks", "install", cwd=repo)
    assert first_line(done.stdout) == "ERROR: FILE_ERROR", done.stdout + done.stderr
    assert list(outside.iterdir()) == []


def test_a_link_at_the_parse_cache_temp_name_is_not_written_through(repo, victim):
    cache = repo / ".git/teleclaude-cache"
    cache.mkdir()
    for name in ("roadmap", "plan-feat"):  # the names this process would have used
        (cache / f".{name}.json.{os.getpid()}.tmp").symlink_to(victim)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch), action
    assert untouched(victim)
    assert (cache / "roadmap.json").is_file() and not (cache / "roadmap.json").is_symlink()


def test_a_link_at_the_parse_cache_name_is_replaced(repo, victim):
    cache = repo / ".git/teleclaude-cache"
    cache.mkdir()
    (cache / "roadmap.json").symlink_to(victim)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch), action
    assert untouched(victim)
    assert not (cache / "roadmap.json").is_symlink()


def test_a_link_at_the_method_table_temp_name_is_not_written_through(tmp_path, victim, monkeypatch):
    table = tmp_path / "__pycache__" / "dataclass-methods.marshal"
    table.parent.mkdir()
    Path(f"{table}.{os.getpid()}.tmp").symlink_to(victim)
    monkeypatch.setattr(methodcache, "_path", lambda: str(table))
    monkeypatch.setattr(methodcache, "_added", True)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as a user's python (the suite's sets it)
    methodcache.save()
    assert untouched(victim)
    assert table.is_file() and not table.is_symlink()


@pytest.mark.parametrize("command", [("init",), ("new", "later", "another item")])
def test_a_roadmap_link_out_of_the_repository_is_not_written_through(repo, tmp_path, victim, cli, command):
    (repo / "todos/roadmap.md").unlink()
    (repo / "todos/roadmap.md").symlink_to(victim if command[0] == "new" else tmp_path / "not-there")
    done = cli(*command, cwd=repo)
    assert first_line(done.stdout) == "ERROR: FILE_ERROR", done.stdout + done.stderr
    assert untouched(victim) and not (tmp_path / "not-there").exists()


def test_a_roadmap_link_inside_the_repository_is_followed_by_new(repo):
    (repo / "plans").mkdir()
    (repo / "todos/roadmap.md").rename(repo / "plans/roadmap.md")
    (repo / "todos/roadmap.md").symlink_to("../plans/roadmap.md")
    done = scaffold.new("later", "another item", cwd=repo)
    assert not isinstance(done, Error), done
    assert (repo / "todos/roadmap.md").is_symlink()
    assert "- [ ] later" in (repo / "plans/roadmap.md").read_text()


@pytest.mark.parametrize("planted", [".mcp.json", ".claude"])
def test_a_project_install_does_not_write_through_a_link_out_of_the_repository(repo, tmp_path, cli, planted):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / ".mcp.json").write_text("{}\n")
    (repo / planted).symlink_to(outside / planted if planted == ".mcp.json" else outside)
    before = {path: path.read_bytes() for path in outside.rglob("*")}
    done = cli("install", "--claude", "--scope", "project", cwd=repo)
    assert first_line(done.stdout) == "ERROR: FILE_ERROR", done.stdout + done.stderr
    assert {path: path.read_bytes() for path in outside.rglob("*")} == before
