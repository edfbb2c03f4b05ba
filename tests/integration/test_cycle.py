"""The whole cycle with scripted workers, and many orchestrators calling at once."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from teleclaude.demo import scenario as demo
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core.model import Complete, Dispatch, Step

REPO_ROOT = Path(__file__).resolve().parents[2]


def steps(actions):
    out: list[tuple[str, str | None, str | None]] = []
    for action in actions:
        if isinstance(action, Dispatch):
            out.append((action.step.command, action.slug, action.agent))
        elif isinstance(action, Complete):
            out.append(("COMPLETE", action.slug, action.archive))
        else:
            out.append((action.code.value, None, None))
    return out


def test_full_cycle_from_pending_to_done_with_a_forgotten_commit_and_a_rejection(tmp_path, copy_repository):
    project = copy_repository(demo.make_repository, tmp_path / "project")
    workers = demo.Workers(project, forget_commit="greeting", reject_first="greeting")
    actions = demo.drive(project, workers, say=lambda line: None)
    assert steps(actions)[:8] == [
        ("next-build", "greeting", "gemini"),
        ("commit-pending", "greeting", "claude"),  # the builder forgot to commit
        ("next-review", "greeting", "codex"),  # REQUEST CHANGES
        ("next-fix-review", "greeting", "claude"),
        ("next-review", "greeting", "codex"),  # APPROVE
        ("next-finalize", "greeting", "claude"),
        ("COMPLETE", "greeting", "done/001-greeting/"),
        ("next-build", "farewell", "gemini"),  # the next item: its dependency is done
    ]
    assert steps(actions)[-2:] == [("COMPLETE", "shouting", "done/003-shouting/"), ("NO_WORK", None, None)]
    roadmap = (project / "todos/roadmap.md").read_text()
    assert roadmap.count("- [x]") == 3 and "[ ]" not in roadmap and "[>]" not in roadmap
    assert sorted(p.name for p in (project / "done").iterdir()) == [
        "001-greeting",
        "002-farewell",
        "003-shouting",
    ]
    log = demo.git(project, "log", "--first-parent", "--format=%s")
    assert "Merge greeting" in log and "Merge shouting" in log
    assert (project / "src/greeting.py").exists() and not (project / "trees/greeting").exists()


def test_fallback_when_the_builder_is_rate_limited_mid_run(tmp_path, copy_repository):
    project = copy_repository(demo.make_repository, tmp_path / "project")
    workers = demo.Workers(project)

    def gemini_runs_out(step, action):
        if isinstance(action, Complete):
            demo.app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)

    actions = demo.drive(project, workers, say=lambda line: None, on_step=gemini_runs_out)
    builders = [a.agent for a in actions if isinstance(a, Dispatch) and a.step is Step.BUILD]
    assert builders == ["gemini", "claude", "claude"]


def run_cli(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "teleclaude", "next-work", "--json", "--cwd", str(project)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_eight_processes_at_once_make_one_worktree_and_one_claim(tmp_path, copy_repository):
    project = copy_repository(demo.make_repository, tmp_path / "project")
    before = (project / "todos/roadmap.md").read_bytes()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: run_cli(project, env), range(8)))
    assert [r.returncode for r in results] == [0] * 8, [r.stderr for r in results]
    assert {r.stdout for r in results} == {results[0].stdout}  # everybody got the same valid answer
    assert '"command": "next-build"' in results[0].stdout
    after = (project / "todos/roadmap.md").read_bytes()
    assert after == before.replace(b"- [ ] greeting", b"- [>] greeting", 1)
    worktrees = demo.git(project, "worktree", "list", "--porcelain").count("worktree ")
    assert worktrees == 2  # the main checkout and trees/greeting
    assert demo.git(project, "branch", "--list").split().count("greeting") == 1


def test_error_actions_are_errors(tmp_path):
    actions = demo.drive(tmp_path, demo.Workers(tmp_path), say=lambda line: None)
    assert isinstance(actions[-1], Error) and actions[-1].code is ErrorCode.NOT_A_GIT_REPO
