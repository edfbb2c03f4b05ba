"""`teleclaude status`: a fixture repository with an item in every phase."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.agents import NAMES
from teleclaude.planner import api as app
from teleclaude.planner import checks
from teleclaude.planner.core.model import UsageWindow
from teleclaude.planner.core.phase import Board, render_board

from ..signals import ctrl_c_as_at_a_terminal
from ..sqlite_lock import exclusive_lock
from .conftest import add_tree, build_repo, commit, write

ROADMAP = """# Roadmap

## Work
- [x] shipped — delivered
- [ ] idle — nothing written yet
- [ ] half — a plan but no requirements
- [ ] needs-plan — requirements only
- [ ] ready — prepared, not started
- [ ] later (after: ready) — waits for ready
- [>] building — 7 of 12 tasks
- [>] dirty — a worker left changes
- [>] reviewing — built, not reviewed
- [>] fixing — changes requested a second time
- [>] approved — ready to merge
"""

EXPECTED = {
    "shipped": ("x", "done", ""),
    "idle": (" ", "needs requirements", ""),  # README's word: nothing written for it yet
    "half": (" ", "needs requirements", ""),
    "needs-plan": (" ", "needs plan", ""),
    "ready": (" ", "prepared", ""),
    "later": (" ", "blocked by ready", ""),
    "building": (">", "building 7/12", "clean"),
    "dirty": (">", "needs commit", "1 changed"),
    "reviewing": (">", "reviewing", "clean"),
    "fixing": (">", "fixing round 2", "clean"),
    "approved": (">", "finalizing", "clean"),
}


def plan(done: int, total: int) -> str:
    tasks = "".join(f"- [{'x' if i < done else ' '}] task {i + 1}\n" for i in range(total))
    return f"# Plan\n\n## Group 1: Build\n\n{tasks}\n## Group 5: Afterwards\n\n- [ ] announce\n"


TREES = ("building", "dirty", "reviewing", "fixing", "approved")


@pytest.fixture
def board_repo(tmp_path, cli_env, copy_repository) -> Path:
    """`repo` with an item in every phase, five of them in worktrees, and codex marked unavailable; built
    once per worker and copied (its ~40 git commands were most of each test's time)."""
    root = copy_repository(build_board, tmp_path / "project")
    for slug in TREES:  # the worktrees moved: their links both ways, as `git worktree repair` writes them
        (root / "trees" / slug / ".git").write_text(f"gitdir: {root}/.git/worktrees/{slug}\n")
        (root / ".git" / "worktrees" / slug / "gitdir").write_text(f"{root}/trees/{slug}/.git\n")
    app.mark_agent_unavailable("codex", "2h", "quota_exhausted", cwd=root)
    return root


def build_board(root: Path) -> None:
    """`board_repo` before it is copied."""
    build_repo(root)
    write(root, "todos/roadmap.md", ROADMAP)
    write(root, "todos/half/implementation-plan.md", plan(0, 1))
    write(root, "todos/needs-plan/requirements.md", "# Needs a plan\n")
    for slug, tasks in [("ready", 1), ("building", 12), ("dirty", 1), ("reviewing", 1)]:
        write(root, f"todos/{slug}/requirements.md", f"# {slug}\n")
        write(root, f"todos/{slug}/implementation-plan.md", plan(0, tasks))
    for slug in ("fixing", "approved"):
        write(root, f"todos/{slug}/requirements.md", f"# {slug}\n")
        write(root, f"todos/{slug}/implementation-plan.md", plan(0, 1))
    commit(root, "roadmap in every phase")

    trees = {slug: add_tree(root, slug) for slug in TREES}
    write(trees["building"], "todos/building/implementation-plan.md", plan(7, 12))
    for slug in ("dirty", "reviewing", "fixing", "approved"):
        write(trees[slug], f"todos/{slug}/implementation-plan.md", plan(1, 1))
    for slug, tree in trees.items():
        commit(tree, f"build {slug}")
    write(trees["dirty"], "src/left-behind.py", "x\n")

    findings = "todos/fixing/review-findings.md"
    write(trees["fixing"], findings, "- [ ] APPROVE\n- [x] REQUEST CHANGES\n")
    commit(trees["fixing"], "review round 1")
    (trees["fixing"] / findings).unlink()
    commit(trees["fixing"], "fixed round 1")
    write(trees["fixing"], findings, "- [ ] APPROVE\n- [x] REQUEST CHANGES\n")
    commit(trees["fixing"], "review round 2")

    write(trees["approved"], "todos/approved/review-findings.md", "- [x] APPROVE\n- [ ] REQUEST CHANGES\n")
    commit(trees["approved"], "approved")


def rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1] == "["]


