"""Issue 34 end to end: `teleclaude run` with a `[checks]` gate, real tmux, the stand-in CLIs, a real
repository whose test (check.py) is the gate. Main stays green: every first-parent commit of it passes."""

from __future__ import annotations

from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters import trust_store
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.board.core.timeline import render_html
from teleclaude.board.gather import run_timeline
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error
from teleclaude.planner import gate
from teleclaude.planner.checks import status_board
from teleclaude.planner.core.gate import Verdict
from teleclaude.planner.core.phase import render_board
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.orchestrator import Outcome

from ..scripted import CHECK_PY, assert_main_green

GATE = '"python3 check.py"'


def gated(project: Path, gate_line: str = GATE, extra: str = "", runtime: str = "") -> None:
    """[checks] in the project's settings (trusted, committed) with check.py, its test runner."""
    (project / "check.py").write_text(CHECK_PY)
    settings = project / "teleclaude.toml"
    text = settings.read_text()
    if runtime:
        text = text.replace("[runtime]\n", f"[runtime]\n{runtime}")
    settings.write_text(f"{extra}{text}[checks]\ngate = [{gate_line}]\ntimeout = 120\n")
    trust_store.record(settings, settings.read_bytes())
    commit_all(project, "The project's gate")


def run(project: Path, slug: str | None = None, parallel: int = 1):
    lines: list[str] = []
    report = orchestrator.run(
        project, slug, False, 60, open_runtime(project), lines.append, lambda p: None, parallel=parallel
    )
    return report, lines


def verdicts(project: Path, slug: str) -> list[tuple[str, Verdict]]:
    entries = gate.records(gitx.find_repo(project).common_dir).get(slug, ())
    return [(entry.kind, entry.verdict) for entry in entries]


def test_a_broken_test_never_reaches_main_it_goes_back_through_fix_and_review(
    project, fake_agents, tmux_socket, monkeypatch
):
    """The builder breaks a test and, sent back once by the gate on its turn, does not fix it; the reviewer
    approves anyway; the finalize's gate is red: fix, review, then it lands green."""
    gated(project, runtime="max_nudges = 1\n")
    monkeypatch.setenv("FAKE_AGENT_BREAK", "greeting")
    report, lines = run(project, "greeting")
    log = "\n".join(lines)
    assert report.outcome is Outcome.COMPLETE, log + "\n" + report.text
    assert assert_main_green(project) >= 2
    steps = [(h.session.command, h.session.slug) for h in report.history]
    assert steps.count(("next-review", "greeting")) == 2
    assert ("next-fix-review", "greeting") in steps
    assert "python3 check.py" in log  # the log line names the failing command
    assert (project / "check-fixed.txt").exists()  # the builder was sent back with the gate's output
    kinds = verdicts(project, "greeting")
    assert ("turn", Verdict.RED) in kinds and ("finalize", Verdict.RED) in kinds
    assert kinds[-1] == ("finalize", Verdict.GREEN)
    assert not list((project / "tests").glob("test_broken_*.py"))
    # shown: the status board, and the run's report page
    board = status_board(project)
    assert not isinstance(board, Error)
    shown = render_board(board)
    assert "merges into main are gated by: python3 check.py" in shown
    assert "red" in shown and "(finalize)" in shown
    data = run_timeline(project)
    assert not isinstance(data, Error)
    page = render_html(data)
    assert 'class="gate red"' in page and 'class="gate green"' in page


def test_a_flaky_gate_merges_and_is_recorded_flaky(project, fake_agents, tmux_socket, tmp_path):
    flag = tmp_path / "flip"  # every other run fails: each gate's retry passes
    gated(project, f"\"sh -c 'if [ -e {flag} ]; then rm {flag}; else touch {flag}; exit 1; fi'\"")
    report, lines = run(project, "greeting")
    assert report.outcome is Outcome.COMPLETE, "\n".join(lines) + "\n" + report.text
    assert ("finalize", Verdict.FLAKY) in verdicts(project, "greeting")
    assert any("flaky" in line for line in lines)


def test_two_parallel_items_green_alone_and_red_together_one_lands_the_other_goes_back(
    project, fake_agents, tmux_socket
):
    (project / "tests").mkdir()
    (project / "tests" / "test_together.py").write_text(
        "import pathlib\n\n\ndef test_one_module_at_most():\n"
        "    assert len(list(pathlib.Path('src').glob('*.py'))) < 2, 'two modules'\n"
    )
    gated(project, extra="max_review_rounds = 1\n")
    report, lines = run(project, parallel=2)
    log = "\n".join(lines)
    assert report.outcome is not Outcome.COMPLETE, log
    assert len(list((project / "src").glob("*.py"))) == 1  # one landed
    assert assert_main_green(project) >= 2
    back = [slug for slug in ("greeting", "shouting") if ("finalize", Verdict.RED) in verdicts(project, slug)]
    assert back, log  # the other was gated on the main the first produced, and sent back
    assert "REVIEW_ROUND_LIMIT" in report.text and "NEEDS_ATTENTION" in report.text, report.text


def test_a_failing_setup_never_starts_its_worker(project, fake_agents, tmux_socket):
    gated(project)
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "setup = [\"sh -c 'echo no toolchain here; exit 4'\"]\n")
    trust_store.record(settings, settings.read_bytes())
    commit_all(project, "A setup that fails")
    report, lines = run(project, "greeting")
    assert report.outcome is Outcome.ERROR, "\n".join(lines)
    assert "no toolchain here" in report.text
    assert "teleclaude check --setup greeting" in report.text
    assert [s for s in SessionStore().sessions() if s.slug == "greeting"] == []
    assert verdicts(project, "greeting") == [("setup", Verdict.RED)]
