"""Issue 13.4: project files that are not files. A read takes regular files only, at most 16 MB, and never
blocks: a roadmap linked to /dev/zero or made a FIFO is `ERROR: FILE_ERROR` naming it, at once."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from teleclaude.adapters import fs
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner import checks

from .conftest import committed_repo

ROADMAP = "todos/roadmap.md"


@pytest.fixture
def repo(tmp_path) -> Path:
    root = committed_repo(tmp_path / "project", {"README.md": "# project\n"}, "start")
    (root / "todos").mkdir()
    return root


def teleclaude(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a process that may use 512 MB and 30 s at most, so a regression fails instead of hanging."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, 512 * 2**20))

    return subprocess.run(
        [sys.executable, "-m", "teleclaude", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=limit,
    )


@pytest.mark.parametrize("command", [("next-work",), ("next-prepare",), ("status",), ("lint",)])
def test_a_roadmap_linked_to_dev_zero_is_a_file_error(repo, command):
    (repo / ROADMAP).symlink_to("/dev/zero")
    done = teleclaude(repo, *command)
    assert done.stdout.splitlines()[0] == "ERROR: FILE_ERROR", done.stdout + done.stderr
    assert "roadmap.md" in done.stdout


@pytest.mark.parametrize("command", [("next-work",), ("next-work", "feat"), ("lint", ROADMAP)])
def test_a_fifo_roadmap_is_a_file_error_and_does_not_block(repo, command):
    os.mkfifo(repo / ROADMAP)
    done = teleclaude(repo, *command)
    assert done.stdout.splitlines()[0] == "ERROR: FILE_ERROR", done.stdout + done.stderr
    assert "roadmap.md" in done.stdout
    again = teleclaude(repo, *command)  # the project lock was let go
    assert again.stdout.splitlines()[0] == "ERROR: FILE_ERROR"


def test_a_roadmap_over_the_size_cap_is_a_file_error(repo):
    with open(repo / ROADMAP, "wb") as sparse:
        sparse.truncate(fs.MAX_FILE_BYTES + 1)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.FILE_ERROR
    assert "roadmap.md" in action.message


def test_a_file_that_grows_past_the_cap_while_read_is_refused(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 11)
    with pytest.raises(fs.FileTooLarge):
        fs.read_bytes(path, limit=10)
    assert fs.read_bytes(path, limit=11) == b"x" * 11


def test_a_folder_named_like_the_roadmap_is_a_file_error(repo):
    (repo / ROADMAP).mkdir()
    findings = checks.lint_files(repo)
    assert isinstance(findings, Error) and findings.code is ErrorCode.FILE_ERROR
    assert isinstance(app.next_work(cwd=repo), Error)


def test_a_teleclaude_toml_fifo_does_not_block(repo):
    (repo / "todos/roadmap.md").write_text("- [ ] feat\n")
    os.mkfifo(repo / "teleclaude.toml")
    done = teleclaude(repo, "next-work")
    assert done.stdout.splitlines()[0] == "ERROR: FILE_ERROR", done.stdout + done.stderr


def test_a_fifo_where_a_clis_program_should_be_is_not_read_and_shows_nothing(tmp_path):
    """A sandboxed worker's start looks at its CLI's first line for the interpreter to show it: a FIFO
    there (one a worker made in a folder it may write) is never opened, so no start waits on it, and what
    it holds is not taken for a first line. A writer holds this one open and has written a line naming a
    venv's Python, so a reader would neither wait nor come back empty."""
    from teleclaude.adapters.sandbox_reach import installs

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    program = tmp_path / "cli" / "bin" / "tool"
    program.parent.mkdir(parents=True)
    os.mkfifo(program)
    line = f"#!{venv}/bin/python\n".encode()
    writer = os.open(program, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(writer, line)
        found = installs(str(program), "/usr/bin")
        assert venv not in found and program.parent in found
        assert os.read(writer, 4096) == line  # still in the pipe: nobody read it
    finally:
        os.close(writer)
