"""Issue 13.6: a user's edit saved while the planner rewrites a marker is never lost. The rewrite re-reads
the file right before its atomic replace and starts again when it changed; it never replaces bytes it did
not read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from teleclaude.adapters import fs
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Complete

from .conftest import git

# Saves a line every 30-150 ms, and says when the first is saved. It saves at most five between two of the
# planner's replaces of the file: a rewrite starts again on every save that lands while it works, and on a
# busy machine (one attempt longer than the editor's pause) an editor that never paused would make it give
# up (KeptChanging) however correct it is
EDITOR = textwrap.dedent(
    """
    import os, random, sys, time
    path, stop = sys.argv[1], sys.argv[2]
    count, replaced, unseen = 0, os.stat(path).st_ino, 0
    while not os.path.exists(stop):
        if os.stat(path).st_ino != replaced:
            replaced, unseen = os.stat(path).st_ino, 0
        if unseen >= 5:
            time.sleep(0.01)
            continue
        handle = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(handle, f"- [ ] added-{count} — saved while the planner claims\\n".encode())
        os.close(handle)
        count, unseen = count + 1, unseen + 1
        if count == 1:
            print("saving", flush=True)
        time.sleep(random.uniform(0.03, 0.15))
    print(count)
    """
)


@pytest.fixture
def repo(tmp_path) -> Path:
    """A roadmap long enough that parsing it takes a while, with 12 items already archived in done/."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "todos").mkdir()
    lines = [f"- [ ] item-{n} — something to build, number {n}\n" for n in range(600)]
    (root / "todos/roadmap.md").write_text("# Roadmap\n" + "".join(lines))
    for n in range(12):
        (root / f"done/{n + 1:03d}-item-{n * 50}").mkdir(parents=True)
        (root / f"done/{n + 1:03d}-item-{n * 50}/summary.md").write_text("done\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "roadmap")
    return root


def test_lines_an_editor_appends_during_claims_all_survive(repo, tmp_path):
    roadmap, stop = repo / "todos/roadmap.md", tmp_path / "stop"
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(roadmap), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert editor.stdout is not None and editor.stdout.readline() == "saving\n"  # however long it took
        for n in range(12):
            action = app.next_work(f"item-{n * 50}", cwd=repo)
            assert isinstance(action, Complete), action
    finally:
        stop.touch()
        appended = int(editor.communicate(timeout=60)[0])
    text = roadmap.read_text()
    assert appended > 0
    missing = [n for n in range(appended) if f"- [ ] added-{n} —" not in text]
    assert missing == [], f"{len(missing)} of {appended} saved lines were lost"
    assert all(f"- [x] item-{n * 50} —" in text for n in range(12))


def test_an_edit_saved_between_read_and_replace_is_kept(tmp_path):
    path = tmp_path / "roadmap.md"
    path.write_bytes(b"- [ ] a\n")
    calls = []

    def change(data: bytes) -> bytes:
        calls.append(data)
        if len(calls) == 1:  # the user saves while we are still working on what we read
            with open(path, "ab") as editor:
                editor.write(b"- [ ] b\n")
        return data.replace(b"[ ] a", b"[>] a")

    assert fs.rewrite(path, change)
    assert path.read_bytes() == b"- [>] a\n- [ ] b\n"
    assert calls == [b"- [ ] a\n", b"- [ ] a\n- [ ] b\n"]


def test_a_file_saved_by_rename_meanwhile_is_read_again(tmp_path):
    path = tmp_path / "roadmap.md"
    path.write_bytes(b"- [ ] a\n")
    saved: list[bool] = []

    def change(data: bytes) -> bytes:
        if not saved:  # an editor that writes a new file and renames it over the old one
            (tmp_path / "new").write_bytes(b"# mine\n- [ ] a\n")
            (tmp_path / "new").rename(path)
            saved.append(True)
        return data.replace(b"[ ] a", b"[>] a")

    assert fs.rewrite(path, change)
    assert path.read_bytes() == b"# mine\n- [>] a\n"


def test_a_file_that_never_stops_changing_is_left_as_the_editor_wrote_it(tmp_path):
    path = tmp_path / "roadmap.md"
    path.write_bytes(b"- [ ] a\n")

    def change(data: bytes) -> bytes:
        with open(path, "ab") as editor:
            editor.write(b"more\n")
        return b"ours\n"

    with pytest.raises(fs.KeptChanging):
        fs.rewrite(path, change, attempts=3, patience=0)
    assert path.read_bytes() == b"- [ ] a\n" + b"more\n" * 3


def test_nothing_to_change_writes_nothing(tmp_path):
    path = tmp_path / "roadmap.md"
    path.write_bytes(b"- [x] a\n")
    inode = path.stat().st_ino
    assert not fs.rewrite(path, lambda data: None)
    assert path.stat().st_ino == inode
