"""Issue 34: `[checks]` in teleclaude.toml, `teleclaude check`, and the gate of `teleclaude finalize` on the
tree that would become main, in real git repositories with real commands."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from teleclaude.adapters import fs, trust_store
from teleclaude.adapters import git as gitx
from teleclaude.adapters.checks import run_command
from teleclaude.adapters.settings import load_config
from teleclaude.cli import main as cli_main
from teleclaude.config.checks import Checks
from teleclaude.demo.workers import commit_all, git, make_repository
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner import gate
from teleclaude.planner.core.gate import Verdict
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.planner.finalize import Finalized, finalize
from teleclaude.setup.scaffold import init

from ..scripted import CHECK_PY, approve


def settings(project: Path, text: str, trust: bool = True, commit: bool = True) -> None:
    path = project / "teleclaude.toml"
    path.write_text(text)
    if trust:
        trust_store.record(path, path.read_bytes())
    if commit:
        commit_all(project, "Settings")


def gated_project(root: Path, gate_line: str = '"python3 check.py"') -> Path:
    project = make_repository(root)
    (project / "check.py").write_text(CHECK_PY)
    settings(project, f"[checks]\ngate = [{gate_line}]\ntimeout = 60\n")
    return project


def break_test(project: Path, slug: str) -> None:
    """The item's branch gets a test that fails (after the scripted builder and reviewer approved it)."""
    tree = project / "trees" / slug
    (tree / "tests" / "test_broken.py").write_text("def test_broken():\n    assert 1 == 2\n")
    commit_all(tree, "A test that fails")


# --- [checks] ----------------------------------------------------------------------------------------------


def test_checks_are_read_and_bad_ones_are_named(tmp_path):
    project = make_repository(tmp_path / "p")
    settings(project, '[checks]\ngate = ["ruff check .", "pytest -q"]\nsetup = ["uv sync"]\ntimeout = 30\n')
    assert load_config(project).checks == Checks(("ruff check .", "pytest -q"), ("uv sync",), 30.0)
    for text in ('[checks]\ngate = "pytest \'unclosed"\n', "[checks]\ntimeout = 0\n", "[checks]\nfoo = 1\n"):
        (project / "teleclaude.toml").write_text(text)
        assert cli_main(["status", "--cwd", str(project)]) == 1


