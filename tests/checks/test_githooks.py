"""Git hooks installed into real repositories and fired by real `git commit`s, in main and in a worktree."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from teleclaude.errors import ErrorCode
from teleclaude.setup import githooks

USER_HOOK = '#!/bin/sh\necho "user hook ran" >> "$(git rev-parse --show-toplevel)/../user-hook.log"\nexit 0\n'


def hooks(repo: Path) -> Path:
    return repo / ".git" / "hooks"


def commit_file(tools, root: Path, env, relative: str, text: str):
    tools.write(root, relative, text)
    tools.git(root, "add", relative, env=env)
    return tools.git(root, "commit", "-m", f"edit {relative}", check=False, env=env)


def head(tools, root: Path) -> str:
    return tools.git(root, "rev-parse", "HEAD").stdout.strip()


@pytest.fixture
def installed(repo) -> Path:
    githooks.install(repo)
    return repo


# --- install, status, uninstall ---------------------------------------------------------------------


def test_install_writes_executable_hooks_and_is_idempotent(repo):
    lines = githooks.install(repo)
    assert [line.split(":")[0] for line in lines] == ["pre-commit", "post-commit"]
    for name in githooks.HOOKS:
        path = hooks(repo) / name
        assert path.stat().st_mode & stat.S_IXUSR
        assert str(Path(sys.executable)) in path.read_text()
    before = {name: (hooks(repo) / name).read_bytes() for name in githooks.HOOKS}
    again = githooks.install(repo)
    assert all("already installed" in line for line in again)
    assert {name: (hooks(repo) / name).read_bytes() for name in githooks.HOOKS} == before
    assert not list(hooks(repo).glob("*.teleclaude-chained"))
    assert all(h.installed and h.current and not h.chained for h in githooks.status(repo))


def test_status_and_uninstall_through_the_cli(repo, cli):
    assert "not installed" in cli("hooks", "--cwd", str(repo)).stdout
    assert cli("hooks", "install", "--cwd", str(repo)).returncode == 0
    shown = cli("hooks", "status", "--cwd", str(repo)).stdout.splitlines()
    assert shown[0].split() == ["pre-commit", "installed"]
    assert cli("hooks", "uninstall", "--cwd", str(repo)).returncode == 0
    assert not (hooks(repo) / "pre-commit").exists()
    assert "not installed" in cli("hooks", "uninstall", "--cwd", str(repo)).stdout


def test_an_existing_hook_is_chained_runs_first_and_comes_back_byte_for_byte(repo, tools, cli_env):
    user = hooks(repo) / "pre-commit"
    user.write_text(USER_HOOK)
    user.chmod(0o750)
    original = (user.read_bytes(), user.stat().st_mode)

    lines = githooks.install(repo)
    assert "pre-commit.teleclaude-chained" in lines[0]
    assert githooks.status(repo)[0].chained
    assert githooks.install(repo)[0].startswith("pre-commit: already installed")  # still one chained hook

    assert commit_file(tools, repo, cli_env, "src.txt", "x\n").returncode == 0
    assert (repo.parent / "user-hook.log").read_text() == "user hook ran\n"

    githooks.uninstall(repo)
    assert (user.read_bytes(), user.stat().st_mode) == original
    assert not (hooks(repo) / "pre-commit.teleclaude-chained").exists()
    assert not (hooks(repo) / "post-commit").exists()


def test_a_failing_chained_hook_still_refuses_the_commit(repo, tools, cli_env):
    (hooks(repo) / "pre-commit").write_text("#!/bin/sh\necho 'user says no' >&2\nexit 3\n")
    (hooks(repo) / "pre-commit").chmod(0o755)
    githooks.install(repo)
    before = head(tools, repo)
    done = commit_file(tools, repo, cli_env, "src.txt", "x\n")
    assert done.returncode != 0
    assert "user says no" in done.stderr
    assert head(tools, repo) == before


def test_a_conflict_changes_nothing(repo):
    (hooks(repo) / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (hooks(repo) / "pre-commit.teleclaude-chained").write_text("#!/bin/sh\nexit 0\n")
    before = sorted(p.name for p in hooks(repo).iterdir())
    with pytest.raises(githooks.HooksError) as raised:
        githooks.install(repo)
    assert raised.value.code is ErrorCode.ALREADY_EXISTS
    assert sorted(p.name for p in hooks(repo).iterdir()) == before


def test_core_hooks_path_is_honoured(repo, tools, cli_env):
    tools.git(repo, "config", "core.hooksPath", ".githooks")
    githooks.install(repo)
    assert (repo / ".githooks" / "pre-commit").is_file()
    assert not (hooks(repo) / "pre-commit").exists()
    done = commit_file(tools, repo, cli_env, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    assert done.returncode != 0
    assert "INVALID_SLUG" in done.stderr


def test_a_worktree_shares_the_hooks_of_the_main_checkout(repo, add_tree):
    tree = add_tree(repo, "feat")
    githooks.install(tree)
    assert (hooks(repo) / "pre-commit").is_file()
    assert githooks.hooks_dir(tree) == githooks.hooks_dir(repo)


def test_not_a_repository_is_an_error_code(tmp_path, cli):
    done = cli("hooks", "install", "--cwd", str(tmp_path), process=True)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "ERROR: NOT_A_GIT_REPO"


def test_an_interpreter_path_with_spaces_and_quotes_works(repo, tools, cli_env, tmp_path):
    odd = tmp_path / "my env's" / "bin"
    odd.mkdir(parents=True)
    (odd / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (odd / "python").chmod(0o755)
    githooks.install(repo, python=str(odd / "python"))
    done = commit_file(tools, repo, cli_env, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    assert done.returncode != 0
    assert "INVALID_SLUG" in done.stderr


def test_a_missing_interpreter_does_not_block_commits(repo, tools, cli_env, tmp_path):
    githooks.install(repo, python=str(tmp_path / "gone" / "python"))
    done = commit_file(tools, repo, cli_env, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    assert done.returncode == 0
    assert "hooks install" in done.stderr


# --- pre-commit -------------------------------------------------------------------------------------


def test_a_bad_slug_is_refused_in_the_main_checkout(installed, tools, cli_env):
    repo = installed
    before = head(tools, repo)
    done = commit_file(tools, repo, cli_env, "todos/roadmap.md", "- [ ] feat\n- [ ] Not_A_Slug — x\n")
    assert done.returncode == 1
    assert "todos/roadmap.md:2: INVALID_SLUG error" in done.stderr
    assert "git add" in done.stderr  # how to fix it
    assert "Traceback" not in done.stderr
    assert head(tools, repo) == before


def test_a_good_commit_passes(installed, tools, cli_env):
    repo = installed
    before = head(tools, repo)
    done = commit_file(tools, repo, cli_env, "todos/roadmap.md", "- [ ] feat\n- [ ] more — another\n")
    assert done.returncode == 0, done.stderr
    assert head(tools, repo) != before


def test_a_bad_verdict_is_refused_in_a_worktree_and_a_good_one_passes(installed, tools, cli_env, add_tree):
    tree = add_tree(installed, "feat")
    findings = "todos/feat/review-findings.md"
    done = commit_file(tools, tree, cli_env, findings, "- [x] APPROVE\n- [x] REQUEST CHANGES\n")
    assert done.returncode == 1
    assert "todos/feat/review-findings.md:2: VERDICT error" in done.stderr
    done = commit_file(tools, tree, cli_env, findings, "- [ ] APPROVE\n- [x] REQUEST CHANGES\n")
    assert done.returncode == 0, done.stderr


def test_the_staged_version_is_linted_not_the_working_copy(installed, tools, cli_env):
    repo = installed
    tools.write(repo, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    tools.git(repo, "add", "todos/roadmap.md")
    tools.write(repo, "todos/roadmap.md", "- [ ] fixed-but-not-staged\n")
    done = tools.git(repo, "commit", "-m", "bad staged", check=False, env=cli_env)
    assert done.returncode == 1
    assert "INVALID_SLUG" in done.stderr

    tools.write(repo, "todos/roadmap.md", "- [ ] good\n")
    tools.git(repo, "add", "todos/roadmap.md")
    tools.write(repo, "todos/roadmap.md", "- [ ] Bad_But_Not_Staged\n")
    done = tools.git(repo, "commit", "-m", "good staged", check=False, env=cli_env)
    assert done.returncode == 0, done.stderr


def test_commit_with_paths_lints_what_is_committed(installed, tools, cli_env):
    repo = installed
    tools.write(repo, "todos/roadmap.md", "- [ ] Bad_Slug\n")
    done = tools.git(repo, "commit", "-m", "partial", "--", "todos/roadmap.md", check=False, env=cli_env)
    assert done.returncode == 1
    assert "INVALID_SLUG" in done.stderr


def test_a_bad_archive_name_is_refused(installed, tools, cli_env):
    done = commit_file(tools, installed, cli_env, "done/feat/notes.md", "archived\n")
    assert done.returncode == 1
    assert "done/feat:0: ARCHIVE_NAME error" in done.stderr


def test_warnings_do_not_refuse(installed, tools, cli_env):
    done = commit_file(tools, installed, cli_env, "todos/roadmap.md", "- [ ] feat (after: ghost)\n")
    assert done.returncode == 0
    assert "UNKNOWN_DEPENDENCY warning" in done.stderr


def test_commits_without_todos_are_silent(installed, tools, cli_env):
    done = commit_file(tools, installed, cli_env, "src/main.py", "print()\n")
    assert done.returncode == 0
    assert "teleclaude" not in done.stderr + done.stdout


# --- post-commit ------------------------------------------------------------------------------------


def test_post_commit_in_a_worktree_prints_the_next_step(installed, tools, cli_env, add_tree):
    tree = add_tree(installed, "feat")
    plan = "# Plan\n\n## Group 1: Code\n\n- [x] write it\n- [x] test it\n"
    done = commit_file(tools, tree, cli_env, "todos/feat/implementation-plan.md", plan)
    assert done.returncode == 0, done.stderr
    out = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("teleclaude:")]
    assert out == ["teleclaude: next → next-review feat (codex, slow)"]


def test_post_commit_changes_nothing(installed, tools, cli_env):
    repo = installed
    roadmap = (repo / "todos/roadmap.md").read_bytes()
    done = commit_file(tools, repo, cli_env, "todos/other/requirements.md", "# Other\n")
    assert done.returncode == 0
    assert "teleclaude: next → next-plan other (claude, slow)" in done.stdout + done.stderr
    assert (repo / "todos/roadmap.md").read_bytes() == roadmap  # nothing claimed
    assert not (repo / "trees").exists()  # no worktree created
    assert tools.git(repo, "status", "--porcelain").stdout == ""


def test_post_commit_is_silent_without_teleclaude(tmp_path, tools, cli_env):
    root = tmp_path / "plain"
    root.mkdir()
    tools.git(root, "init", "-q", "-b", "main")
    tools.write(root, "a.txt", "a\n")
    tools.commit(root, "first")
    githooks.install(root)
    done = commit_file(tools, root, cli_env, "b.txt", "b\n")
    assert done.returncode == 0
    assert "teleclaude" not in done.stdout + done.stderr


def test_post_commit_never_fails_the_commit(installed, tools, cli_env):
    repo = installed
    tools.write(repo, "teleclaude.toml", "this is = not [ toml")
    done = commit_file(tools, repo, cli_env, "todos/feat/requirements.md", "# Changed\n")
    assert done.returncode == 0
    assert "Traceback" not in done.stderr
    assert "ERROR: INVALID_CONFIG" in done.stdout + done.stderr


def test_the_scripts_are_posix_sh(tmp_path):
    for name in githooks.HOOKS:
        text = githooks.script(name, "/usr/bin/python3")
        assert text.startswith("#!/bin/sh\n")
        assert "@PYTHON@" not in text
        (tmp_path / name).write_text(text)
        assert subprocess.run(["sh", "-n", str(tmp_path / name)], check=False).returncode == 0
