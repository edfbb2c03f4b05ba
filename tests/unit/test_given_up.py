"""When `teleclaude run` gives up a worker on a computer that stays unreachable, and where its lane goes on
(runtime/core/given_up.py), driven by plain values: no tmux, no ssh, the clock a value. The end-to-end half
(a computer killed mid-step and never back) is in tests/runtime/test_remote.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.config.profiles import Computer, RuntimeConfig
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.api import Runtime
from teleclaude.runtime.core import given_up as rules
from teleclaude.runtime.core.sessions import Event, EventKind, Session, SessionState
from teleclaude.runtime.core.stops import RunSettings
from teleclaude.runtime.given_up import GivenUp
from teleclaude.runtime.parallel import Lane, Lanes
from teleclaude.runtime.run_report import RunState

NOW = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
WAIT = 900.0


def worker(state: SessionState = SessionState.RUNNING, computer: str = "box") -> Session:
    return Session("s1", "claude", "next-build", "x", "/srv/p", "trees/x", state, NOW, NOW, computer=computer)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("session", "since", "wait", "given_up"),
    [
        (worker(), {}, WAIT, False),  # its computer answers
        (worker(), {"box": ago(60)}, WAIT, False),  # a reboot, a flaky link: waited out
        (worker(), {"box": ago(WAIT)}, WAIT, False),  # not longer than the wait yet
        (worker(), {"box": ago(WAIT + 1)}, WAIT, True),
        (worker(SessionState.STALLED), {"box": ago(WAIT + 1)}, WAIT, True),
        (worker(SessionState.PENDING), {"box": ago(WAIT + 1)}, WAIT, True),
        (worker(), {"other": ago(WAIT + 1)}, WAIT, False),  # another computer is away
        (worker(computer="local"), {"box": ago(WAIT + 1)}, WAIT, False),
        (worker(), {"box": ago(86400)}, 0, False),  # 0: a computer is waited for however long
        # a state its lane reacts to already: the turn ended (brought back before), a limit, attention
        (worker(SessionState.TURN_ENDED), {"box": ago(WAIT + 1)}, WAIT, False),
        (worker(SessionState.RATE_LIMITED), {"box": ago(WAIT + 1)}, WAIT, False),
        (worker(SessionState.NEEDS_ATTENTION), {"box": ago(WAIT + 1)}, WAIT, False),
        (worker(SessionState.CANCELLED), {"box": ago(WAIT + 1)}, WAIT, False),  # over
    ],
)
def test_a_worker_is_given_up_only_once_its_computer_was_away_longer_than_the_wait(
    session, since, wait, given_up
):
    assert rules.gives_up(session, since, NOW, wait) is given_up


def test_a_computer_counts_as_away_from_when_it_was_first_seen_so_until_it_answers():
    first = rules.down_since({}, {"box"}, ago(100))
    assert first == {"box": ago(100)}
    assert rules.down_since(first, {"box", "other"}, NOW) == {"box": ago(100), "other": NOW}
    assert rules.down_since(first, set(), NOW) == {}  # it answered: a later drop counts from then
    assert rules.down_since({}, {"box"}, NOW) == {"box": NOW}


@pytest.mark.parametrize(
    ("lane", "in_use", "down", "moved"),
    [
        ("box", [], {"box"}, "other"),  # the first other computer with a lane to spare
        ("box", ["other", "other"], {"box"}, "local"),  # its lanes taken: here
        ("box", [], {"box", "other"}, "local"),  # never one that is away
        ("box", [], set(), "other"),  # back already: still not the clone holding the old worker's branch
        ("other", [], {"other"}, "box"),  # in teleclaude.toml's order
    ],
)
def test_a_given_up_lane_goes_on_elsewhere_never_on_the_computer_it_left(lane, in_use, down, moved):
    assert rules.moved_to(lane, in_use, {"box": 1, "other": 2}, down) == moved


def test_a_given_up_session_says_so_and_where_its_later_commits_are_kept():
    text = rules.why("box", ago(905), NOW)
    assert text.startswith(rules.GIVEN_UP)
    ended = Session(
        "s1", "claude", "next-build", "x", "/srv/p", "trees/x", SessionState.CANCELLED, NOW, NOW,
        last_error=text,
    )  # fmt: skip
    assert rules.is_given_up(ended)
    assert not rules.is_given_up(worker(SessionState.CANCELLED))  # ended by someone: not given up
    ref = rules.kept_ref("x", "s1")
    assert ref == "refs/teleclaude/given-up/x/s1" and not ref.startswith("refs/heads/")
    kept = rules.Kept("s1", "box", "x", ref)
    assert kept.text().endswith(f"kept at {ref}: git log HEAD..{ref}")
    assert rules.KEPT not in rules.Kept("s1", "box", "x").text()  # it had committed nothing: no ref named


def test_the_given_up_workers_are_tried_on_their_computer_at_once_when_it_answers_else_now_and_then():
    away, back = worker(computer="box"), worker(computer="other")
    assert rules.sweeps([away, back], {"box"}, last_try=100.0, now=101.0) == [back]
    assert rules.sweeps([away, back], {"box"}, last_try=100.0, now=100.0 + rules.SWEEP_EVERY) == [away, back]
    assert rules.sweeps([], {"box"}, last_try=0.0, now=1000.0) == []


def test_a_run_tries_again_only_the_given_up_workers_never_ended_on_their_computer():
    text = rules.why("box", ago(905), NOW)
    given_up = [
        Session(i, "claude", "next-build", "x", "/srv/p", "trees/x", SessionState.CANCELLED, NOW, NOW,
                computer="box", last_error=text)
        for i in ("s1", "s2")
    ]  # fmt: skip
    ended_by_hand = worker(SessionState.CANCELLED)
    events = [
        Event("s1", EventKind.ENDED, NOW, text),  # given up: not yet ended there
        rules.swept(rules.Kept("s2", "box", "x"), NOW),
    ]
    assert rules.unswept([*given_up, ended_by_hand], events) == [given_up[0]]
    assert rules.unswept(given_up, []) == given_up


def test_no_step_of_an_item_goes_to_the_computer_holding_its_given_up_worker_until_that_is_ended_there(
    tmp_path,
):
    """A run that starts (or a lane that moves) while an item's given-up worker is not yet ended on its
    computer puts that item's steps here, not in the old worker's worktree there (the sweep would remove it
    from under the new worker); another item's steps still go there."""
    box = Computer("box", "box.example", "/srv/p", {"claude": "claude"}, lanes=2)
    runtime = Runtime(RuntimeConfig(socket="tc-given-up", remotes={"box": box}), SessionStore(), env={})
    settings = RunSettings(tmp_path, None, False, 40, 1.0, False, 2)
    lanes = Lanes(settings, RunState(()), runtime, show=lambda _: None, status=lambda _: None)
    lanes.given_up = GivenUp(runtime, tmp_path, pending=[given_up_worker("x", "box")])
    lane = Lane("x", computer="box")

    def build(slug: str) -> Dispatch:
        return Dispatch(Step.BUILD, slug, str(tmp_path), "claude", "high", f"trees/{slug}")

    assert lanes._computer_for(lane, build("x")) == "local"  # its old worker may still be at work there
    assert lanes._computer_for(Lane("y", computer="box"), build("y")) == "box"
    lanes.given_up.pending = []  # ended there, its commits kept and its worktree removed: box again
    assert lanes._computer_for(lane, build("x")) == "box"
    assert rules.holding([given_up_worker("x", "box"), given_up_worker("y", "other")], "x") == {"box"}


def given_up_worker(slug: str, computer: str) -> Session:
    text = rules.why(computer, ago(905), NOW)
    return Session(
        f"old-{slug}", "claude", "next-build", slug, "/srv/p", f"trees/{slug}", SessionState.CANCELLED, NOW,
        NOW, computer=computer, last_error=text,
    )  # fmt: skip


def test_a_given_up_worker_on_a_computer_no_longer_listed_is_reported_never_recorded_as_ended(tmp_path):
    """teleclaude.toml no longer names its computer: nothing there is ended or kept, so nothing is recorded as
    swept (a run with the computer listed again sweeps it), and the run's report says it is left there."""
    box = Computer("box", "box.example", "/srv/p", {"claude": "claude"}, lanes=2)
    store = SessionStore()
    left = replace(given_up_worker("y", "gone"), project=str(tmp_path))
    store.add(left)
    runtime = Runtime(RuntimeConfig(socket="tc-given-up", remotes={"box": box}), store, env={})
    given_up = GivenUp(runtime, tmp_path)
    given_up.resume()
    given_up.close()
    assert given_up.pending == [] and len(given_up.report()) == 1
    assert [s.id for s in rules.unswept(store.sessions(), store.events([left.id]))] == [left.id]
