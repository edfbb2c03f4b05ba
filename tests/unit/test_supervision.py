"""Supervision timers and the post-report assessment, on a fake clock: no test sleeps through 210 s."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core.model import Complete, Decision, Dispatch, Step
from teleclaude.planner.core.terminal import untypable
from teleclaude.runtime.core.sessions import Change, Session, SessionState, transition
from teleclaude.runtime.core.supervision import (
    MARK,
    Directive,
    Finished,
    NeedsAttention,
    Reminder,
    WaitOutcome,
    assess,
    cycle_expired,
    digest,
    digest_due,
    is_progress,
    nudge,
    progressed,
    reminded,
    reminder_text,
    unresponsive_after,
)

from .factories import running_session

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CONFIG = RuntimeConfig()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


worker = partial(running_session, T0, subfolder="trees/greeting", last_progress_at=T0)


def run_silently(session: Session, until: float, quiet: bool = True, step: float = 1.0):
    """Tick every `step` seconds with no progress; the reminders and the moment of needs-attention."""
    sent: list[tuple[float, Reminder | NeedsAttention]] = []
    moment = 0.0
    while moment <= until:
        due = nudge(session, at(moment), CONFIG, quiet)
        if isinstance(due, Reminder):
            session, _ = reminded(session, at(moment), due)
            sent.append((moment, due))
        elif isinstance(due, NeedsAttention):
            sent.append((moment, due))
            session, _ = transition(session, Change.NEEDS_ATTENTION, at(moment))
        moment += step
    return session, sent


def test_a_silent_worker_gets_soft_then_hard_reminders_then_needs_attention():
    session, sent = run_silently(worker(), until=1000)
    assert [(moment, type(due).__name__) for moment, due in sent] == [
        (210, "Reminder"),
        (420, "Reminder"),
        (630, "Reminder"),
        (840, "NeedsAttention"),
    ]
    reminders = [due for _, due in sent if isinstance(due, Reminder)]
    assert [r.interrupt for r in reminders] == [False, True, True]
    assert [r.number for r in reminders] == [1, 2, 3]
    assert all(r.text.startswith(MARK) and "teleclaude__report_status" in r.text for r in reminders)
    assert session.state is SessionState.NEEDS_ATTENTION  # not errored


@pytest.mark.parametrize(
    "config",
    [CONFIG, RuntimeConfig(soft_remind=60, hard_remind=90, max_nudges=5), RuntimeConfig(max_nudges=1)],
)
def test_the_orchestrators_stated_time_of_unresponsive_is_when_a_silent_worker_needs_attention(config):
    session, moment = worker(), 0.0
    while True:
        due = nudge(session, at(moment), config, quiet=True)
        if isinstance(due, NeedsAttention):
            break
        if isinstance(due, Reminder):
            session, _ = reminded(session, at(moment), due)
        moment += 1.0
    assert moment == unresponsive_after(config)


def test_a_soft_reminder_waits_for_the_workers_next_idle_moment():
    session = worker()
    assert nudge(session, at(300), CONFIG, quiet=False) is None
    due = nudge(session, at(300), CONFIG, quiet=True)
    assert isinstance(due, Reminder) and not due.interrupt
    # never idle: the hard reminder still comes at 420, interrupting
    due = nudge(session, at(420), CONFIG, quiet=False)
    assert isinstance(due, Reminder) and due.interrupt and due.number == 1


def test_progress_answers_the_reminders_and_starts_the_count_again():
    session, sent = run_silently(worker(), until=500)
    assert session.state is SessionState.STALLED and session.nudges == 2
    recovered, _ = progressed(session, at(500))
    assert recovered.state is SessionState.RUNNING and recovered.nudges == 0
    assert nudge(recovered, at(500 + 209), CONFIG, quiet=True) is None
    assert isinstance(nudge(recovered, at(500 + 210), CONFIG, quiet=True), Reminder)


def test_timers_come_from_stored_timestamps_so_a_restart_neither_loses_nor_postpones_them():
    session, _ = run_silently(worker(), until=425)
    # a new supervisor reads the same row at 630 and at 629: the same answers as an uninterrupted one
    assert nudge(session, at(629), CONFIG, quiet=True) is None
    assert isinstance(nudge(session, at(630), CONFIG, quiet=True), Reminder)
    # a supervisor that was down for an hour catches up one reminder at a time, not all at once
    late = nudge(session, at(3600), CONFIG, quiet=True)
    assert isinstance(late, Reminder) and late.number == 3


@given(st.lists(st.floats(min_value=0.5, max_value=120), min_size=1, max_size=60))
def test_reminders_never_come_closer_than_the_gap_between_soft_and_hard(steps):
    session, moment, last = worker(), 0.0, None
    for step in steps:
        moment += step
        due = nudge(session, at(moment), CONFIG, quiet=True)
        if isinstance(due, Reminder):
            assert last is None or moment - last >= CONFIG.hard_remind - CONFIG.soft_remind
            assert moment >= CONFIG.soft_remind
            assert due.interrupt == (moment >= CONFIG.hard_remind)
            (session, _), last = reminded(session, at(moment), due), moment
        elif isinstance(due, NeedsAttention):
            assert session.nudges == CONFIG.max_nudges and moment - last >= 210
            return


def test_sessions_that_are_not_working_are_not_reminded():
    for state in (
        SessionState.TURN_ENDED,
        SessionState.RATE_LIMITED,
        SessionState.PENDING,
        SessionState.DONE,
    ):
        assert nudge(worker(state=state), at(5000), CONFIG, quiet=True) is None
    assert nudge(worker(cycle_started_at=at(1)), at(300), CONFIG, quiet=True) is None
    # a cycle that outlived its own limits (its process died) no longer holds the reminders back
    assert isinstance(nudge(worker(cycle_started_at=at(1)), at(5000), CONFIG, quiet=True), Reminder)


def test_progress_is_new_output_but_not_the_echo_of_a_reminder():
    assert is_progress(["compiling..."])
    assert not is_progress(["", "   "])
    assert not is_progress(["  ⎿  Interrupted by user"])  # the CLI's answer to an interrupting reminder
    for interrupt in (False, True):
        text = reminder_text(3, 3, 36_000, interrupt)
        assert not is_progress([f"│ > {text} │"])
        assert len(text) <= 150  # its echo fits one row of an 80-column box in a 200-column pane


def test_digests_every_ten_minutes_and_every_five_once_a_digest_finds_no_progress():
    busy = worker(status_text="halfway", status_at=at(550))
    assert not digest_due(busy, at(599), CONFIG)
    assert digest_due(busy, at(600), CONFIG)
    busy, report = digest(busy, at(600), ["line 1", "", "line 2"], CONFIG)
    assert not report.no_progress and not busy.digest_escalated
    assert report.last_lines == ("line 1", "line 2")
    # it reported since the dispatch: the next one comes a full period later (seed 003 §B)
    assert not digest_due(busy, at(1199), CONFIG) and digest_due(busy, at(1200), CONFIG)
    busy, _ = progressed(busy, at(1100))  # output, but no report_status since the last digest
    busy, report = digest(busy, at(1200), [], CONFIG)
    assert report.no_progress and report.status_unchanged and busy.digest_escalated
    # no progress found at a digest: every 300 s from then on, whatever it does (one-way)
    busy = replace(busy, status_at=at(1250))
    assert not digest_due(busy, at(1499), CONFIG) and digest_due(busy, at(1500), CONFIG)
    assert not digest(busy, at(1500), [], CONFIG)[1].no_progress


def test_a_worker_that_never_reported_escalates_at_its_first_digest():
    silent = worker()
    assert not digest_due(silent, at(599), CONFIG)
    assert digest_due(silent, at(600), CONFIG)
    silent, report = digest(silent, at(600), ["thinking..."], CONFIG)
    assert report.no_progress and report.status_age is None and silent.digest_escalated
    assert "never" in report.text() and "thinking..." in report.text()
    assert not digest_due(silent, at(899), CONFIG) and digest_due(silent, at(900), CONFIG)


def test_a_digest_says_what_the_orchestrator_needs():
    session = worker(status_text="tests written", status_at=at(100), nudges=1, last_progress_at=at(100))
    _, report = digest(session, at(600), ["a", "b", "c", "d", "e", "f"], CONFIG)
    assert report.running_for == 600 and report.status_age == 500 and report.nudges == 1
    assert report.last_lines == ("b", "c", "d", "e", "f")
    assert '"tests written"' in report.text()


def dispatch(step: Step, slug: str = "greeting") -> Decision:
    return Decision(slug, Dispatch(step, slug, "/p", "claude", "med", f"trees/{slug}"))


def test_assess_a_builder_that_left_changes_is_told_to_commit():
    verdict = assess("next-build", "greeting", dispatch(Step.COMMIT))
    assert isinstance(verdict, Directive) and "Commit your changes" in verdict.text


def test_assess_a_builder_with_commits_and_open_boxes_is_told_to_tick_them():
    verdict = assess("next-build", "greeting", dispatch(Step.BUILD), open_tasks=2, commits_ahead=1)
    assert isinstance(verdict, Directive) and "Tick the tasks you finished" in verdict.text
    verdict = assess("next-build", "greeting", dispatch(Step.BUILD), open_tasks=3, commits_ahead=0)
    assert isinstance(verdict, Directive) and "Tick" not in verdict.text


def test_assess_a_step_the_planner_moved_past_is_finished():
    assert isinstance(assess("next-build", "greeting", dispatch(Step.REVIEW)), Finished)
    assert isinstance(assess("prompts:next-review", "greeting", dispatch(Step.FIX)), Finished)
    complete = Decision("greeting", Complete("greeting", "done/001-greeting"))
    assert isinstance(assess("next-finalize", "greeting", complete), Finished)
    error = Decision(None, Error(ErrorCode.NO_WORK, "nothing"))
    assert isinstance(assess("next-build", "greeting", error), Finished)


def test_assess_the_same_step_again_is_a_directive_about_that_step():
    for command, step, file in (
        ("next-review", Step.REVIEW, "review-findings.md"),
        ("prompts:next-fix-review", Step.FIX, "review-findings.md"),
        ("next-finalize", Step.FINALIZE, "roadmap.md"),
    ):
        verdict = assess(command, "greeting", dispatch(step))
        assert isinstance(verdict, Directive) and verdict.text.startswith(MARK) and file in verdict.text
    # the same step for another slug is not this worker's business
    assert isinstance(assess("next-review", "greeting", dispatch(Step.REVIEW, "farewell")), Finished)


def test_a_cycle_expires_after_its_own_limits():
    session = worker(cycle_started_at=T0)
    limit = CONFIG.wait_timeout + CONFIG.spin_max + 60
    assert not cycle_expired(session, at(limit - 1), CONFIG)
    assert cycle_expired(session, at(limit), CONFIG)
    assert not cycle_expired(worker(), at(limit), CONFIG)


def test_a_retry_countdown_is_shown_as_waiting_on_the_api():
    from teleclaude.agents import PROFILES
    from teleclaude.runtime.core.sessions import Activity
    from teleclaude.runtime.core.supervision import activity_of

    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    session = Session("s", "claude", "next-build", "x", "/p", None, SessionState.RUNNING, now, now)
    screen = [
        "✻ API error · Retrying in 26s · attempt 7/10",
        "  ⎿  Tip: Use /btw to ask a quick side question",
    ]
    retry = PROFILES["claude"].retry
    assert activity_of(session, screen, now, 5.0, retry) is Activity.WAITING_API
    assert activity_of(session, ["● Bash(ls)"], now, 5.0, retry) is Activity.TOOL


FAILING = WaitOutcome("pytest", 1, ("tests/test_x.py F", "\x1b[31mFAILED tests/test_x.py::test_x\x1b[0m"))


def test_assess_a_builder_whose_check_failed_is_sent_back_with_its_last_lines_though_the_files_say_done():
    verdict = assess("next-build", "greeting", dispatch(Step.REVIEW), wait=FAILING)
    assert isinstance(verdict, Directive) and verdict.failed_wait
    assert "pytest exited 1" in verdict.text and "test_x.py::test_x" in verdict.text
    assert untypable(verdict.text) is None  # one line, nothing a terminal obeys


def test_assess_sends_back_at_most_max_times_in_a_row_then_the_files_decide():
    tries = [
        assess("next-build", "greeting", dispatch(Step.REVIEW), wait=FAILING, sent_back=n) for n in (2, 3)
    ]
    assert isinstance(tries[0], Directive) and tries[0].failed_wait
    assert isinstance(tries[1], Finished)


@pytest.mark.parametrize("check", [WaitOutcome("pytest", 0, ("1 passed",)), None])
def test_assess_a_check_that_passed_or_none_leaves_it_to_the_files(check):
    assert isinstance(assess("next-build", "greeting", dispatch(Step.REVIEW), wait=check), Finished)


def test_assess_a_reviewers_failing_check_is_a_finding_not_a_reason_to_send_it_back():
    verdict = assess("next-review", "greeting", dispatch(Step.FIX), wait=FAILING)
    assert isinstance(verdict, Finished)


def test_a_check_that_never_ran_or_ran_too_long_counts_as_failed():
    stopped = WaitOutcome("pytest", None, why="still ran after 600s and was stopped")
    assert stopped.failed and stopped.summary() == "pytest still ran after 600s and was stopped"
    verdict = assess("next-fix-review", "greeting", dispatch(Step.FIX), wait=stopped)
    assert isinstance(verdict, Directive) and verdict.failed_wait
