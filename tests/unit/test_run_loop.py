"""Every rule of `teleclaude run`'s loop (runtime/core/loop.py, stops.py, ahead.py), driven by plain values:
no tmux, no repository, no clock, no sleeps. The end-to-end runs in tests/runtime/ keep what only real tmux
and stand-in agent CLIs can show."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.agents import NAMES
from teleclaude.config.matrix import Config
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core.model import (
    Complete,
    Dispatch,
    Prepared,
    RunYourself,
    Step,
    Unavailability,
    UsageWindow,
)
from teleclaude.runtime.core import ahead as ahead_rules
from teleclaude.runtime.core import loop as rules
from teleclaude.runtime.core.ahead import Ahead, Successor, likely_next, successor_now, usual_next
from teleclaude.runtime.core.loop import (
    AskAgain,
    DropLane,
    GiveUp,
    Handled,
    Prepare,
    Reaction,
    RestUntil,
    Retries,
    Start,
    TwinFirst,
    WaitFor,
    WaitOut,
    react,
)
from teleclaude.runtime.core.sessions import EventKind, Session, SessionState
from teleclaude.runtime.core.stops import (
    INTERRUPTED,
    Outcome,
    RunSettings,
    Stop,
    advice,
    ends_the_run,
    repeated_text,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
ROOT = Path("/srv/project")
SETTINGS = RunSettings(ROOT, None, False, 40, 1.0, False)
BUILD = Dispatch(Step.BUILD, "x", str(ROOT), "claude", "med", "trees/x")
REVIEW = Dispatch(Step.REVIEW, "x", str(ROOT), "codex", "slow", "trees/x")
FINALIZE = Dispatch(Step.FINALIZE, "x", str(ROOT), "claude", "med", None)


def session(
    state: SessionState = SessionState.RUNNING,
    cycle: bool = False,
    command: str = "next-build",
    slug: str = "x",
    agent: str = "claude",
    age: float = 0.0,
) -> Session:
    created = NOW - timedelta(seconds=age)
    return Session(
        "s1",
        agent,
        command,
        slug,
        str(ROOT),
        "trees/x",
        state,
        created,
        created,
        cycle_started_at=NOW if cycle else None,
    )


def out(*agents: tuple[str, float]) -> RunYourself:
    """No agent for the review: each (agent, seconds until it is back)."""
    gone = tuple(Unavailability(agent, NOW + timedelta(seconds=left)) for agent, left in agents)
    return RunYourself(Step.REVIEW, "x", str(ROOT), "trees/x", gone, call("next_work", slug="x"))


# --- a worker's events --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "worker", "reaction"),
    [
        (EventKind.TURN_ENDED, session(SessionState.TURN_ENDED), Reaction.NEXT),
        (EventKind.TURN_ENDED, session(SessionState.TURN_ENDED, cycle=True), Reaction.WAIT),
        (EventKind.TURN_ENDED, session(SessionState.RUNNING), Reaction.WAIT),  # typed into since
        (EventKind.FINISHED, session(SessionState.DONE), Reaction.NEXT),
        (EventKind.DIRECTED, session(SessionState.RUNNING, cycle=True), Reaction.WAIT),
        (EventKind.EXITED, session(SessionState.DONE), Reaction.NEXT),
        (EventKind.EXITED, session(SessionState.ERRORED), Reaction.FAILED),
        (EventKind.RATE_LIMITED, session(SessionState.RATE_LIMITED), Reaction.NEXT),
        (EventKind.ERRORED, session(SessionState.ERRORED), Reaction.FAILED),
        (EventKind.NEEDS_ATTENTION, session(SessionState.NEEDS_ATTENTION), Reaction.ATTENTION),
        (EventKind.REMINDED, session(SessionState.STALLED), Reaction.WAIT),
        (EventKind.DIGEST, session(SessionState.RUNNING), Reaction.WAIT),
    ],
)
def test_each_event_has_one_reaction(kind, worker, reaction):
    assert react(kind, worker) is reaction


def test_every_event_kind_has_a_reaction():
    for kind in EventKind:
        assert isinstance(react(kind, session()), Reaction)


# --- workers started ahead of their step (warm start) -------------------------------------------------------


def test_the_step_likely_next_is_the_one_that_followed_the_same_step_of_an_earlier_item():
    build = Dispatch(Step.BUILD, "b", "/p", "gemini", "med", "trees/b")
    review = Dispatch(Step.REVIEW, "a", "/p", "codex", "slow", "trees/a")
    finalize = Dispatch(Step.FINALIZE, "a", "/p", "claude", "med", None)
    plan = Dispatch(Step.PLAN, "a", "/p", "claude", "slow", None)
    successors = {
        "next-build": Successor(review, same_folder=True),
        "next-review": Successor(finalize, same_folder=False),
        "next-plan": Successor(replace(build, slug="a", subfolder="trees/a"), same_folder=False),
    }
    likely = likely_next
    assert likely(build, successors) == replace(review, slug="b", subfolder="trees/b")
    assert likely(replace(review, slug="b", subfolder="trees/b"), successors) == replace(finalize, slug="b")
    assert likely(replace(plan, slug="b"), successors) is None  # another item's worktree: not guessed
    assert likely(finalize, successors) is None  # nothing followed it yet


def test_before_anything_followed_a_step_the_guess_is_its_usual_next_step_by_the_agent_chosen_now():
    after, now = Successor, NOW

    def usual(action: Dispatch, matrix: Config | None = None, out: tuple[str, ...] = ()):
        unavailable = {agent: Unavailability(agent, now + timedelta(hours=1)) for agent in out}
        return usual_next(action, matrix or Config(), unavailable, {}, now)

    build = Dispatch(Step.BUILD, "b", "/p", "gemini", "med", "trees/b")
    review = usual(build)
    assert review == after(Dispatch(Step.REVIEW, "b", "/p", "codex", "slow", "trees/b"), same_folder=True)
    assert usual(build, out=("codex",)) == after(replace(review.dispatch, agent="claude"), same_folder=True)
    finalize = usual(review.dispatch, Config(agents=("gemini", "codex")))  # claude not installed
    assert finalize == after(Dispatch(Step.FINALIZE, "b", "/p", "gemini", "med", None), same_folder=False)
    assert finalize is not None
    assert usual(finalize.dispatch) is None  # the item is delivered
    assert usual(build, Config(matrix={})) is None  # no agent staffs a review
    assert usual(build, out=NAMES) is None  # every agent is out


def test_a_step_seen_to_follow_is_guessed_only_while_its_agent_would_still_be_given_it():
    now = NOW
    build = Dispatch(Step.BUILD, "b", "/p", "gemini", "med", "trees/b")
    seen = Successor(Dispatch(Step.REVIEW, "a", "/p", "codex", "slow", "trees/a"), same_folder=True)

    def guess(out: tuple[str, ...] = (), usage: dict[str, tuple[UsageWindow, ...]] | None = None):
        unavailable = {agent: Unavailability(agent, now + timedelta(hours=1)) for agent in out}
        return successor_now(build, seen, Config(), unavailable, usage or {}, now)

    assert guess() == seen
    by_claude = Successor(Dispatch(Step.REVIEW, "b", "/p", "claude", "slow", "trees/b"), same_folder=True)
    assert guess(out=("codex",)) == by_claude  # codex is limited: never started ahead for the review
    full = (UsageWindow("codex", "primary", 97.0, now + timedelta(hours=2), now),)
    assert guess(usage={"codex": full}) == by_claude  # over the headroom while claude is under it
    assert guess(out=NAMES) is None  # nobody may take it


@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_rehearsals_next_step_is_for_the_users_checkout_never_a_plain_run_in_its_clone(outcome):
    """In the clone a plain `run` would start the real CLIs: every next step names the user's checkout, the
    rehearsal again there, or, once it went through, the run for real."""
    clone, mine = Path("/tmp/teleclaude-rehearsal-x/project"), Path("/home/me/my project")
    settings = RunSettings(clone, "greeting", True, 40, 0.2, False, 2, 0.0, rehearsal_of=mine)
    said = advice(outcome, settings)
    assert str(clone) not in said and "cd '/home/me/my project' && teleclaude run greeting --prepare" in said
    assert ("--stand-ins" in said) is (outcome is not Outcome.COMPLETE)


@pytest.mark.parametrize(
    ("worker", "stuck", "expected"),
    [
        (session(SessionState.TURN_ENDED), False, EventKind.TURN_ENDED),
        (session(SessionState.RATE_LIMITED), False, EventKind.RATE_LIMITED),
        (session(SessionState.NEEDS_ATTENTION), False, EventKind.NEEDS_ATTENTION),
        (session(SessionState.DONE), False, EventKind.EXITED),
        (session(SessionState.CANCELLED), False, EventKind.EXITED),
        (session(SessionState.ERRORED), False, EventKind.ERRORED),
        (session(SessionState.RUNNING), False, None),  # its event went nowhere: it works on
        (session(SessionState.STALLED), False, None),
        (session(SessionState.PENDING), False, None),  # its starter is still at it
        (session(SessionState.PENDING), True, EventKind.EXITED),  # left PENDING: ended, started again
    ],
)
def test_a_session_whose_event_was_not_heard_stands_for_the_event_of_its_state(worker, stuck, expected):
    """A restarted run adopts sessions whose events went to the run before it: their state says them."""
    unheard = rules.unheard_event(worker, stuck)
    assert (unheard[0] if unheard else None) is expected


@pytest.mark.parametrize(
    ("state", "starter_gone", "age", "stuck"),
    [
        (SessionState.RUNNING, True, 3600, False),  # it got its command
        (SessionState.PENDING, True, 0, True),  # its starter died: its start lock is free
        (SessionState.PENDING, False, 10, False),  # a start under way
        (SessionState.PENDING, False, 61, True),  # a start long over (2 × startup_timeout 30 s)
    ],
)
def test_a_pending_session_is_stuck_when_its_starter_died_or_its_start_is_long_over(
    state, starter_gone, age, stuck
):
    assert rules.stuck_pending(session(state, age=age), starter_gone, NOW, 30.0) is stuck


@pytest.mark.parametrize(
    ("code", "failures", "stops"),
    [
        (ErrorCode.TMUX_FAILED, 1, False),  # a pane that vanished while tmux was asked: look again
        (ErrorCode.TMUX_FAILED, rules.WAIT_ATTEMPTS - 1, False),
        (ErrorCode.TMUX_FAILED, rules.WAIT_ATTEMPTS, True),
        (ErrorCode.UNKNOWN_SESSION, 1, True),  # nothing to look at again
    ],
)
def test_a_failed_wait_is_tried_again_until_it_keeps_failing(code, failures, stops):
    stop = rules.wait_failed(Error(code, "no pane"), failures)
    assert (stop is not None) is stops
    assert stop is None or stop.outcome is Outcome.ERROR


# --- retries ------------------------------------------------------------------------------------------------


STEP = ("next-build", "x")
OTHER = ("next-build", "y")


@pytest.mark.parametrize(
    ("ends", "stops"),
    [
        ([(STEP, EventKind.ERRORED)], False),
        ([(STEP, EventKind.ERRORED), (STEP, EventKind.ERRORED)], True),  # the same step twice in a row
        ([(STEP, EventKind.ERRORED), (OTHER, EventKind.ERRORED)], False),
        ([(STEP, EventKind.ERRORED), (STEP, EventKind.TURN_ENDED), (STEP, EventKind.ERRORED)], False),
        ([(STEP, EventKind.ERRORED), (STEP, EventKind.RATE_LIMITED), (STEP, EventKind.ERRORED)], False),
    ],
)
def test_a_step_that_fails_twice_in_a_row_stops_the_run(ends, stops):
    retries, stopped = Retries(), False
    for step, kind in ends:
        stopped = retries.through(step, kind, failed=kind is EventKind.ERRORED)
    assert stopped is stops


@pytest.mark.parametrize(
    ("turns", "repeating"),
    [
        ([STEP, STEP], False),
        ([STEP, STEP, STEP], True),  # ended its turn 3 times and the files did not move on
        ([STEP, OTHER, STEP, STEP], False),
        ([STEP, STEP, STEP, OTHER], False),
    ],
)
def test_a_step_that_ends_its_turn_three_times_in_a_row_is_not_started_again(turns, repeating):
    retries = Retries()
    for step in turns:
        retries.through(step, EventKind.TURN_ENDED, failed=False)
    assert retries.repeating(STEP) is repeating
    held = rules.may_start(BUILD, None, retries, 0, 40, "build x")
    assert (held == Stop(Outcome.NEEDS_ATTENTION, repeated_text(BUILD))) is repeating


def refusal(code: ErrorCode) -> Error:
    return Error(code, "it could not start.\nDo this, then call again.")


def test_a_start_that_fails_twice_for_tmux_or_ssh_stops_and_any_other_refusal_at_once():
    retries = Retries()
    assert rules.refused(refusal(ErrorCode.TMUX_FAILED), STEP, retries) == AskAgain()
    assert isinstance(rules.refused(refusal(ErrorCode.TMUX_FAILED), STEP, retries), Stop)  # the second
    assert rules.refused(refusal(ErrorCode.COMPUTER_UNREACHABLE), OTHER, Retries()) == AskAgain()
    raced = Retries()  # a path its sandbox showed went away as bubblewrap made it
    assert rules.refused(refusal(ErrorCode.SANDBOX_RACED), STEP, raced) == AskAgain()
    assert isinstance(rules.refused(refusal(ErrorCode.SANDBOX_RACED), STEP, raced), Stop)
    assert rules.refused(refusal(ErrorCode.ALREADY_RUNNING), STEP, retries) == TwinFirst()  # a run was first
    assert rules.counts_as_started(ErrorCode.WORKER_BLOCKED)  # a dialog stopped it: --max-steps counts it
    assert not rules.counts_as_started(ErrorCode.TMUX_FAILED)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.WORKER_BLOCKED,  # a dialog or a refusal keeps its CLI from working
        ErrorCode.WORKTREE_FAILED,  # a worker pointed its worktree's HEAD at another branch
        ErrorCode.TMUX_FAILED,  # the second in a row
    ],
)
def test_a_refused_start_is_its_items_stop_with_the_next_step_and_parks_only_that_item(code):
    retries = Retries(last_failed=STEP)
    stop = rules.refused(refusal(code), STEP, retries)
    assert isinstance(stop, Stop) and stop.outcome is Outcome.ERROR
    assert stop.what.splitlines() == [f"ERROR: {code.value}", *refusal(code).message.splitlines()]
    assert not ends_the_run(stop)  # a lane parks its item; the other lanes go on


@pytest.mark.parametrize(
    ("history", "elsewhere"),
    [
        ((), False),
        ((Handled(session(slug="y"), EventKind.TURN_ENDED),), True),  # the agent did another item's step
        ((Handled(session(slug="y"), EventKind.ERRORED),), False),
        ((Handled(session(slug="y", agent="codex"), EventKind.FINISHED),), False),
        ((Handled(session(), EventKind.TURN_ENDED),), False),  # the same item's
    ],
)
def test_a_second_failure_stops_the_run_and_blames_the_agent_only_when_it_did_nothing_else(
    history, elsewhere
):
    retries, worker = Retries(), session(SessionState.ERRORED)
    assert rules.failed_again(worker, EventKind.ERRORED, Reaction.FAILED, retries, "boom", history) is None
    stop = rules.failed_again(worker, EventKind.ERRORED, Reaction.FAILED, retries, "boom", history)
    assert stop is not None and stop.outcome is Outcome.ERROR
    assert stop.what.startswith("ERROR: WORKER_FAILED")
    assert ("agents unavailable claude" in stop.what) is not elsewhere


# --- the planner's answer -----------------------------------------------------------------------------------


NOT_PREPARED = Error(ErrorCode.NOT_PREPARED, "no plan", "x", call("next_prepare", slug="x"))
NO_WORK = Error(ErrorCode.NO_WORK, "nothing")
BROKEN = Error(ErrorCode.ROADMAP_CONFLICT, "bad line", "x")
MOVED = Error(ErrorCode.MAIN_MOVED, "main moved", "x")


@pytest.mark.parametrize(
    ("action", "slug", "prepare", "roadmap", "expected"),
    [
        (BUILD, None, False, True, Start(BUILD)),
        (Complete("x", "done/001-x/"), "x", False, True, Outcome.COMPLETE),  # the item asked for
        (Complete("x", "done/001-x/"), None, False, True, AskAgain()),  # the roadmap: on to the next
        (NO_WORK, None, False, True, Outcome.COMPLETE),  # every item done
        (NO_WORK, None, False, False, GiveUp(NO_WORK)),  # no roadmap: an error, not a finished run
        (NO_WORK, "x", False, True, GiveUp(NO_WORK)),
        (NOT_PREPARED, None, True, True, Prepare("x")),  # --prepare sends its architect
        (NOT_PREPARED, None, False, True, Outcome.ERROR),  # without it: how to prepare it
        (out(("codex", 60)), None, False, True, WaitOut(out(("codex", 60)))),
        (BROKEN, None, False, True, GiveUp(BROKEN)),
    ],
)
def test_each_answer_of_next_work_has_one_thing_the_run_does(action, slug, prepare, roadmap, expected):
    settings = replace(SETTINGS, slug=slug, prepare=prepare)
    decided = rules.answer(action, settings, roadmap)
    if isinstance(expected, Outcome):
        assert isinstance(decided, Stop) and decided.outcome is expected
    else:
        assert decided == expected


def test_an_unprepared_item_without_prepare_says_how_to_prepare_it():
    stop = rules.answer(NOT_PREPARED, SETTINGS, True)
    assert isinstance(stop, Stop) and stop.next is not None and "teleclaude run x --prepare" in stop.next


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (BUILD, Start(BUILD, args=f"x {rules.UNATTENDED}")),
        (out(("claude", 5)), WaitOut(out(("claude", 5)))),
        (Prepared("x"), Stop(Outcome.ERROR, "ERROR: NOT_PREPARED\nno plan")),  # prepared and still refused
    ],
)
def test_prepare_starts_the_architect_unattended_or_says_why_not(action, expected):
    decided = rules.prepared_answer(action, NOT_PREPARED, "x")
    if isinstance(expected, Stop):
        assert isinstance(decided, Stop) and decided.outcome is expected.outcome
        assert decided.what.startswith("ERROR: NOT_PREPARED")
    else:
        assert decided == expected


@pytest.mark.parametrize(
    ("action", "outcome"),
    [(BUILD, None), (out(("claude", 5)), Outcome.SELF), (Prepared("x"), Outcome.ERROR)],
)
def test_a_lanes_architect_is_started_or_its_item_parks(action, outcome):
    """A lane does not wait out a limit to prepare: its item parks with SELF."""
    decided = rules.lane_prepared(action, "x")
    if outcome is None:
        assert decided == Start(BUILD, args=f"x {rules.UNATTENDED}")
    else:
        assert isinstance(decided, Stop) and decided.outcome is outcome


@pytest.mark.parametrize(
    ("slug", "action", "prepare", "expected"),
    [
        ("x", BUILD, False, Start(BUILD)),
        ("x", Complete("x", "done/001-x/"), False, DropLane()),  # delivered: the lane frees up
        ("x", NOT_PREPARED, True, Prepare("x")),
        ("x", NOT_PREPARED, False, GiveUp(NOT_PREPARED)),  # parks with the planner's error
        ("x", out(("codex", 5)), False, WaitOut(out(("codex", 5)))),  # the lane rests, the others go on
        ("", replace(BUILD, slug=""), False, Start(replace(BUILD, slug=""))),  # the bug list
    ],
)
def test_each_answer_for_a_lane_has_one_thing_the_lane_does(slug, action, prepare, expected):
    assert not rules.bug_list_done(slug, action)
    assert rules.lane_answer(action, prepare) == expected


@pytest.mark.parametrize(
    ("slug", "action", "done"),
    [
        ("", BUILD, True),  # the bug list's lane is answered with an item's step: the bugs are fixed
        ("", NO_WORK, True),
        ("", replace(BUILD, slug=""), False),
        ("x", NO_WORK, False),
    ],
)
def test_the_bug_lists_lane_frees_up_once_next_work_names_something_else(slug, action, done):
    assert rules.bug_list_done(slug, action) is done


@pytest.mark.parametrize(
    ("action", "keeps_failing", "outcome"),
    [
        (BROKEN, False, Outcome.ERROR),
        (BROKEN, True, Outcome.NEEDS_ATTENTION),  # its gate failed past max_review_rounds: a human looks
        (Prepared("x"), True, Outcome.ERROR),
        (MOVED, False, Outcome.NEEDS_ATTENTION),  # main moved behind teleclaude's back: a human looks
    ],
)
def test_an_answer_the_run_cannot_carry_out_stops_it(action, keeps_failing, outcome):
    assert rules.error_stop(action, keeps_failing).outcome is outcome


@pytest.mark.parametrize(("action", "whole_run"), [(MOVED, True), (BROKEN, False)])
def test_main_moved_stops_every_lane_not_only_the_one_that_heard_it(action, whole_run):
    assert ends_the_run(rules.error_stop(action, False)) is whole_run


# --- agents out: waiting out a limit ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "limit_wait", "expected"),
    [
        (out(), 3600, Outcome.SELF),  # nobody staffs the step: no reset to wait for
        (out(("codex", 60)), 0, Outcome.SELF),  # waiting is off
        (out(("codex", 60)), 3600, RestUntil("codex", NOW + timedelta(seconds=60), frozenset({"codex"}))),
        (
            out(("codex", 600), ("claude", 60)),
            3600,
            RestUntil("claude", NOW + timedelta(seconds=60), frozenset({"codex", "claude"})),
        ),
        (out(("codex", 7200)), 3600, Outcome.SELF),  # further away than limit_wait: its item parks
        (  # back already: ask again
            out(("codex", -5)),
            0,
            RestUntil("codex", NOW - timedelta(seconds=5), frozenset({"codex"})),
        ),
    ],
)
def test_a_step_nobody_may_take_is_waited_out_until_its_first_agent_is_back_within_limit_wait(
    action, limit_wait, expected
):
    decided = rules.wait_out(action, NOW, limit_wait)
    if isinstance(expected, Outcome):
        assert isinstance(decided, Stop) and decided.outcome is expected
        assert decided.what.startswith("SELF:")
    else:
        assert decided == expected


@pytest.mark.parametrize(
    ("seconds", "over"), [(-60, False), (0, False), (0.5, False), (1.0, True), (60, True)]
)
def test_a_resting_lane_asks_again_a_margin_after_the_reset(seconds, over):
    """The store counts an agent out until the second it names."""
    rest = RestUntil("codex", NOW, frozenset({"codex"}))
    assert rules.rest_over(rest, NOW + timedelta(seconds=seconds)) is over
    assert rules.rest_over(rest, NOW + timedelta(seconds=seconds), out={"codex"}) is over


@pytest.mark.parametrize(
    ("out", "over"),
    [
        ({"codex", "claude"}, False),  # both still out: until the reset
        ({"claude"}, True),  # codex marked back by hand (`agents available`, the board's `v`)
        ({"codex"}, True),  # claude, not the first back, marked back: it may take the step
        ({"codex", "claude", "gemini"}, False),  # another agent out is no news
        (set(), True),
        (None, False),  # the store could not be read: until the reset
    ],
)
def test_a_rest_ends_as_soon_as_an_agent_it_waits_on_is_marked_back(out, over):
    rest = RestUntil("codex", NOW + timedelta(hours=1), frozenset({"codex", "claude"}))
    assert rules.rest_over(rest, NOW, out) is over


# --- starting a worker --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("twin", "started", "expected"),
    [
        (None, 0, None),
        (None, 39, None),
        (None, 40, Outcome.MAX_STEPS),  # sessions started and starts under way count
        (session(), 0, WaitFor(session())),  # one worker per step: an earlier run's is waited for
        (session(), 40, WaitFor(session())),  # adopted, even past --max-steps
    ],
)
def test_a_worker_is_started_unless_one_does_its_step_already_or_max_steps_is_reached(
    twin, started, expected
):
    held = rules.may_start(BUILD, twin, Retries(), started, 40, "build x")
    if isinstance(expected, Outcome):
        assert isinstance(held, Stop) and held.outcome is expected and "build x" in held.what
    else:
        assert held == expected


# --- stops: parking, Ctrl-C ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop", "whole_run"),
    [
        (INTERRUPTED, True),  # Ctrl-C ends the run; its workers keep running
        (Stop(Outcome.MAX_STEPS, "--max-steps 3 reached"), True),
        (Stop(Outcome.ERROR, "ERROR: WORKER_FAILED"), False),  # parks that item; the other lanes go on
        (Stop(Outcome.SELF, "SELF: do it"), False),
        (Stop(Outcome.NEEDS_ATTENTION, "stuck"), False),
    ],
)
def test_a_lanes_stop_parks_its_item_unless_it_is_the_whole_runs(stop, whole_run):
    assert ends_the_run(stop) is whole_run


def test_ctrl_c_exits_130_and_says_the_workers_keep_running():
    assert INTERRUPTED.outcome.exit_code == 130 and "keep running" in INTERRUPTED.what
    assert "teleclaude run" in advice(Outcome.INTERRUPTED, SETTINGS)


def test_with_nothing_in_flight_the_parked_items_end_the_run_each_with_its_error():
    assert rules.idle({}) is None  # nothing parked: the planner says why nothing is ready
    stop = rules.idle({"x": Stop(Outcome.ERROR, "ERROR: WORKER_FAILED\nline two"), "": INTERRUPTED})
    assert stop is not None and stop.outcome is Outcome.PARKED
    assert stop.what.splitlines()[0] == "2 items could not go on: x, the bug list"
    assert "- x: ERROR: WORKER_FAILED" in stop.what and "    line two" in stop.what


# --- lanes: which items get one, where ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lanes", "asked", "since", "parallel", "asks"),
    [
        (set(), set(), 0.0, 2, True),  # nothing in flight
        ({"a", "b"}, set(), 0.0, 2, False),  # every lane taken
        ({"a"}, {"a"}, 1.0, 2, False),  # no lane left since the last ask
        ({"a"}, {"a"}, rules.READY_AGAIN, 2, True),  # a change outside this run is seen in time
        ({"a"}, {"a", "b"}, 1.0, 2, True),  # a lane left: its item's dependants may be ready
    ],
)
def test_a_free_lane_asks_for_ready_items_when_a_lane_left_not_at_every_look(
    lanes, asked, since, parallel, asks
):
    assert rules.ask_ready(frozenset(lanes), frozenset(asked), since, parallel) is asks


@pytest.mark.parametrize(
    ("lanes", "ready", "parked", "parallel", "remotes", "added"),
    [
        ({}, ["a", "b", "c"], [], 2, {}, {"a": "local", "b": "local"}),
        ({"a": "local"}, ["a", "b", "c"], ["b"], 2, {}, {"c": "local"}),  # in flight, parked: skipped
        ({}, ["a", "b", "c"], [], 3, {"box": 1}, {"a": "box", "b": "local", "c": "local"}),
        ({"a": "box"}, ["a", "b"], [], 3, {"box": 1, "pi": 2}, {"b": "pi"}),  # toml order, free lanes
        ({}, ["", "a"], [], 2, {"box": 2}, {"": "local", "a": "box"}),  # the bug list: main checkout
        ({"a": "local", "b": "local"}, ["c"], [], 2, {}, {}),
    ],
)
def test_ready_items_get_the_free_lanes_on_the_first_computer_with_one_to_spare(
    lanes, ready, parked, parallel, remotes, added
):
    assert rules.new_lanes(lanes, ready, parked, parallel, remotes) == added


@pytest.mark.parametrize(
    ("lane", "action", "tree_of", "where"),
    [
        ("box", BUILD, "x", "box"),  # the item's worktree, an agent installed there
        ("box", replace(BUILD, agent="gemini"), "x", "local"),  # not installed there
        ("box", FINALIZE, None, "local"),  # the main checkout's steps run here
        ("local", BUILD, "x", "local"),
        ("gone", BUILD, "x", "local"),  # a computer no longer in teleclaude.toml
    ],
)
def test_a_lanes_step_runs_on_its_computer_only_in_the_items_worktree_by_an_agent_there(
    lane, action, tree_of, where
):
    assert rules.computer_for(lane, {"box": ("claude", "codex")}, action, tree_of) == where


@pytest.mark.parametrize(
    ("slug", "parked", "busy", "adopted"),
    [
        ("x", [], False, True),  # an earlier run's worker, or one of a run beside this one
        ("x", ["x"], False, False),  # its item is parked: left for a human
        ("x", [], True, False),  # the lane's own start under way, or its worker started ahead
    ],
)
def test_a_live_worker_no_lane_waits_on_is_adopted(slug, parked, busy, adopted):
    assert rules.adopts(session(slug=slug), parked, busy) is adopted


# --- workers started ahead, the claim ahead -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "learned"),
    [
        (None, None),
        (Handled(session(), EventKind.TURN_ENDED), ("next-build", Successor(REVIEW, True))),
        (Handled(session(), EventKind.FINISHED), ("next-build", Successor(REVIEW, True))),
        (Handled(session(), EventKind.ERRORED), None),  # a failed step teaches nothing
        (Handled(session(), EventKind.TURN_ENDED, adopted=True), None),  # nor an adopted one
        (Handled(session(slug="y"), EventKind.TURN_ENDED), None),  # another item's
    ],
)
def test_what_followed_a_step_done_well_is_learned(last, learned):
    history = [last] if last else []
    assert ahead_rules.learned(replace(REVIEW, note="a note"), history) == learned


def test_the_most_frequent_successor_is_the_guess_and_the_first_seen_of_a_tie():
    fix, finalize = Successor(replace(REVIEW, step=Step.FIX), True), Successor(FINALIZE, False)
    assert ahead_rules.most_seen(None) is None
    assert ahead_rules.most_seen(Counter({finalize: 1, fix: 1})) == finalize
    assert ahead_rules.most_seen(Counter({finalize: 1, fix: 2})) == fix


@pytest.mark.parametrize(
    ("ahead", "allowed"),
    [
        (Ahead(True, False, 0, 40), True),
        (Ahead(False, False, 0, 40), False),  # warm_start = false
        (Ahead(True, True, 0, 40), True),  # other computers: on the one its step would go to (`claims`)
        (Ahead(True, False, 40, 40), False),  # it could never be given its step
    ],
)
def test_workers_are_started_ahead_only_when_warm_start_is_on_and_one_could_be_given_its_step(ahead, allowed):
    assert ahead.allowed is allowed
    assert ahead_rules.start_ahead(ahead, REVIEW) == (REVIEW if allowed else None)


@pytest.mark.parametrize(
    ("action", "claimed"),
    [
        (REVIEW, True),
        (replace(REVIEW, note="the planner's note"), True),
        (replace(REVIEW, agent="claude"), False),  # another agent: the one started ahead is ended
        (replace(REVIEW, thinking_mode="fast"), False),
        (replace(REVIEW, subfolder=None), False),
        (None, False),  # next_work named no step: ended
    ],
)
def test_a_worker_started_ahead_is_given_only_the_step_it_was_started_for(action, claimed):
    assert ahead_rules.claims(REVIEW, action) is claimed


@pytest.mark.parametrize(
    ("warm_on", "start_on", "claimed"),
    [
        ("local", "local", True),
        ("box", "box", True),  # started ahead on the lane's computer, where its step goes
        ("box", "local", False),  # the step goes here now (the computer dropped, its agent is not there)
        ("local", "box", False),
    ],
)
def test_a_worker_started_ahead_is_given_its_step_only_on_the_computer_the_step_goes_to(
    warm_on, start_on, claimed
):
    assert ahead_rules.claims(REVIEW, REVIEW, warm_on, start_on) is claimed


def test_a_build_given_to_a_worker_started_ahead_first_catches_up_with_main():
    assert ahead_rules.catch_up_first(True, BUILD)
    assert not ahead_rules.catch_up_first(False, BUILD)
    assert not ahead_rules.catch_up_first(True, REVIEW)


@pytest.mark.parametrize(
    ("ahead", "parallel", "lanes", "finalizing", "claimed", "claims_next"),
    [
        (Ahead(True, False, 3, 40), 1, 1, 1, 0, True),  # an item is finalized: the next one is claimed
        (Ahead(True, False, 3, 40), 1, 1, 1, 1, False),  # one claimed per finalize
        (Ahead(True, False, 3, 40), 1, 1, 0, 0, False),  # nothing finalized
        (Ahead(True, False, 3, 40), 2, 2, 1, 0, False),  # off with --parallel
        (Ahead(False, False, 3, 40), 1, 1, 1, 0, False),
        (Ahead(True, False, 40, 40), 1, 1, 1, 0, False),  # --max-steps: its step could never be given
        (Ahead(True, True, 3, 40), 1, 1, 1, 0, False),  # other computers: it may go to another clone
    ],
)
def test_while_an_item_is_finalized_the_next_is_claimed_ahead_without_parallel(
    ahead, parallel, lanes, finalizing, claimed, claims_next
):
    assert ahead_rules.claim_next_item(ahead, parallel, lanes, finalizing, claimed) is claims_next


@pytest.mark.parametrize(
    ("action", "args", "adopted", "warm", "claim"),
    [
        (BUILD, "x", False, True, False),  # the review's worker is started ahead
        (BUILD, f"x {rules.UNATTENDED}", False, False, False),  # an architect's unattended start: none
        (FINALIZE, "x", False, True, True),  # a finalize: the next item is claimed too
        (FINALIZE, "x", True, False, False),  # a worker this run adopted sets nothing going
    ],
)
def test_a_lanes_new_worker_sets_its_next_worker_and_the_next_item_going_ahead(
    action, args, adopted, warm, claim
):
    assert ahead_rules.after_start(action, args, adopted) == ahead_rules.AfterStart(warm, claim)


# --- adopting, the lanes' rounds ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slug", "of", "adopted"),
    [(None, "x", True), (None, "", True), ("x", "x", True), ("x", "y", False)],
)
def test_a_run_started_again_watches_the_live_workers_of_its_items_before_it_asks(slug, of, adopted):
    assert rules.serial_adopts(session(slug=of), slug) is adopted


@pytest.mark.parametrize(
    ("lanes", "filled", "refilled", "again"),
    [
        ({"a"}, {"a", "b"}, False, True),  # b left: its next item starts before a wait
        ({"a"}, {"a", "b"}, True, False),  # once in a row
        (set(), {"a"}, False, False),  # nothing left in flight: the planner is asked why
        ({"a", "b"}, {"a", "b"}, False, False),
    ],
)
def test_a_lane_that_left_is_filled_again_before_the_next_wait(lanes, filled, refilled, again):
    assert rules.refill(frozenset(lanes), frozenset(filled), refilled) is again


@pytest.mark.parametrize(
    ("ending", "starting", "computers", "first"),
    [
        (("next-build", "a"), ("next-build", "a"), False, True),  # a retry: the worker holds its step
        (("next-build", "a"), ("next-review", "a"), False, False),  # the step after: ended beside the start
        (("next-review", "a"), ("next-finalize", "a"), False, False),
        (("next-build", "b"), ("next-build", "a"), False, False),  # another lane's item
        (("next-build", "b"), ("next-review", "a"), True, True),  # other computers: their channels first
    ],
)
def test_a_lane_waits_only_for_the_end_of_its_own_steps_worker(ending, starting, computers, first):
    assert rules.ended_first(ending, starting, computers) is first


@pytest.mark.parametrize(
    ("workers", "starts", "asks", "expected"),
    [
        (True, False, False, rules.LanesWait(1.0, workers=True)),
        (True, True, False, rules.LanesWait(rules.START_LOOK, workers=True)),  # a start joins the wait soon
        (False, True, False, rules.LanesWait(1.0, starts=True)),
        (False, False, False, rules.LanesWait(1.0, rest=True)),  # every lane waits for an agent's reset
        (True, False, True, rules.LanesWait(1.0, workers=True)),  # an answer wakes the wait on the workers
        (True, True, True, rules.LanesWait(rules.START_LOOK, workers=True)),
        (False, False, True, rules.LanesWait(1.0, starts=True)),  # only answers to come: waited for
    ],
)
def test_the_lanes_wait_on_their_workers_their_starts_or_rest(workers, starts, asks, expected):
    assert rules.lanes_wait(workers, starts, 1.0, asks) == expected


# --- [checks] in a run --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setup", "action", "runs"),
    [
        (True, BUILD, True),  # the item's worktree, before its first worker
        (False, BUILD, False),
        (True, replace(BUILD, subfolder=None), False),  # the main checkout
        (True, replace(BUILD, subfolder="trees/other"), False),
    ],
)
def test_checks_setup_runs_in_an_items_new_worktree(setup, action, runs):
    assert rules.sets_up(setup, action) is runs


@pytest.mark.parametrize(
    ("reaction", "kind", "gated"),
    [
        (Reaction.NEXT, EventKind.TURN_ENDED, True),
        (Reaction.NEXT, EventKind.FINISHED, False),  # the runtime ended it: the files say it is done
        (Reaction.NEXT, EventKind.EXITED, False),
        (Reaction.FAILED, EventKind.ERRORED, False),
        (Reaction.WAIT, EventKind.TURN_ENDED, False),
    ],
)
def test_a_worker_through_with_its_turn_meets_the_gate_first(reaction, kind, gated):
    assert rules.gate_first(reaction, kind) is gated


@pytest.mark.parametrize(("count", "back"), [(0, True), (2, True), (3, False), (4, False)])
def test_a_red_gate_sends_the_worker_back_max_nudges_times_then_the_review_follows(count, back):
    assert rules.sends_back(count, 3) is back