def test_an_untrusted_gate_runs_nothing_and_merges_nothing(tmp_path, capsys):
    project = make_repository(tmp_path / "p")
    marker = tmp_path / "ran"
    settings(project, f'[checks]\ngate = ["touch {marker}"]\n', trust=False)
    approve(project, "greeting")
    head = git(project, "rev-parse", "HEAD")
    assert cli_main(["check", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: UNTRUSTED_CONFIG"
    refused = finalize("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.UNTRUSTED_CONFIG
    assert not marker.exists() and git(project, "rev-parse", "HEAD") == head


def test_init_writes_a_commented_example_that_sets_nothing(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    git(project, "init", "-q")
    assert not isinstance(init(project), Error)
    text = (project / "teleclaude.toml").read_text()
    assert "# [checks]" in text and "gate = " in text
    assert load_config(project).checks is None


def test_check_prints_each_command_its_result_and_last_lines(tmp_path, capsys):
    project = make_repository(tmp_path / "p")
    settings(project, '[checks]\ngate = ["true", "sh -c \'echo one; echo two; exit 3\'"]\n')
    assert cli_main(["check", "--cwd", str(project)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "GATE: red"
    assert "true: passed" in out and "exit status 3" in out and "  | two" in out
    settings(project, '[checks]\ngate = ["no-such-command-here"]\n')
    assert cli_main(["check", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: GATE_BROKEN"
    settings(project, '[runtime]\nsocket = "x"\n')
    assert cli_main(["check", "--cwd", str(project)]) == 0  # no [checks]: merges are not gated
    assert "not gated" in capsys.readouterr().out


# --- one command -------------------------------------------------------------------------------------------


def _gone(pid: int, seconds: float = 30.0) -> bool:
    """Whether `pid` ends (or is a zombie) within `seconds`: SIGKILL is sent to the group at once, but a
    process of it dies only once the scheduler runs it, later on a loaded machine."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_a_hanging_command_is_killed_with_its_process_group_at_its_timeout(tmp_path):
    pids = tmp_path / "pids"
    # the shell and a child of it, both sleeping far past the timeout
    command = f"sh -c 'echo $$ > {pids}; sleep 300 & echo $! >> {pids}; echo started; wait'"
    run = run_command(command, tmp_path, timeout=1.0)
    assert run.timed_out and run.status is None and not run.passed
    assert "started" in run.tail
    assert all(_gone(int(pid)) for pid in pids.read_text().split())


def test_megabytes_of_output_are_counted_and_only_the_last_lines_kept(tmp_path):
    code = "import sys\nfor i in range(100000): sys.stdout.write(f'line {i} ' + 'x' * 60 + '\\n')"
    run = run_command(f'{sys.executable} -c "{code}"', tmp_path, timeout=60)
    assert run.passed and run.output_bytes > 6_000_000
    assert len(run.tail) <= 30 and run.tail[-1].startswith("line 99999 ")


def test_a_command_that_does_not_exist_is_broken_not_red(tmp_path):
    run = gate.run_gate(("definitely-not-a-command --x",), tmp_path, 10)
    assert run.verdict is Verdict.BROKEN and "definitely-not-a-command" in run.summary()


# --- finalize ----------------------------------------------------------------------------------------------


def test_a_red_gate_leaves_main_untouched_and_sends_the_item_to_fix_then_review(tmp_path, capsys):
    project = gated_project(tmp_path / "p")
    approve(project, "greeting")
    break_test(project, "greeting")
    head = git(project, "rev-parse", "HEAD")
    red = finalize("greeting", cwd=project)
    assert isinstance(red, Error) and red.code is ErrorCode.GATE_RED, red
    assert git(project, "rev-parse", "HEAD") == head
    assert git(project, "status", "--porcelain") == " M todos/roadmap.md\n"  # only next_work's [>]
    tree = project / "trees" / "greeting"
    assert git(tree, "status", "--porcelain") == ""  # the scratch merge is undone
    findings = (tree / "todos" / "greeting" / "review-findings.md").read_text()
    assert "## Critical" in findings and "- [x] REQUEST CHANGES" in findings and "FAILED" in findings
    fix = app.next_work("greeting", cwd=project)
    assert isinstance(fix, Dispatch) and fix.step is Step.FIX and fix.note and "python3 check.py" in fix.note
    assert cli_main(["next-work", "greeting", "--cwd", str(project)]) == 0
    assert "gate" in capsys.readouterr().out
    # the fixer repairs the test and deletes the findings: a fresh review, then the finalize passes
    (tree / "tests" / "test_broken.py").unlink()
    (tree / "todos" / "greeting" / "review-findings.md").unlink()
    commit_all(tree, "Fix the gate's finding")
    review = app.next_work("greeting", cwd=project)
    assert isinstance(review, Dispatch) and review.step is Step.REVIEW
    approve(project, "greeting")
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged and done.gate.startswith("gate green")
    assert [r.verdict for r in gate.records(gitx.find_repo(project).common_dir)["greeting"]] == [
        Verdict.RED,
        Verdict.GREEN,
    ]


def test_the_gate_runs_on_main_merged_into_the_branch(tmp_path):
    """Green alone, red together: the second item is gated on the main the first produced."""
    project = gated_project(tmp_path / "p")
    (project / "tests").mkdir()
    # a test that fails once both src/greeting.py and src/shouting.py exist
    (project / "tests" / "test_together.py").write_text(
        "import pathlib\n\n\ndef test_not_both():\n"
        "    assert len(list(pathlib.Path('src').glob('*.py'))) < 2\n"
    )
    commit_all(project, "A test about both")
    approve(project, "greeting")
    approve(project, "shouting")
    assert isinstance(finalize("greeting", cwd=project), Finalized)
    red = finalize("shouting", cwd=project)
    assert isinstance(red, Error) and red.code is ErrorCode.GATE_RED
    assert not (project / "src" / "shouting.py").exists()


def test_a_flaky_command_does_not_block_and_is_shown(tmp_path):
    flag = tmp_path / "failed-once"
    project = gated_project(
        tmp_path / "p", f"\"sh -c 'test -e {flag} || {{ touch {flag}; echo flake; exit 1; }}'\""
    )
    approve(project, "greeting")
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done
    assert "flaky" in done.gate and "flaky" in done.text()
    (entry,) = gate.records(gitx.find_repo(project).common_dir)["greeting"]
    assert entry.verdict is Verdict.FLAKY


def test_a_gate_that_changes_tracked_files_is_an_error_and_the_worktree_is_put_back(tmp_path):
    project = gated_project(tmp_path / "p", "\"sh -c 'echo changed >> todos/roadmap.md'\"")
    approve(project, "greeting")
    head = git(project, "rev-parse", "HEAD")
    tree = project / "trees" / "greeting"
    tip = git(tree, "rev-parse", "HEAD")
    broken = finalize("greeting", cwd=project)
    assert isinstance(broken, Error) and broken.code is ErrorCode.GATE_BROKEN, broken
    assert "todos/roadmap.md" in broken.message
    assert git(project, "rev-parse", "HEAD") == head
    assert git(tree, "rev-parse", "HEAD") == tip and git(tree, "status", "--porcelain") == ""


def test_the_lock_is_free_while_the_gate_runs_and_a_moved_main_is_gated_again(tmp_path):
    """A gate that waits for a file: meanwhile another commit lands on main under the lock; the finalize
    then gates the new combination before it merges."""
    go, runs = tmp_path / "go", tmp_path / "runs"
    waits = f"while [ ! -e {go} ]; do sleep 0.05; done"
    project = gated_project(tmp_path / "p", f"\"sh -c 'echo run >> {runs}; {waits}'\"")
    approve(project, "greeting")
    result: list[object] = []
    finalizing = threading.Thread(target=lambda: result.append(finalize("greeting", cwd=project)))
    finalizing.start()
    try:
        repo = gitx.find_repo(project)
        deadline = time.monotonic() + 60
        while not runs.exists() and time.monotonic() < deadline:  # the gate has begun
            time.sleep(0.02)
        with fs.project_lock(repo.common_dir, timeout=30):  # free while the gate waits
            (project / "NOTES.md").write_text("main moved on\n")
            commit_all(project, "Main moves on")
    finally:
        go.touch()  # the gate ends (and the next one, on the new main, at once)
        finalizing.join(60)
    assert isinstance(result[0], Finalized), result
    assert runs.read_text().count("run") == 2
    assert (project / "NOTES.md").exists() and (project / "src" / "greeting.py").exists()


@pytest.mark.parametrize("checks", [None, '["true"]'])
def test_no_checks_merges_as_before(tmp_path, checks, capsys):
    project = make_repository(tmp_path / "p")
    if checks:
        settings(project, f"[checks]\ngate = {checks}\n")
    approve(project, "greeting")
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged
    assert done.gate.startswith("gate green") is bool(checks)
    assert cli_main(["status", "--cwd", str(project)]) == 0
    assert ("merges into main are not gated" in capsys.readouterr().out) is not bool(checks)


def test_untracked_files_a_gate_leaves_are_not_taken_for_uncommitted_work(tmp_path):
    project = gated_project(tmp_path / "p", '"touch made-by-the-gate.txt"')
    approve(project, "shouting")
    tree = project / "trees" / "shouting"
    checked = gate.check("shouting", cwd=project)
    assert isinstance(checked, gate.Checked) and checked.run and checked.run.passed, checked
    assert git(tree, "status", "--porcelain") == ""
    done = finalize("shouting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done
    assert not (project / "made-by-the-gate.txt").exists()
