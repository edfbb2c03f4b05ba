"""`[budget]` in `teleclaude run`: real tmux, stand-in CLIs that report tokens as Claude Code's transcript
does (1000 in, 100 out a turn), their Stop hook reading it; a real repository and session store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.demo.scenario import commit_all
from teleclaude.planner.core.model import Marker
from teleclaude.runtime.core.sessions import EventKind, Started, StartRequest
from teleclaude.runtime.orchestrator import Outcome, Progress

from ..browser import CHROMIUM, open_page
from ..unit.factories import running_session
from .conftest import Watch
from .test_run import archives, assert_no_workers, markers, parked_lines, run

TURN = 1100  # tokens a stand-in turn uses (FAKE_AGENT_TOKENS 1000:100)


def budget(project: Path, table: str) -> None:
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + f"\n[budget]\n{table}\n")
    commit_all(project, "A budget")


def spending(monkeypatch) -> None:
    monkeypatch.setenv("FAKE_AGENT", "hook,tokens")
    monkeypatch.setenv("FAKE_AGENT_TOKENS", "1000:100")


def recorded(slug: str) -> list[int | None]:
    """What each of the item's sessions used, as their stop hooks recorded it."""
    store = SessionStore()
    sessions = [s for s in store.sessions() if s.slug == slug and s.delivered_at]
    last = {sid: tokens for sid, _, tokens in store.spend_readings([s.id for s in sessions])}
    return [last[s.id].total if s.id in last else None for s in sessions]


def test_an_item_whose_fix_rounds_pass_its_budget_is_parked_and_the_others_go_on(
    project, fake_agents, tmux_socket, monkeypatch
):
    """greeting's first review asks for changes: build, review, fix use 3300 tokens of its 3000; its second
    review is never started. shouting (3 steps, 3300 with its finalize, which is never held back) is
    delivered; farewell waits for greeting."""
    spending(monkeypatch)
    monkeypatch.setenv("FAKE_AGENT_REJECT", "greeting")
    budget(project, "item_tokens = 3000")
    report, lines = run(project)
    assert report.outcome is Outcome.PARKED, report.text
    why = parked_lines(report)["greeting"]
    assert why.startswith("PARKED: BUDGET: greeting") and "item_tokens" in why, why
    assert "--budget item_tokens=6000" in report.text
    assert markers(project)["shouting"] is Marker.DONE
    assert [re.sub(r"^\d{3}-", "", name) for name in archives(project)] == ["shouting"]
    assert recorded("greeting") == [TURN, TURN, TURN]  # build, review, one fix round: no second review
    assert_no_workers(tmux_socket)


def test_a_run_budget_stops_the_run_between_steps(project, fake_agents, tmux_socket, monkeypatch):
    """greeting's build and review use 2200 of the run's 2500; its finalize (a merge) is let through; the
    next item's build is not started."""
    spending(monkeypatch)
    budget(project, "run_tokens = 2500")
    report, lines = run(project)
    assert report.outcome is Outcome.NEEDS_ATTENTION, report.text
    assert report.text.startswith("NEEDS_ATTENTION: BUDGET: this run spent"), report.text
    assert "--budget run_tokens=5000" in report.text
    assert markers(project)["greeting"] is Marker.DONE  # delivered: the stop came between steps
    assert recorded("greeting") == [TURN, TURN, TURN]
    assert recorded("farewell") == [] and recorded("shouting") == []
    assert any("budget: 80 % reached: this run spent" in line for line in lines)  # before the finalize
    assert_no_workers(tmux_socket)


def test_a_day_budget_spans_two_runs(project, fake_agents, tmux_socket, monkeypatch):
    spending(monkeypatch)
    budget(project, "day_tokens = 4000")
    first, _ = run(project, "greeting")
    assert first.outcome is Outcome.COMPLETE, first.text
    second, _ = run(project, "farewell")  # 3300 of the day before it began: one step, then 4400
    assert second.outcome is Outcome.NEEDS_ATTENTION, second.text
    assert second.text.startswith("NEEDS_ATTENTION: BUDGET: this day spent"), second.text
    assert recorded("farewell") == [TURN]
    assert_no_workers(tmux_socket)


