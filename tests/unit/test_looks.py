"""How often a run looks at its busy workers' panes (runtime/core/looks.py): later while nothing is new."""

from __future__ import annotations

import pytest

from teleclaude.runtime.core.looks import LONGEST, STRETCH, due, look_every

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


@pytest.mark.parametrize("every", [0.0, POLL, LONGEST * POLL])
def test_a_look_that_watches_a_worker_on_another_computer_comes_every_interval(every):
    assert look_every(every, POLL, news=False, remote=True) == POLL


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