def snapshot(root: Path, tools) -> tuple[dict[str, str], dict[str, str]]:
    files = {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "teleclaude-cache" not in path.parts  # the parse cache: derived, disposable
    }
    quiet = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    status = {
        # without the index refresh `git status` writes when it can (a copied repository's stat data is new)
        str(where): tools.git(where, "status", "--porcelain", "--untracked-files=all", env=quiet).stdout
        for where in [root, *sorted((root / "trees").iterdir())]
    }
    return files, status


def board_of(root: Path) -> Board:
    """The status board of `root`; the test fails on an error instead."""
    board = checks.status_board(root)
    assert isinstance(board, Board), board
    return board


def test_every_phase_in_roadmap_order(board_repo):
    board = board_of(board_repo)
    derived = {r.item.slug: (r.item.marker.value, r.phase.label, r.worktree) for r in board.rows}
    assert derived == EXPECTED
    assert [r.item.slug for r in board.rows] == list(EXPECTED)


def test_the_text_board_fits_80_columns_and_ends_with_agents_and_the_sandbox(board_repo, cli):
    done = cli("status", "--cwd", str(board_repo))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "\x1b[" not in done.stdout  # not a TTY: no colour
    for line, (slug, (marker, phase, tree)) in zip(rows(done.stdout), EXPECTED.items(), strict=True):
        assert line.startswith(f"[{marker}] {slug} ")
        assert phase in line and tree in line
    assert lines[-1].startswith("sandbox: ")  # whether workers start sandboxed here (adapters/sandbox.py)
    tail = lines[-len(NAMES) - 1 : -1]
    assert [line.split()[0] for line in tail] == list(NAMES)
    assert "unavailable" in tail[2] and "m left" in tail[2] and "quota_exhausted" in tail[2]


def test_status_reads_only(board_repo, cli, tools):
    before = snapshot(board_repo, tools)
    assert cli("status", "--cwd", str(board_repo)).returncode == 0
    assert cli("status", "--json", "--cwd", str(board_repo / "trees" / "fixing")).returncode == 0
    assert snapshot(board_repo, tools) == before


def test_json(board_repo, cli):
    done = cli("status", "--json", "--cwd", str(board_repo))
    data = json.loads(done.stdout)
    assert [(i["slug"], i["marker"], i["phase"], i["worktree"] or "") for i in data["items"]] == [
        (slug, *values) for slug, values in EXPECTED.items()
    ]
    codex = next(a for a in data["agents"] if a["agent"] == "codex")
    assert (codex["available"], codex["reason"]) == (False, "quota_exhausted")
    assert 110 <= codex["minutes_left"] <= 120


# the reader's zone: POSIX TZ spelling (no tz database needed); "-" means east of Greenwich
READER_TZ, READER_ZONE = "XYZ-5:30", timezone(timedelta(hours=5, minutes=30))


def record_usage(agent: str, window: str, percent: float, resets_in: timedelta | None) -> datetime | None:
    now = datetime.now(UTC)
    resets = None if resets_in is None else (now + resets_in).replace(second=0, microsecond=0)
    AvailabilityStore().record_usage([UsageWindow(agent, window, percent, resets, now)])
    return resets


def test_each_agents_usage_follows_it_with_reset_times_in_the_readers_zone(board_repo, cli):
    five_hours = record_usage("claude", "5h", 83.4, timedelta(hours=3))
    seven_days = record_usage("claude", "7d", 41, timedelta(days=3))
    record_usage("codex", "primary", 97, None)
    record_usage("gemini", "5h", 99, timedelta(minutes=-1))  # reset already: says nothing any more
    assert five_hours and seven_days
    done = cli("status", "--cwd", str(board_repo), env={"TZ": READER_TZ})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    agents = lines[lines.index("") + 1 :]
    claude = next(line for line in agents if line.startswith("claude"))
    assert f"5h 83% ↺ {five_hours.astimezone(READER_ZONE):%H:%M}" in claude
    assert f"7d 41% ↺ {seven_days.astimezone(READER_ZONE):%a %d %H:%M}" in claude
    assert "primary 97%" in done.stdout  # codex is out too: its usage still shows (on a line of its own)
    assert next(line for line in agents if line.startswith("gemini")).split() == ["gemini", "available"]

    data = json.loads(cli("status", "--json", "--cwd", str(board_repo)).stdout)
    usage = {a["agent"]: a["usage"] for a in data["agents"]}
    assert [(w["window"], w["used_percent"]) for w in usage["claude"]] == [("5h", 83.4), ("7d", 41)]
    assert usage["codex"][0]["resets_at"] is None and usage["gemini"] == []


