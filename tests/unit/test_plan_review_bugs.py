"""Plan groups, review verdicts and the bug list."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.planner.core.bugs import open_bugs
from teleclaude.planner.core.model import Verdict
from teleclaude.planner.core.plan import parse_plan
from teleclaude.planner.core.review import parse_review


def counts(text):
    plan = parse_plan(text)
    return plan.build_tasks, plan.open_build_tasks


def test_groups_one_to_four_hold_build_tasks_later_groups_are_ignored():
    text = (
        "# Plan\n## Group 1: Storage\n- [x] a\n- [ ] b\n"
        "### Group 4 — Wiring\n- [x] c\n"
        "## Group 5: After the build\n- [ ] deploy\n"
    )
    assert counts(text) == (3, 1)


def test_any_heading_level_and_case():
    assert counts("#### GROUP 2\n- [ ] a\n") == (1, 1)
    assert counts("# group 3: x\n- [x] a\n") == (1, 0)


def test_nested_tasks_count():
    assert counts("## Group 1\n- [x] a\n  - [ ] a.1\n    - [ ] a.1.1\n") == (3, 2)


def test_a_same_level_heading_ends_the_group():
    assert counts("## Group 1\n- [x] a\n## Notes\n- [ ] not a build task\n") == (1, 0)


def test_a_sub_heading_stays_in_the_group():
    assert counts("## Group 1\n### Details\n- [ ] a\n") == (1, 1)


def test_without_group_headings_every_checkbox_counts():
    assert counts("# Plan\n- [x] a\n- [ ] b\n## Later\n- [ ] c\n") == (3, 2)


@pytest.mark.parametrize(
    "text",
    [
        "# Implementation plan\n\n## Group 1\n\n## Group 2\n",  # empty template
        "## Group 5\n- [ ] only post-build\n",
        "Just prose.\n",
        "```\n- [ ] fenced\n```\n",
    ],
)
def test_plan_without_build_tasks_is_not_prepared(text):
    assert not parse_plan(text).has_build_tasks


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("- [x] APPROVE\n- [ ] REQUEST CHANGES\n", Verdict.APPROVED),
        ("- [x] **Approve** — ship it\n", Verdict.APPROVED),
        ("- [ ] APPROVE\n- [x] REQUEST CHANGES\n", Verdict.CHANGES_REQUESTED),
        ("- [x] APPROVE\n- [x] REQUEST CHANGES\n", Verdict.CHANGES_REQUESTED),
        ("- [ ] APPROVE\n- [ ] REQUEST CHANGES\n", Verdict.CHANGES_REQUESTED),
        ("# Review\nLooks good.\n", Verdict.CHANGES_REQUESTED),
        ("```\n- [x] APPROVE\n```\n", Verdict.CHANGES_REQUESTED),
        ("", Verdict.CHANGES_REQUESTED),
    ],
)
def test_verdicts(text, verdict):
    assert parse_review(text).verdict is verdict


def test_unclear_verdict_says_why():
    assert "both" in parse_review("- [x] APPROVE\n- [x] REQUEST CHANGES\n").why
    assert parse_review("nothing").why


def test_open_bugs_are_the_unchecked_items():
    bugs = open_bugs("# Bugs\n- [ ] crash on empty input\n- [x] fixed one\n```\n- [ ] not a bug\n```\n")
    assert [b.text for b in bugs] == ["crash on empty input"]


@given(st.text(max_size=400))
def test_property_plan_and_review_parsers_never_raise(text):
    plan = parse_plan(text)
    assert 0 <= plan.open_build_tasks <= plan.build_tasks
    parse_review(text)
    open_bugs(text)
