"""How often a run looks at its busy workers' panes (runtime/core/looks.py): later while nothing is new."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from teleclaude.runtime.core.looks import LONGEST, STRETCH, due, look_every, moved, moved_first, turn_over
from teleclaude.runtime.core.sessions import PaneView, Session, SessionState

POLL = 1.0


@pytest.mark.parametrize(
    ("every", "news", "then"),
    [
        (0.0, False, POLL * STRETCH),  # the first look found nothing new: the next comes later
        (POLL, False, POLL * STRETCH),
        (POLL * STRETCH, False, POLL * STRETCH * STRETCH),
        (LONGEST * POLL, False, LONGEST * POLL),  # never later than LONGEST intervals
        (LONGEST * POLL * 10, False, LONGEST * POLL),  # (the setting was longer at the last look)
        (LONGEST * POLL, True, POLL),  # a pane printed or a worker changed: every interval again
        (0.0, True, POLL),
    ],
    ids=["first", "from-poll", "doubles", "at-most-longest", "longer-setting", "news-resets", "news-first"],
)
def test_the_next_look(every, news, then):
    assert look_every(every, POLL, news) == then


def test_quiet_looks_stretch_to_the_longest_and_one_with_news_brings_them_back():
    every, seen = 0.0, []
    for _ in range(5):
        every = look_every(every, POLL, news=False)
        seen.append(every)
    assert seen == sorted(seen) and seen[-1] == LONGEST * POLL
    assert look_every(every, POLL, news=True) == POLL


@pytest.mark.parametrize(
    ("every", "poll", "then"),
    [
        (0.0, POLL, POLL),  # nothing looked at yet: the interval
        (3.0, POLL, 3.0),
        (4.0, 0.05, LONGEST * 0.05),  # the setting went down since the last look
        (2.0, 30.0, 30.0),  # or up
    ],
)
def test_due_keeps_the_interval_within_the_setting(every, poll, then):
    assert due(every, poll) == then


QUIET = PaneView("%1", 100, 0, 2000, 5, 40, False, False)


@pytest.mark.parametrize(
    ("view", "then"),
    [
        (QUIET, False),  # working: nothing on its pane says it moved
        (replace(QUIET, usage="sealed windows"), False),  # a usage mark wakes no one
        (replace(QUIET, turn_end="sealed 1700000000000000000"), True),  # its stop hook marked its turn's end
        (replace(QUIET, stop_failure="sealed {}"), True),  # its StopFailure hook marked the failure
        (replace(QUIET, dead=True, dead_status=0), True),  # its CLI exited
        (None, True),  # its pane is gone
    ],
    ids=["working", "usage-only", "turn-end", "stop-failure", "exited", "gone"],
)
def test_a_pane_moved_when_it_shows_why_its_computer_woke_the_run(view, then):
    assert moved(view) is then


@pytest.mark.parametrize(
    ("view", "then"),
    [
        (QUIET, False),
        (replace(QUIET, turn_end="sealed 1700000000000000000"), True),  # its branch comes back first
        (replace(QUIET, dead=True, dead_status=1), True),  # an exit ends the turn too
        (replace(QUIET, stop_failure="sealed {}"), False),  # a limit: nothing to bring back
        (None, False),  # gone: an error, no turn's end
    ],
    ids=["working", "turn-end", "exited", "stop-failure", "gone"],
)
def test_a_moved_pane_whose_turn_is_over_has_its_branch_brought_back_before_it_is_read(view, then):
    assert turn_over(view) is then


def _worker(number: int, computer: str, pane: str, state: SessionState = SessionState.RUNNING) -> Session:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return Session(
        f"s{number}", "claude", "next-build", "", "/project", None, state, at, at, computer, pane_id=pane
    )


def test_the_workers_looked_at_first_are_the_moved_ones_on_the_computers_that_woke():
    views = {
        "box:%1": replace(QUIET, pane_id="%1", turn_end="sealed 1"),
        "box:%2": replace(QUIET, pane_id="%2"),
        "other:%1": replace(QUIET, pane_id="%1", turn_end="sealed 1"),
        "box:%4": replace(QUIET, pane_id="%4", turn_end="sealed 1"),
    }
    sessions = [
        _worker(1, "box", "box:%1"),  # marked, on the computer that woke: first
        _worker(2, "box", "box:%2"),  # working there: with the rest
        _worker(3, "other", "other:%1"),  # marked, but its computer did not wake (its own wake comes)
        _worker(4, "box", "box:%4", SessionState.DONE),  # over: never looked at
        _worker(5, "box", "box:%5"),  # its pane is gone: first (its end is news)
        _worker(6, "box", ""),  # its pane not open yet (still starting): with the rest
    ]
    assert moved_first(sessions, views, ["box"]) == {"s1", "s5"}
    assert moved_first(sessions, views, []) == frozenset()