def test_long_slugs_are_clipped_to_80_columns(repo, tools, cli):
    long = "a-" * 31 + "z"
    tools.write(repo, "todos/roadmap.md", f"- [ ] {long} (after: {long[:-1]}b) — x\n- [ ] {long[:-1]}b\n")
    lines = cli("status", "--cwd", str(repo)).stdout.splitlines()
    assert len(rows("\n".join(lines))) == 2
    assert max(map(len, lines)) <= 80


def test_colour_only_on_a_tty_and_never_with_no_color(board_repo, cli_env):
    def on_tty(extra: dict[str, str]) -> str:
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [sys.executable, "-m", "teleclaude", "status", "--cwd", str(board_repo)],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env={**cli_env, "TERM": "xterm", **extra},
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=30)
        os.close(leader)
        return b"".join(chunks).decode()

    assert "\x1b[" in on_tty({})
    assert "\x1b[" not in on_tty({"NO_COLOR": "1"})


def test_colour_is_applied_to_phases_only():
    from teleclaude.planner.core.model import Marker, RoadmapItem
    from teleclaude.planner.core.phase import Phase, Row, Stage

    board = Board("/p", (Row(RoadmapItem("a", Marker.DONE, 1), Phase(Stage.DONE), ""),), None)
    coloured, plain = render_board(board, color=True), render_board(board, color=False)
    assert "\x1b[32m" in coloured
    assert coloured.replace("\x1b[32m", "").replace("\x1b[0m", "") == plain


def test_watch_redraws_until_interrupted():
    frames: list[str] = []
    pauses: list[float] = []
    count = iter(range(100))
    assert checks.watch(lambda: f"frame {next(count)}", 1.5, frames.append, True, 3, pauses.append) == 0
    assert frames == [f"{checks.CLEAR_SCREEN}frame {i}" for i in range(3)]
    assert pauses == [1.5, 1.5]

    def interrupt(_):
        raise KeyboardInterrupt

    assert checks.watch(lambda: "x", 1, frames.append, False, sleep=interrupt) == 0


