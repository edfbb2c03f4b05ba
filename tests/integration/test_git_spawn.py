"""git run without `subprocess` (adapters/spawn.py) answers as it did through `subprocess`: its output, its
failure as `CalledProcessError` with git's own words, a folder that is not there as an OSError."""

from __future__ import annotations

import subprocess

import pytest

from teleclaude.adapters import git as gitx


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    return tmp_path


def test_git_s_output_is_read_whole(repo):
    name = "a-file-whose-name-is-long-" * 4
    for i in range(800):  # ~100 bytes a line: more than a pipe holds (64 KiB)
        (repo / f"{name}{i:03d}").write_text("x\n")
    assert sorted(gitx.status(repo).changes) == sorted([*(f"{name}{i:03d}" for i in range(800)), "a.txt"])


def test_a_failure_is_a_called_process_error_with_git_s_words(repo):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        gitx.run_git(["rev-parse", "--verify", "no-such-branch"], repo)
    assert failed.value.returncode == 128 and failed.value.cmd[:2] == ["git", "rev-parse"]
    assert b"fatal" in failed.value.stderr


def test_a_folder_that_is_not_there_is_an_os_error(tmp_path):
    with pytest.raises(OSError):
        gitx.run_git(["status"], tmp_path / "gone")


def test_input_is_given(repo):
    blob = gitx.run_git_bytes(["hash-object", "-w", "--stdin"], repo, given=b"hello\n").strip()
    assert gitx.run_git(["cat-file", "-p", blob.decode()], repo) == "hello\n"


def test_index_locked_is_a_called_process_error():
    assert issubclass(gitx.IndexLocked, subprocess.CalledProcessError)
    assert gitx.IndexLocked.__name__ == "IndexLocked"


def test_git_does_not_inherit_python_s_ignored_sigpipe():
    """As `subprocess` restores it: a command spawned here dies of a closed pipe, as from a shell."""
    from teleclaude.adapters.spawn import output

    status = output(["grep", "^SigIgn:", "/proc/self/status"])
    assert status is not None
    ignored = int(status.split()[1], 16)
    assert not ignored & (1 << (13 - 1))  # SIGPIPE