@pytest.fixture
def unsandboxed(isolated_environment) -> None:
    """The stand-in keeps its transcript beside the database, which a sandboxed one cannot see (the real
    claude's, in its own folder, is read again sandboxed too: tests/realcli/test_contract.py tokens)."""
    config = isolated_environment / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nsandbox = "off"\n')


def late_turn(runtime, project, monkeypatch) -> str:
    """A stand-in claude's turn whose last answer (50 of its 100 output tokens) reaches its transcript only
    after its Stop hook read it, as Claude Code's may."""
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "hook,tokens,late")
    started = runtime.run_agent_command(StartRequest("local", "hello", "x", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    return started.session.id


def answered_late(runtime, session_id: str, seconds: float = 60) -> None:
    """Waits until the stand-in wrote its last answer (after its stop hook kept what it read)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        session = runtime.store.get(session_id)
        record = Path(session.transcript) if session.transcript else None
        if record and record.is_file() and record.read_text().count("-last") == 2:
            return
        time.sleep(0.05)
    pytest.fail("the stand-in never wrote its last answer")


def test_a_turns_last_answer_written_after_its_stop_hook_is_counted_at_a_later_look(
    unsandboxed, project, runtime, fake_agents, monkeypatch
):
    session_id = late_turn(runtime, project, monkeypatch)
    Watch(runtime, session_id).until(EventKind.TURN_ENDED)
    answered_late(runtime, session_id)
    deadline = time.monotonic() + 60
    while runtime.store.spend_readings([session_id])[-1][2].total != TURN and time.monotonic() < deadline:
        runtime.list_sessions()  # a look: the observer reads the transcript again once it changed
    readings = runtime.store.spend_readings([session_id])
    assert [tokens.total for _, _, tokens in readings] == [TURN]  # the turn's one reading, made right


def test_a_last_answer_written_after_the_stop_hook_is_counted_when_the_worker_is_ended(
    unsandboxed, project, runtime, fake_agents, monkeypatch
):
    session_id = late_turn(runtime, project, monkeypatch)
    answered_late(runtime, session_id)  # no look of the observer since: the end reads it
    assert [tokens.total for _, _, tokens in runtime.store.spend_readings([session_id])] == [TURN - 50]
    runtime.end_session(session_id)
    assert [tokens.total for _, _, tokens in runtime.store.spend_readings([session_id])] == [TURN]


@pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed")
def test_the_demos_report_shows_cost_per_item_and_agent_in_a_browser(tmp_path):
    """The demo's stand-ins use 1100 tokens a turn at its [prices]; gemini's build hit a limit before it
    used any it could say: unknown, never 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "demo", "--keep"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^cost: [\d,.k]+ tokens, \$[\d.]+ \(estimate\)", done.stdout, re.M), done.stdout
    assert re.search(r"^most expensive: greeting ", done.stdout, re.M), done.stdout
    base = Path(re.findall(r"^Kept (.+)$", done.stdout, re.M)[-1])
    page = tmp_path / "report.html"
    report = subprocess.run(
        [sys.executable, "-m", "teleclaude", "report", "--html", str(page), "--cwd", str(base / "project")],
        env=env | {"TELECLAUDE_DB": str(base / "teleclaude.db")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0 and report.stdout.startswith("OK:"), report.stdout + report.stderr
    rows = (
        "[...document.querySelectorAll('table.{} tr.spend')].map(r => [r.dataset.{}, r.cells[1].innerText])"
    )
    opened = open_page(
        page.as_uri(), [rows.format("item-costs", "item"), rows.format("agent-costs", "agent")], 2
    )
    items, agents = (dict(pairs) for pairs in opened.values)
    assert list(items) == ["greeting", "farewell", "shouting"]  # the most expensive first: its fix round
    assert all(re.match(r"[\d,.k]+ tokens, \$[\d.]+ \(estimate\)", cost) for cost in items.values()), items
    assert "$" in agents["claude"] and "$" in agents["codex"] and agents["gemini"] == "unknown", agents
    assert all(url.startswith("file://") for url in opened.requested), opened.requested


def test_the_status_line_carries_the_last_budget_warning():
    line = Progress(
        1, running_session(), 3, budget="this run spent $4.10 of its budget run_usd = $5.00 (82%)"
    ).line()
    assert " | budget: this run spent $4.10" in line
