"""Folders with `#` reach tmux, which expands `#(...)` and `#{...}` in `new-session -c`: a worker gets its
folder in a way tmux never expands, so it starts exactly there, and `#(command)` runs nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

NAMES = ["C#Projects", "#(touch pwned)", "#{session_name}", "a##b", "#[fg=red]x", "trail#"]


def _start(tmux, folder: Path, name: str = "tc-x"):
    return tmux.start(name, str(folder), ["sleep", "30"], {"HOME": os.environ["HOME"]}, "chan", 100, (80, 24))


def _pane_cwd(tmux, pane_id: str) -> str:
    return tmux.cmd("display-message", "-p", "-t", pane_id, "#{pane_current_path}")[0]


@pytest.mark.parametrize("name", NAMES)
def test_the_worker_starts_in_its_folder_whatever_its_name(tmux, tmp_path, name):
    folder = tmp_path / name / "app"
    folder.mkdir(parents=True)
    started = _start(tmux, folder)
    deadline = time.monotonic() + 5
    while os.readlink(f"/proc/{started.pane_pid}/cwd") != str(folder) and time.monotonic() < deadline:
        time.sleep(0.05)  # the worker's shell enters the folder itself
    assert os.readlink(f"/proc/{started.pane_pid}/cwd") == str(folder)
    assert _pane_cwd(tmux, started.pane_id) == str(folder)


def test_a_command_in_a_folder_name_runs_nothing(tmux, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # tmux runs #() jobs in its client's folder
    folder = tmp_path / "#(touch pwned)"
    folder.mkdir()
    _start(tmux, folder)

    time.sleep(1)  # tmux runs #() jobs in the background
    for place in (tmp_path, Path(os.environ["HOME"]), folder):
        assert not (place / "pwned").exists()


def test_a_folder_that_is_gone_ends_the_worker_instead_of_starting_elsewhere(tmux, tmp_path):
    started = _start(tmux, tmp_path / "missing")
    deadline = time.monotonic() + 5
    while not tmux.views()[started.pane_id].dead and time.monotonic() < deadline:
        time.sleep(0.05)
    view = tmux.views()[started.pane_id]
    assert view.dead and view.dead_status not in (None, 0)
