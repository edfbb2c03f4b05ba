"""`teleclaude init` and `teleclaude new` in real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Marker
from teleclaude.planner.core.roadmap import parse_roadmap


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def first_line(text: str) -> str:
    return text.splitlines()[0]


def roadmap(repo: Path):
    return parse_roadmap(decode((repo / "todos" / "roadmap.md").read_bytes()))


def excluded(repo: Path) -> list[str]:
    return (repo / ".git" / "info" / "exclude").read_text().splitlines()


# --- init --------------------------------------------------------------------------------------------


def test_init_sets_up_a_repository_whose_example_is_not_work(repo, run):
    code, out = run("next-work", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: NO_WORK")
    assert "teleclaude init" in out  # before init: the command that makes the roadmap
    code, out = run("init", "--cwd", str(repo / "src"))
    assert (code, first_line(out)) == (0, f"OK: {repo} is ready for teleclaude.")
    assert roadmap(repo).items == () and roadmap(repo).problems == ()
    assert "auth-tokens" in (repo / "todos" / "roadmap.md").read_text()  # the commented example is there
    assert excluded(repo).count("/trees/") == 1
    code, out = run("next-work", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: NO_WORK")


def test_init_in_a_repository_without_commits(tmp_path, run):
    (tmp_path / "fresh").mkdir()
    git(tmp_path / "fresh", "init", "-q")
    assert run("init", "--cwd", str(tmp_path / "fresh"))[0] == 0
    assert first_line(run("next-prepare", "--cwd", str(tmp_path / "fresh"))[1]) == "ERROR: NO_WORK"


def test_init_twice_changes_nothing(repo, run, snapshot):
    run("init", "--cwd", str(repo))
    before = snapshot(repo)
    code, out = run("init", "--cwd", str(repo))
    assert code == 0 and "created" not in out and "added" not in out
    assert snapshot(repo) == before


def test_init_keeps_an_existing_roadmap(repo, run):
    (repo / "todos").mkdir()
    (repo / "todos" / "roadmap.md").write_bytes(b"- [ ] mine\r\n")
    assert run("init", "--cwd", str(repo))[0] == 0
    assert (repo / "todos" / "roadmap.md").read_bytes() == b"- [ ] mine\r\n"


def test_init_installs_the_git_hooks(repo, run):
    assert run("init", "--cwd", str(repo))[0] == 0
    assert (repo / ".git" / "hooks" / "pre-commit").is_file()


def test_what_init_and_new_write_passes_the_pre_commit_hook(repo, run):
    run("init", "--cwd", str(repo))
    run("new", "first", "The first item.", "--cwd", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Roadmap")  # check=True: a refused commit fails the test
    assert git(repo, "status", "--porcelain") == ""


def test_init_reports_a_hooks_failure(repo, run, monkeypatch):
    from teleclaude.setup import githooks

    def refuse(root):
        raise githooks.HooksError("core.hooksPath points elsewhere")

    monkeypatch.setattr(githooks, "install", refuse)
    code, out = run("init", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: FILE_ERROR")
    assert "core.hooksPath" in out


def test_init_outside_a_repository(tmp_path, run):
    code, out = run("init", "--cwd", str(tmp_path))
    assert (code, first_line(out)) == (1, "ERROR: NOT_A_GIT_REPO")
    assert list(tmp_path.iterdir()) == []


# --- new ---------------------------------------------------------------------------------------------


def test_new_appends_an_item_and_starts_its_folder(repo, run):
    run("init", "--cwd", str(repo))
    assert run("new", "auth-tokens", "Signed tokens.", "--cwd", str(repo))[0] == 0
    code, out = run(
        "new", "billing-export", "CSV export of invoices.", "--after", "auth-tokens", "--cwd", str(repo)
    )
    assert (code, first_line(out)) == (0, "OK: added billing-export to todos/roadmap.md.")
    item = roadmap(repo).find("billing-export")
    assert (item.marker, item.after, item.description) == (
        Marker.PENDING,
        ("auth-tokens",),
        "CSV export of invoices.",
    )
    # empty: a requirements template would pass as requirements, a plan template fails lint
    assert list((repo / "todos" / "billing-export").iterdir()) == []
    code, out = run("next-prepare", "--cwd", str(repo))
    assert code == 0 and 'command="next-requirements"' in out and 'args="auth-tokens"' in out


def test_new_keeps_every_other_byte_and_the_line_endings(repo, run):
    (repo / "todos").mkdir()
    original = "\ufeff# Roadmap\r\n\r\n- [x] done-thing — Finished.\r\n- [ ] open-thing".encode()
    (repo / "todos" / "roadmap.md").write_bytes(original)
    assert run("new", "next-thing", "--cwd", str(repo))[0] == 0
    data = (repo / "todos" / "roadmap.md").read_bytes()
    assert data == original + b"\r\n- [ ] next-thing\r\n"
    assert [i.slug for i in roadmap(repo).items] == ["done-thing", "open-thing", "next-thing"]


def test_new_creates_the_roadmap_when_missing(repo, run):
    code, _ = run("new", "first", "The first item.", "--cwd", str(repo / "src"))
    assert code == 0
    assert [(i.slug, i.description) for i in roadmap(repo).items] == [("first", "The first item.")]


def test_new_makes_a_multi_line_description_one_line(repo, run):
    run("new", "one", "line one\nline two", "--cwd", str(repo))
    assert roadmap(repo).find("one").description == "line one line two"


@pytest.mark.parametrize("slug", ["../x", "-rf", "a b", "UPPER", "a--b", "trailing-", "x/y", "", "é"])
def test_a_hostile_slug_is_refused_and_nothing_is_written(repo, run, snapshot, slug):
    before = snapshot(repo)
    code, out = run("new", "--cwd", str(repo), "--", slug, "description")
    assert (code, first_line(out)) == (1, "ERROR: INVALID_SLUG")
    assert snapshot(repo) == before


def test_a_hostile_dependency_is_refused(repo, run, snapshot):
    before = snapshot(repo)
    code, out = run("new", "fine", "--after", "ok,../etc", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: INVALID_SLUG")
    assert snapshot(repo) == before


def test_an_option_looking_slug_without_dashes_is_bad_usage(repo, run, snapshot):
    before = snapshot(repo)
    assert run("new", "-rf", "--cwd", str(repo))[0] == 2
    assert snapshot(repo) == before


@pytest.mark.parametrize("where", ["roadmap", "folder", "archive"])
def test_an_existing_slug_is_refused(repo, run, snapshot, where):
    run("new", "other", "--cwd", str(repo))
    if where == "roadmap":
        run("new", "taken", "--cwd", str(repo))
    elif where == "folder":
        (repo / "todos" / "taken").mkdir()
    else:
        (repo / "done" / "004-taken").mkdir(parents=True)
    before = snapshot(repo)
    code, out = run("new", "taken", "again", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: ALREADY_EXISTS")
    assert snapshot(repo) == before


def test_an_unknown_dependency_is_refused_but_an_archived_one_is_fine(repo, run, snapshot):
    run("new", "known", "--cwd", str(repo))
    before = snapshot(repo)
    code, out = run("new", "later", "--after", "known,typo", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: INVALID_ARGUMENT")
    assert "typo" in out
    assert snapshot(repo) == before
    (repo / "done" / "001-shipped").mkdir(parents=True)
    assert run("new", "later", "--after", "known, shipped", "--cwd", str(repo))[0] == 0
    assert roadmap(repo).find("later").after == ("known", "shipped")


def test_an_item_cannot_come_after_itself(repo, run):
    code, out = run("new", "loop", "--after", "loop", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: INVALID_ARGUMENT")


def test_a_roadmap_ending_in_an_open_code_block_is_not_appended_to(repo, run, snapshot):
    (repo / "todos").mkdir()
    (repo / "todos" / "roadmap.md").write_text("# Roadmap\n\n```\nexample\n")
    before = snapshot(repo / "todos")
    code, out = run("new", "hidden", "--cwd", str(repo))
    assert (code, first_line(out)) == (1, "ERROR: INVALID_ARGUMENT")
    assert snapshot(repo / "todos") == before


def test_new_outside_a_repository(tmp_path, run):
    code, out = run("new", "x", "--cwd", str(tmp_path))
    assert (code, first_line(out)) == (1, "ERROR: NOT_A_GIT_REPO")


def test_init_and_new_as_processes(repo, run_process):
    done = run_process("init", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    done = run_process("new", "from-a-process", "Made by a subprocess.", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert roadmap(repo).find("from-a-process").marker is Marker.PENDING
    done = run_process("new", "Bad Slug", cwd=repo)
    assert (done.returncode, first_line(done.stdout)) == (1, "ERROR: INVALID_SLUG")
    assert "Traceback" not in done.stdout + done.stderr