def test_watch_as_a_process_stops_on_ctrl_c(board_repo, cli_env, tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "teleclaude", "status", "--watch", "0.2", "--cwd", str(board_repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env,
        text=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(seen) < 2:  # two frames drawn: the loop is running
            line = process.stdout.readline()
            if line.startswith("[>] building"):
                seen.append(line)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()  # a failed test leaves no watcher behind (no-op once it ended)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert len(seen) == 2


@pytest.mark.parametrize("where", ["no-roadmap", "not-a-repo"])
def test_errors(where, cli, tmp_path, tools):
    folder = tmp_path / where
    folder.mkdir()
    if where == "no-roadmap":
        tools.git(folder, "init", "-q")
    done = cli("status", "--cwd", str(folder), process=True)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == (
        "ERROR: NO_WORK" if where == "no-roadmap" else "ERROR: NOT_A_GIT_REPO"
    )


def test_an_item_whose_line_only_lint_calls_wrong_is_stuck_on_the_board(board_repo, cli, tools):
    """`(afer: x)` is read as the description: the planner would start `ready` at once, which is not what
    its author meant. Status shows lint's code on the row and counts the line."""
    roadmap = (board_repo / "todos/roadmap.md").read_text()
    tools.write(
        board_repo, "todos/roadmap.md", roadmap.replace("- [ ] ready —", "- [ ] ready (afer: later) —")
    )
    data = json.loads(cli("status", "--json", "--cwd", str(board_repo)).stdout)
    ready = next(item for item in data["items"] if item["slug"] == "ready")
    assert (ready["stage"], ready["detail"]) == ("stuck", "DEPENDENCY_NOT_READ")
    assert data["problems"] == 1
    text = cli("status", "--cwd", str(board_repo)).stdout
    assert "DEPENDENCY_NOT_READ" in next(line for line in rows(text) if line.startswith("[ ] ready "))
    assert "teleclaude lint" in text


def test_a_dirty_main_checkout_is_said_at_once_and_holds_back_the_next_item(board_repo, cli, tools):
    """Uncommitted work of the user's in the main checkout: every finalize would refuse it. Status says so
    before a build is paid for, and the prepared item shows that next-work will not start it."""
    tools.write(board_repo, "src/app.py", "print('mine')\n")
    data = json.loads(cli("status", "--json", "--cwd", str(board_repo)).stdout)
    assert data["main_changes"] == ["src/"]
    ready = next(item for item in data["items"] if item["slug"] == "ready")
    assert (ready["stage"], ready["detail"]) == ("stuck", "MAIN_NOT_CLEAN")
    building = next(item for item in data["items"] if item["slug"] == "building")
    assert building["phase"] == "building 7/12"  # work under way goes on
    text = cli("status", "--cwd", str(board_repo)).stdout
    assert "src/" in text.split("\n\n")[0]  # on the board, above the agents
    assert json.loads(cli("status", "--json", "--cwd", str(board_repo / "trees" / "building")).stdout)[
        "main_changes"
    ] == ["src/"]


def test_one_git_status_per_worktree(board_repo, monkeypatch):
    from teleclaude.adapters import git as gitx

    calls = []
    real = gitx.run_git

    def counting(args, cwd):
        calls.append((args[0], Path(cwd).name))
        return real(args, cwd)

    monkeypatch.setattr(gitx, "run_git", counting)
    checks.status_board(board_repo)
    statuses = [where for command, where in calls if command == "status"]
    # the main checkout twice: its todos/ for every item, and all of it once, for the approved item's finalize
    expected = ["project", "project", "building", "dirty", "reviewing", "fixing", "approved"]
    assert sorted(statuses) == sorted(expected)


def add_worker(root: Path, slug: str, session_id: str, uses: list[tuple[str, str]]) -> None:
    """A worker session for `slug` in the real sessions database, with its tool uses (oldest first)."""
    from datetime import UTC, datetime, timedelta

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.planner.core.tool_lines import ToolUse
    from teleclaude.runtime.core.sessions import Session, SessionState

    store = SessionStore()
    now = datetime.now(UTC)
    project = str(root.resolve())
    store.add(
        Session(session_id, "claude", "next-build", slug, project, None, SessionState.RUNNING, now, now)
    )
    for minutes, (tool, target) in zip(range(len(uses), 0, -1), uses, strict=True):
        store.add_tool_use(ToolUse(session_id, tool, target, now - timedelta(minutes=minutes)))


def test_an_item_in_progress_shows_its_workers_last_five_tool_uses(board_repo, cli, cli_env):
    uses = [("Read", f"src/f{n}.py") for n in range(4)] + [("Bash", "echo \x1b[2Jhi"), ("Glob", "")]
    add_worker(board_repo, "building", "w-building", uses)
    add_worker(board_repo, "ready", "w-ready", [("Read", "src/never-shown.py")])  # `[ ]`: not in progress
    hooked = {**cli_env, "TELECLAUDE_SESSION_ID": "w-building"}  # and one through the hook, as a CLI does
    payload = json.dumps({"cwd": str(board_repo), "tool_name": "Edit", "tool_input": {"file_path": "b.py"}})
    assert cli("hook", "tool-use", "--agent", "claude", stdin=payload, env=hooked).returncode == 0

    done = cli("status", "--cwd", str(board_repo))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("[>] building "))
    shown = lines[at + 1 : at + 6]
    assert [line.rsplit(" (", 1)[0] for line in shown] == [
        "    Read: src/f2.py",
        "    Read: src/f3.py",
        "    Bash: echo \\x1b[2Jhi",  # escaped, as `sessions list` shows it
        "    Glob",
        "    Edit: b.py",
    ]
    assert all(line.endswith(" ago)") for line in shown)
    assert lines[at + 6].startswith("[>] dirty ")
    assert "never-shown" not in done.stdout and "\x1b" not in done.stdout

    items = {
        i["slug"]: i for i in json.loads(cli("status", "--json", "--cwd", str(board_repo)).stdout)["items"]
    }
    assert [line.rsplit(" (", 1)[0] for line in items["building"]["recent_tools"]] == [
        line.strip().rsplit(" (", 1)[0] for line in shown
    ]
    assert items["ready"]["recent_tools"] == items["reviewing"]["recent_tools"] == []


def test_a_broken_or_locked_sessions_database_leaves_the_board_without_tools(
    board_repo, monkeypatch, tmp_path
):
    from teleclaude.adapters import store

    add_worker(board_repo, "building", "w-building", [("Read", "src/x.py")])
    assert board_of(board_repo).rows[6].tools  # `building`: shown while the file is fine

    with exclusive_lock(os.environ["TELECLAUDE_DB"]):
        monkeypatch.setattr(store, "READ_TIMEOUT_MS", 50)
        locked = board_of(board_repo)
    assert [r.item.slug for r in locked.rows] == list(EXPECTED)
    assert not any(r.tools for r in locked.rows)

    folder = tmp_path / "db-is-a-folder"
    folder.mkdir()
    monkeypatch.setenv("TELECLAUDE_DB", str(folder))
    broken = board_of(board_repo)
    assert [r.item.slug for r in broken.rows] == list(EXPECTED)
    assert not any(r.tools for r in broken.rows)
