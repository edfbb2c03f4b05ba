"""Supervision in real tmux with fake agents: reminders, needs-attention, digests and the post-report cycle.

The timers run on a fake clock (real time plus an offset the test moves on), so no test waits 210 s.
"""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.marks import SESSION_KEY
from teleclaude.runtime.core.sessions import Activity, EventKind, Session, SessionState, Started, Waited
from teleclaude.runtime.core.supervision import MARK

from .conftest import FakeClock


def pane_goes(runtime: Runtime, pane_id: str, seconds: float = 30) -> bool:
    """The post-report cycle records FINISHED and then ends the tmux session, in the worker's process."""
    deadline = time.monotonic() + seconds
    while pane_id in runtime.tmux.views():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def clock(runtime) -> FakeClock:
    clock = FakeClock()
    runtime.context.clock = clock
    return clock


def start(runtime, project) -> Started:
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    started = runtime.start(action)
    assert isinstance(started, Started), started
    return started


def until_quiet(runtime, session_id: str, seconds: float = 60.0) -> Session:
    """Looks until the worker's screen has stayed unchanged for the idle threshold (a deadline, not a count
    of looks: a look takes longer on a loaded machine)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        (session,) = runtime.refresh(runtime.store.sessions([session_id]))
        if session.activity is Activity.QUIET:
            return session
        time.sleep(0.1)
    pytest.fail("the worker's screen never went quiet")


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_a_worker_that_stalls_recovers_after_one_reminder(project, runtime, clock, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT", "stall")
    session_id = start(runtime, project).session.id
    until_quiet(runtime, session_id)
    clock.advance(211)
    seen = watch(runtime, session_id).until(EventKind.TURN_ENDED)
    kinds = [event.kind for event in seen]
    assert kinds.count(EventKind.REMINDED) == 1
    assert kinds.index(EventKind.REMINDED) < kinds.index(EventKind.TURN_ENDED)
    assert "soft" in seen[kinds.index(EventKind.REMINDED)].detail
    recovered = runtime.store.get(session_id)
    assert recovered.state is SessionState.TURN_ENDED and recovered.nudges == 0
    history = [event.kind for event in runtime.store.events([session_id])]
    assert history.index(EventKind.REMINDED) < history.index(EventKind.PROGRESSED)  # stalled, then working
    assert EventKind.PROGRESSED not in kinds  # history: no wait returned for it
    tree = project / "trees" / "greeting"
    assert git(tree, "status", "--porcelain") == ""
    assert "Build greeting" in git(tree, "log", "--format=%s", "-1")


def test_a_worker_that_ignores_every_reminder_needs_attention_even_across_a_restart(
    project, runtime, clock, monkeypatch, watch
):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "unresponsive_pause = 0\n")  # left for a human to look at
    commit_all(project, "No pause after an unresponsive worker")  # no new item starts over a dirty main
    runtime = open_runtime(project)
    runtime.context.clock = clock
    monkeypatch.setenv("FAKE_AGENT", "hang")
    session_id = start(runtime, project).session.id
    until_quiet(runtime, session_id)
    before = watch(runtime, session_id)
    for count, advance in ((1, 211), (2, 210)):
        clock.advance(advance)
        before.until(EventKind.REMINDED, count=count)
    # the supervisor restarts: a new runtime over the same database and tmux server picks the timers up
    restarted = open_runtime(project)
    restarted.context.clock = clock
    adopted = restarted.store.get(session_id)
    assert adopted is not None and adopted.nudges == 2
    after = watch(restarted, session_id)
    clock.advance(210)
    after.until(EventKind.REMINDED)
    clock.advance(210)
    after.until(EventKind.NEEDS_ATTENTION)
    seen = before.seen + after.seen
    kinds = [event.kind for event in seen]
    assert kinds.count(EventKind.REMINDED) == 3
    assert kinds.count(EventKind.NEEDS_ATTENTION) == 1
    reminders = [event.detail for event in seen if event.kind is EventKind.REMINDED]
    assert ["hard" in detail for detail in reminders] == [False, True, True]
    final = restarted.store.get(session_id)
    assert final is not None and final.state is SessionState.NEEDS_ATTENTION and final.last_error
    assert final.pane_id in restarted.tmux.views()  # left running for a human to look at
    digests = [event for event in seen if event.kind is EventKind.DIGEST]
    assert digests and "NO PROGRESS" in digests[0].detail and "thinking..." in digests[0].detail
    # the orchestrator was told about the reminders without polling: once each
    waited = restarted.wait_for_sessions([session_id], timeout=0.3)
    assert isinstance(waited, Waited) and waited.events == ()


def test_a_worker_that_ignores_every_reminder_makes_its_agent_unavailable_as_unresponsive(
    project, runtime, clock, monkeypatch, watch
):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    started = start(runtime, project).session
    until_quiet(runtime, started.id)
    watching = watch(runtime, started.id)
    for count in (1, 2, 3):
        clock.advance(211)
        watching.until(EventKind.REMINDED, count=count)
    clock.advance(211)
    (limited,) = [e for e in watching.until(EventKind.RATE_LIMITED) if e.kind is EventKind.RATE_LIMITED]
    assert limited.detail.startswith("unresponsive until ")
    gone = AvailabilityStore().unavailable(clock())[started.agent]
    assert gone.reason == "unresponsive"
    assert clock() + timedelta(minutes=59) < gone.until <= clock() + timedelta(hours=1)  # the default pause
    stored = runtime.store.get(started.id)
    assert stored is not None and stored.state is SessionState.RATE_LIMITED
    action = app.next_work(cwd=project)  # the step falls back to the row's next agent
    assert isinstance(action, Dispatch) and action.agent != started.agent


def test_report_status_with_a_wait_cmd_directs_a_worker_that_forgot_to_commit(
    project, runtime, monkeypatch, watch
):
    monkeypatch.setenv("FAKE_AGENT", "report")
    monkeypatch.setenv("FAKE_AGENT_FORGET", "greeting")
    session_id = start(runtime, project).session.id
    seen = watch(runtime, session_id).until(EventKind.FINISHED)
    kinds = [event.kind for event in seen]
    assert kinds.count(EventKind.DIRECTED) == 1 and kinds.count(EventKind.FINISHED) == 1
    directive = next(event.detail for event in seen if event.kind is EventKind.DIRECTED)
    assert directive.startswith(MARK) and "ommit" in directive
    session = runtime.store.get(session_id)
    assert session.state is SessionState.DONE and session.status_text
    assert pane_goes(runtime, session.pane_id)  # the finished session is ended (just after its event)
    assert git(project / "trees" / "greeting", "status", "--porcelain") == ""
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.REVIEW


def test_a_failing_wait_cmd_sends_the_builder_back_with_what_failed_until_it_passes(
    project, runtime, monkeypatch, watch
):
    monkeypatch.setenv("FAKE_AGENT", "report")
    monkeypatch.setenv("FAKE_AGENT_WAIT_CMD", "test -e check-fixed.txt")  # fails until the worker fixes it
    session_id = start(runtime, project).session.id
    seen = watch(runtime, session_id).until(EventKind.FINISHED)
    directed = [event.detail for event in seen if event.kind is EventKind.DIRECTED]
    assert len(directed) == 1 and directed[0].startswith(MARK), directed
    assert "test exited 1" in directed[0]  # what failed, as the worker was told
    finished = next(event.detail for event in seen if event.kind is EventKind.FINISHED)
    assert "test exited 0" in finished
    assert git(project / "trees" / "greeting", "ls-files", "check-fixed.txt").strip() == "check-fixed.txt"


def test_the_next_dispatch_for_a_slug_says_why_its_last_worker_failed(project, runtime, monkeypatch, watch):
    monkeypatch.setenv("FAKE_AGENT", "crash")
    session_id = start(runtime, project).session.id
    watch(runtime, session_id).until(EventKind.EXITED)
    again = app.next_work(cwd=project)
    assert isinstance(again, Dispatch) and again.step is Step.BUILD
    assert again.note is not None and "exit status 3" in again.note


# --- report_status answers, without tmux ----------------------------------------------------------------


@pytest.fixture
def bare_runtime(tmp_path) -> Runtime:
    now = datetime.now(UTC)
    store = SessionStore()
    for state in (SessionState.RUNNING, SessionState.DONE, SessionState.STALLED, SessionState.TURN_ENDED):
        store.add(
            Session(
                state.value,
                "claude",
                "next-build",
                "greeting",
                str(tmp_path),
                None,
                state,
                now,
                now,
                nudges=2,
            )
        )
    return Runtime(RuntimeConfig(socket="tc-unused"), store, env={})


def test_report_status_is_progress_and_answers_the_reminders(bare_runtime):
    reported = bare_runtime.report_status("stalled", "  tests written,\n running them  ")
    assert reported.session.state is SessionState.RUNNING and reported.session.nudges == 0
    assert reported.session.status_text == "tests written, running them"
    assert not reported.cycle
    stored = bare_runtime.store.get("stalled")
    assert stored.status_at and stored.last_progress_at and stored.cycle_started_at is None


def test_a_report_that_sets_a_stalled_worker_working_is_in_its_history(bare_runtime):
    bare_runtime.report_status("stalled", "tests written")
    bare_runtime.report_status("running", "still at it")  # progress, but no change of state
    assert [e.kind for e in bare_runtime.store.events(["stalled", "running"])] == [EventKind.PROGRESSED]
    assert bare_runtime.store.undelivered(["stalled", "running"]) == []


def test_an_end_session_that_cancels_a_post_report_cycle_says_so_in_the_history(bare_runtime):
    bare_runtime.cycle.spawn = lambda session, argv: None
    started = bare_runtime.report_status("turn_ended", "built it", wait_cmd="true").session.cycle_started_at
    assert bare_runtime.end_session("turn_ended").session.state is SessionState.DONE
    assert bare_runtime.end_session("running").session.state is SessionState.CANCELLED
    cancelled, plain = (bare_runtime.store.events([s]) for s in ("turn_ended", "running"))
    assert [e.kind for e in cancelled] == [e.kind for e in plain] == [EventKind.ENDED]
    assert cancelled[0].detail and not plain[0].detail  # the cancelled cycle is named
    bare_runtime.run_cycle(
        "turn_ended", ["true"], started
    )  # the cycle's process goes on: it concludes nothing
    assert [e.kind for e in bare_runtime.store.events(["turn_ended"])] == [EventKind.ENDED]
    assert bare_runtime.store.get("turn_ended").state is SessionState.DONE


def test_a_workers_delivery_a_typed_line_and_its_end_are_in_its_history_not_in_the_waits(
    project, runtime, monkeypatch, watch
):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    session_id = start(runtime, project).session.id
    sent = runtime.send_message(session_id, "how is it going")
    assert not isinstance(sent, Error), sent
    assert not isinstance(runtime.end_session(session_id), Error)
    history = [event.kind for event in runtime.store.events([session_id])]
    assert history == [EventKind.DELIVERED, EventKind.TYPED, EventKind.ENDED]
    waited = watch(runtime, session_id).wait(timeout=0.5)
    assert [event.kind for event in waited.events] == []


def test_report_status_takes_the_session_from_the_environment(bare_runtime):
    bare_runtime.context.env = {"TELECLAUDE_SESSION_ID": "running"}
    assert bare_runtime.report_status("", "halfway").session.id == "running"


@pytest.mark.parametrize(
    ("session_id", "text", "wait_cmd", "code"),
    [
        ("nope", "hello", None, ErrorCode.UNKNOWN_SESSION),
        ("running", "   ", None, ErrorCode.INVALID_ARGUMENT),
        ("running", "hello", "pytest 'unbalanced", ErrorCode.INVALID_ARGUMENT),
        ("done", "hello", None, ErrorCode.INVALID_ARGUMENT),
    ],
)
def test_report_status_refuses_what_it_cannot_use(bare_runtime, session_id, text, wait_cmd, code):
    answer = bare_runtime.report_status(session_id, text, wait_cmd)
    assert isinstance(answer, Error) and answer.code is code
    assert bare_runtime.store.get("running").status_text == ""


def test_two_observers_that_read_the_same_row_remind_the_worker_once(project, runtime, clock, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    session_id = start(runtime, project).session.id
    until_quiet(runtime, session_id)
    clock.advance(211)
    stale = runtime.store.sessions([session_id])
    other = open_runtime(project)
    other.context.clock = clock
    runtime.refresh(stale)
    other.refresh(stale)  # the MCP server and a CLI looked at the same moment
    kinds = [event.kind for event in runtime.store.undelivered([session_id])]
    assert kinds.count(EventKind.REMINDED) == 1
    assert runtime.store.get(session_id).nudges == 1


def test_a_report_is_not_undone_by_an_observer_that_read_the_row_before_it(bare_runtime):
    stale = bare_runtime.store.get("running")
    bare_runtime.report_status("running", "halfway")
    assert bare_runtime.store.save(replace(stale, screen_hash="seen"), expect=stale.state) is None
    assert bare_runtime.store.get("running").status_text == "halfway"


def test_a_cycle_whose_planner_cannot_answer_ends_nothing_and_says_so(bare_runtime, tmp_path):
    spawned = []
    bare_runtime.cycle.spawn = lambda session, argv: spawned.append(argv)
    reported = bare_runtime.report_status("turn_ended", "done, I think", wait_cmd="true")
    assert reported.cycle and spawned == [["true"]]
    verdict = bare_runtime.run_cycle("turn_ended", ["true"], reported.session.cycle_started_at)
    assert isinstance(verdict, Error) and verdict.code is ErrorCode.NOT_A_GIT_REPO  # tmp_path is no repo
    after = bare_runtime.store.get("turn_ended")
    assert after.state is SessionState.TURN_ENDED and after.cycle_started_at is None
    (event,) = bare_runtime.store.undelivered(["turn_ended"])
    assert event.kind is EventKind.TURN_ENDED and "NOT_A_GIT_REPO" in event.detail


def test_a_cycle_replaced_by_a_newer_report_concludes_nothing(bare_runtime):
    bare_runtime.cycle.spawn = lambda session, argv: None
    first = bare_runtime.report_status("turn_ended", "one", wait_cmd="true").session.cycle_started_at
    time.sleep(0.01)
    second = bare_runtime.report_status("turn_ended", "two", wait_cmd="true").session.cycle_started_at
    assert first != second
    bare_runtime.run_cycle("turn_ended", ["true"], first)
    assert bare_runtime.store.undelivered(["turn_ended"]) == []
    assert bare_runtime.store.get("turn_ended").cycle_started_at == second


def test_a_session_file_from_an_older_teleclaude_is_read_and_upgraded(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    monkeypatch.setenv("TELECLAUDE_DB", str(path))
    with sqlite3.connect(path) as db:  # the table as the first worker runtime made it
        db.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, agent TEXT, command TEXT, args TEXT, project TEXT, "
            "subfolder TEXT, state TEXT, created_at TEXT, updated_at TEXT, computer TEXT, tmux_session TEXT, "
            "pane_id TEXT, pane_pid INTEGER, delivered_at TEXT, exit_code INTEGER, last_error TEXT, "
            "scan_cursor TEXT, screen_hash TEXT, last_change_at TEXT, prompt_polls INTEGER)"
        )
        db.execute(
            "INSERT INTO sessions "
            "(id, agent, command, args, project, state, created_at, updated_at, last_error) "
            "VALUES ('old1', 'claude', 'next-build', 'greeting', ?, 'errored', "
            "'2026-11-20T10:00:00.000+00:00', '2026-11-20T10:00:00.000+00:00', 'exit status 3')",
            [str(tmp_path)],
        )
    store = SessionStore()
    old = store.get("old1")
    assert old is not None
    assert old.state is SessionState.ERRORED and old.nudges == 0 and old.status_text == ""
    assert old.key == ""  # from before sessions had keys: its hooks bring none either
    assert store.latest(str(tmp_path), "greeting") == old
    assert store.save(replace(old, status_text="read again"), expect=SessionState.ERRORED)
    again = store.get("old1")
    assert again is not None and again.status_text == "read again"
    assert store.save(replace(again, key="k"), expect=SessionState.ERRORED)
    keyed = store.get("old1")
    assert keyed is not None and keyed.key == "k"  # the column was added


def test_a_post_report_cycle_goes_on_once_the_stop_hook_ended_the_turn_without_waiting_for_quiet(
    project, runtime, monkeypatch
):
    """The worker reported and its Stop hook ended the turn: the cycle concludes then, not after
    `idle_threshold` of quiet (here longer than the test may take) or `spin_max`."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime.context.config = replace(runtime.config, idle_threshold=600.0, spin_max=600.0)
    started = start(runtime, project)
    session_id = started.session.id
    runtime.cycle.spawn = lambda session, argv: None
    runtime.context.env = {**runtime.context.env, SESSION_KEY: started.session.key}  # as its worker reports
    reported = runtime.report_status(session_id, "built it", wait_cmd="true")
    assert reported.cycle
    assert runtime.record_turn_end(session_id)
    cycle = threading.Thread(
        target=runtime.run_cycle, args=(session_id, ["true"], reported.session.cycle_started_at), daemon=True
    )
    cycle.start()
    cycle.join(timeout=120)
    assert not cycle.is_alive(), "the cycle still waits for a quiet it was told of by the hook"
    assert runtime.store.get(session_id).cycle_started_at is None
