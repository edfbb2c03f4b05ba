"""Every branch of both decision orders (docs/design.md §2), driven by plain values: no repo, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.config.matrix import Config
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core.decide import decide_prepare, decide_work, next_item_after, ready_items
from teleclaude.planner.core.model import (
    ClaimItem,
    Complete,
    CreateWorktree,
    Dispatch,
    MainStatus,
    MarkDone,
    Marker,
    PlanStatus,
    Prepared,
    Review,
    RunYourself,
    Step,
    Unavailability,
    UsageWindow,
    Verdict,
    Worktree,
    WorktreeState,
)
from teleclaude.planner.core.roadmap import parse_roadmap

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
OPEN_PLAN = PlanStatus(build_tasks=3, open_build_tasks=2, has_groups=True)
BUILT_PLAN = PlanStatus(build_tasks=3, open_build_tasks=0, has_groups=True)


@dataclass
class Facts:
    """A project described by values; defaults are a prepared item with its worktree, mid-build."""

    roadmap_text: str | None = "- [>] feat — the feature\n- [ ] other — later\n"
    bugs: int = 0
    archives: dict[str, str] = field(default_factory=dict)
    requirements: set[str] = field(default_factory=lambda: {"feat", "other"})
    plans: dict[str, PlanStatus | None] = field(
        default_factory=lambda: {"feat": OPEN_PLAN, "other": OPEN_PLAN}
    )
    reviews: dict[str, Review] = field(default_factory=dict)
    trees: dict[str, Worktree] = field(default_factory=lambda: {"feat": Worktree(WorktreeState.PRESENT)})
    main: MainStatus = MainStatus(has_commits=True)
    tree_changes: tuple[str, ...] = ()
    rounds: int = 0
    down: dict[str, Unavailability] = field(default_factory=dict)
    used: dict[str, tuple[UsageWindow, ...]] = field(default_factory=dict)
    config: Config = field(default_factory=Config)
    project: str = "/srv/project"
    now: datetime = NOW
    highest_archive: int = 4
    conflicts: tuple[str, ...] = ()
    main_dirty: tuple[str, ...] = ()

    def roadmap(self):
        return None if self.roadmap_text is None else parse_roadmap(self.roadmap_text)

    def is_pending(self, slug):
        item = self.roadmap() and self.roadmap().find(slug)
        return bool(item) and item.marker is Marker.PENDING

    def open_bugs(self):
        return self.bugs

    def archive(self, slug):
        return self.archives.get(slug)

    def next_archive(self, slug):
        return f"done/{self.highest_archive + 1:03d}-{slug}/"

    def worktree(self, slug):
        return self.trees.get(slug, Worktree(WorktreeState.ABSENT))

    def has_requirements(self, slug):
        return slug in self.requirements

    def plan(self, slug):
        return self.plans.get(slug)

    def review(self, slug):
        return self.reviews.get(slug)

    def main_status(self, slug):
        return self.main

    def main_changes(self):
        return self.main_dirty

    def worktree_changes(self, slug):
        return self.tree_changes

    def review_rounds(self, slug):
        return self.rounds

    def unavailable(self):
        return self.down

    def usage(self):
        return self.used

    def merge_conflicts(self, slug):
        return self.conflicts


def work(facts: Facts, slug: str | None = None):
    return decide_work(facts, slug)


def action(decision):
    assert decision.action is not None, decision
    return decision.action


def down(agent: str, minutes: int = 60, reason: str = "quota_exhausted") -> tuple[str, Unavailability]:
    return agent, Unavailability(agent, NOW + timedelta(minutes=minutes), reason)


# --- next_work, step by step ---------------------------------------------------------------------


def test_open_bug_dispatches_next_bugs_in_main_checkout_before_roadmap_work():
    result = action(work(Facts(bugs=2)))
    assert isinstance(result, Dispatch)
    assert (result.step, result.subfolder, result.agent, result.command) == (
        Step.BUGS,
        None,
        "codex",
        "next-bugs",
    )


def test_bugs_are_ignored_when_a_slug_is_given():
    assert action(work(Facts(bugs=2), "feat")).step is Step.BUILD


def test_first_active_item_is_chosen_before_pending_ones():
    facts = Facts(roadmap_text="- [ ] other\n- [>] feat\n")
    assert action(work(facts)).slug == "feat"


def test_first_pending_item_with_satisfied_dependencies_is_claimed():
    facts = Facts(roadmap_text="- [ ] other (after: feat)\n- [ ] feat\n- [x] old\n")
    decision = work(facts)
    assert decision.action.step is Step.BUILD and decision.effects == (ClaimItem("feat"),)
    assert decision.slug == "feat"


def test_unprepared_pending_item_is_not_claimed():
    facts = Facts(roadmap_text="- [ ] feat\n", requirements=set())
    decision = work(facts)
    assert decision.action.code is ErrorCode.NOT_PREPARED and decision.effects == ()


def test_commit_pending_in_main_claims_the_item():
    facts = Facts(
        roadmap_text="- [ ] feat\n", trees={}, main=MainStatus(True, ("todos/feat/requirements.md",))
    )
    decision = work(facts)
    assert decision.action.step is Step.COMMIT and decision.effects == (ClaimItem("feat"),)


@pytest.mark.parametrize(
    "roadmap, archives, claimed",
    [
        ("- [x] base\n- [ ] feat (after: base)\n", {}, "feat"),  # dependency marked done
        ("- [ ] base\n- [ ] feat (after: base)\n", {"base": "done/001-base/"}, "base"),  # archived: COMPLETE
        ("- [ ] feat (after: gone-item)\n", {}, "feat"),  # absent from the roadmap: delivered
    ],
)
def test_dependency_satisfied_when_done_archived_or_absent(roadmap, archives, claimed):
    decision = work(Facts(roadmap_text=roadmap, archives=archives))
    assert decision.slug == claimed


def test_all_open_items_blocked_names_the_blockers():
    facts = Facts(roadmap_text="- [ ] a (after: b)\n- [ ] b (after: a)\n")
    result = action(work(facts))
    assert isinstance(result, Error) and result.code is ErrorCode.DEPS_UNSATISFIED
    assert "a waits for b" in result.message and "b waits for a" in result.message


@pytest.mark.parametrize("with_tree", [False, True])
def test_a_named_pending_item_whose_dependency_is_open_is_not_started(with_tree):
    """Named or chosen, a `[ ]` item starts only once its dependencies are delivered: no claim, no worktree;
    the next step is the dependency's."""
    trees = {"feat": Worktree(WorktreeState.PRESENT)} if with_tree else {}
    facts = Facts(roadmap_text="- [ ] base — first\n- [ ] feat (after: base) — then\n", trees=trees)
    decision = work(facts, "feat")
    result = action(decision)
    assert isinstance(result, Error) and (result.code, result.slug) == (ErrorCode.DEPS_UNSATISFIED, "feat")
    assert "base" in result.message and result.next_step == call("next_work", slug="base")
    assert decision.effects == ()


def test_a_named_item_waiting_for_its_dependencies_may_be_prepared_meanwhile():
    facts = Facts(roadmap_text="- [ ] base\n- [ ] feat (after: base)\n", requirements=set(), trees={})
    result = action(work(facts, "feat"))
    assert result.code is ErrorCode.NOT_PREPARED and result.next_step == call("next_prepare", slug="feat")


def test_a_named_item_in_progress_goes_on_and_a_delivered_one_is_complete_whatever_its_dependencies():
    roadmap = "- [ ] base — first\n- [>] feat (after: base) — then\n- [ ] old (after: base)\n"
    facts = Facts(roadmap_text=roadmap, archives={"old": "done/003-old/"})
    assert (
        action(work(facts, "feat")).step is Step.BUILD
    )  # lint reports it (ACTIVE_BLOCKED); it is not stopped
    assert isinstance(action(work(facts, "old")), Complete)


@pytest.mark.parametrize(
    "dirty, expected",
    [
        (("src/app.py",), ErrorCode.MAIN_NOT_CLEAN),  # the user's: its finalize would refuse to merge over it
        (("notes/",), ErrorCode.MAIN_NOT_CLEAN),  # an untracked folder
        (("todos/roadmap.md",), None),  # the planner's `[>]` claims
        (("todos/other/requirements.md",), None),  # an architect's, or commit-pending's: a worker commits it
        (("trees/",), None),  # worktrees, before the first one made excluded the folder
    ],
)
def test_a_new_item_is_not_started_on_a_main_checkout_its_finalize_would_refuse(dirty, expected):
    facts = Facts(roadmap_text="- [ ] feat — the feature\n", trees={}, main_dirty=dirty)
    decision = work(facts, "feat")
    if expected is None:
        assert decision.effects == (CreateWorktree("feat"), ClaimItem("feat"))
        return
    result = action(decision)
    assert isinstance(result, Error) and (result.code, result.slug) == (expected, "feat")
    assert dirty[0] in result.message and decision.effects == ()


def test_an_item_with_its_worktree_goes_on_over_a_dirty_main_and_the_bug_fixers_edits_hold_nothing_back():
    """Work already under way is not stopped (its finalize says it, step 11); while bugs are open the bug
    fixer edits the main checkout, so its edits are not taken for the user's."""
    assert action(work(Facts(main_dirty=("src/app.py",)), "feat")).step is Step.BUILD
    facts = Facts(roadmap_text="- [ ] feat — the feature\n", trees={}, main_dirty=("src/app.py",), bugs=1)
    assert work(facts, "feat").effects == (CreateWorktree("feat"), ClaimItem("feat"))


@pytest.mark.parametrize("roadmap", ["# Roadmap\n", "- [x] done-item\n", "```\n- [ ] fenced\n```\n"])
def test_nothing_open_is_no_work(roadmap):
    assert action(work(Facts(roadmap_text=roadmap))).code is ErrorCode.NO_WORK


def test_missing_roadmap_is_no_work_with_how_to_create_it():
    result = action(work(Facts(roadmap_text=None)))
    assert result.code is ErrorCode.NO_WORK and "todos/roadmap.md" in result.message


def test_malformed_open_item_stops_a_slugless_call_naming_the_line():
    result = action(work(Facts(roadmap_text="- [ ] feat\n- [ ] ../x — bad\n")))
    assert result.code is ErrorCode.INVALID_SLUG and "todos/roadmap.md:2:" in result.message


def test_malformed_done_item_is_history_and_ignored():
    assert action(work(Facts(roadmap_text="- [x] Migrated the DB\n- [>] feat\n"))).step is Step.BUILD


@pytest.mark.parametrize("slug", ["../x", "-rf", "a b", "A", "x" * 200, "a--b", "a-", ""])
def test_hostile_slug_argument_is_invalid_slug(slug):
    for decide in (decide_work, decide_prepare):
        result = action(decide(Facts(), slug))
        assert isinstance(result, Error) and result.code is ErrorCode.INVALID_SLUG


def test_archived_item_is_complete_and_marked_done():
    decision = work(Facts(archives={"feat": "done/003-feat/"}))
    assert decision.action == Complete("feat", "done/003-feat/")
    assert decision.effects == (MarkDone("feat"),)


def test_archived_item_already_marked_is_complete_without_effects():
    decision = work(Facts(roadmap_text="- [x] feat\n", archives={"feat": "done/003-feat/"}), "feat")
    assert isinstance(decision.action, Complete) and decision.effects == ()


@pytest.mark.parametrize(
    "requirements, plan, missing",
    [
        (set(), OPEN_PLAN, "requirements"),
        ({"feat"}, None, "implementation plan"),
        ({"feat"}, PlanStatus(0, 0), "build tasks"),
    ],
)
def test_unprepared_item_is_not_prepared_and_names_what_is_missing(requirements, plan, missing):
    facts = Facts(requirements=requirements | {"other"}, plans={"feat": plan, "other": OPEN_PLAN})
    result = action(work(facts))
    assert result.code is ErrorCode.NOT_PREPARED
    assert missing in result.message and result.next_step == call("next_prepare", slug="feat")
    assert "other" in result.message  # a prepared item that could be worked instead


@pytest.mark.parametrize("decide", [decide_work, decide_prepare])
def test_a_slug_named_by_nothing_in_the_files_is_unknown_and_a_close_one_is_suggested(decide):
    decision = decide(Facts(), "fet")
    result = action(decision)
    assert result.code is ErrorCode.UNKNOWN_ITEM and "feat" in result.message.splitlines()[1]
    assert decision.effects == ()  # nothing claimed, no worktree
    far = action(decide(Facts(), "zzzzzz"))
    assert far.code is ErrorCode.UNKNOWN_ITEM and "Did you mean" not in far.message


@pytest.mark.parametrize(
    "facts",
    [
        Facts(requirements={"feat", "other", "loose"}),  # its folder has files: an item being written
        Facts(archives={"loose": "done/003-loose/"}),  # archived, and taken off the roadmap
        Facts(trees={"loose": Worktree(WorktreeState.PRESENT)}),
        Facts(roadmap_text=None),  # no roadmap: the errors about that say what to do
    ],
)
def test_a_slug_off_the_roadmap_that_the_files_know_is_not_unknown(facts):
    result = work(facts, "loose").action
    assert not (isinstance(result, Error) and result.code is ErrorCode.UNKNOWN_ITEM)


def test_uncommitted_prepared_files_in_main_dispatch_commit_pending_there():
    facts = Facts(trees={}, main=MainStatus(True, ("todos/feat/implementation-plan.md",)))
    result = action(work(facts))
    assert (result.step, result.subfolder) == (Step.COMMIT, None)


def test_repository_without_commits_cannot_get_a_worktree():
    assert action(work(Facts(trees={}, main=MainStatus(False)))).code is ErrorCode.NO_COMMITS


def test_missing_worktree_is_created_then_decided_again():
    decision = work(Facts(trees={}))
    assert decision.action is None and decision.effects == (CreateWorktree("feat"),)


def test_explicit_pending_slug_is_claimed_once_its_worktree_is_made():
    decision = work(Facts(trees={}), "other")
    assert decision.action is None and decision.effects == (CreateWorktree("other"), ClaimItem("other"))


def test_prepared_files_ignored_by_git_are_not_prepared_and_make_no_worktree():
    facts = Facts(trees={}, main=MainStatus(True, (), ("todos/feat/requirements.md",)))
    decision = work(facts)
    assert decision.action.code is ErrorCode.NOT_PREPARED and decision.effects == ()


def test_architect_works_in_the_worktree_once_it_exists():
    result = action(decide_prepare(Facts(plans={"feat": None}), "feat"))
    assert (result.step, result.subfolder) == (Step.PLAN, "trees/feat")


def test_broken_worktree_is_an_error_that_changes_nothing():
    decision = work(Facts(trees={"feat": Worktree(WorktreeState.BROKEN, "it has files but no .git")}))
    assert decision.action.code is ErrorCode.WORKTREE_FAILED and decision.effects == ()


def test_changes_in_worktree_dispatch_commit_pending_in_the_worktree():
    result = action(work(Facts(tree_changes=("src/a.py",))))
    assert (result.step, result.subfolder, result.agent, result.thinking_mode) == (
        Step.COMMIT,
        "trees/feat",
        "claude",
        "fast",
    )


def test_open_build_tasks_dispatch_next_build():
    result = action(work(Facts()))
    assert (result.step, result.agent, result.thinking_mode, result.subfolder) == (
        Step.BUILD,
        "gemini",
        "med",
        "trees/feat",
    )
    assert result.project == "/srv/project" and result.note is None


def test_built_without_review_dispatches_next_review_to_codex_with_prefix():
    result = action(work(Facts(plans={"feat": BUILT_PLAN})))
    assert (result.step, result.agent, result.thinking_mode) == (Step.REVIEW, "codex", "slow")
    assert result.command == "next-review"


def test_changes_requested_dispatch_fix():
    facts = Facts(plans={"feat": BUILT_PLAN}, reviews={"feat": Review(Verdict.CHANGES_REQUESTED)}, rounds=1)
    assert action(work(facts)).step is Step.FIX


def test_review_round_limit_stops_for_a_human():
    facts = Facts(plans={"feat": BUILT_PLAN}, reviews={"feat": Review(Verdict.CHANGES_REQUESTED)}, rounds=3)
    assert action(work(facts)).code is ErrorCode.REVIEW_ROUND_LIMIT


def test_round_limit_comes_from_config():
    facts = Facts(
        plans={"feat": BUILT_PLAN},
        reviews={"feat": Review(Verdict.CHANGES_REQUESTED)},
        rounds=1,
        config=Config(max_review_rounds=1),
    )
    assert action(work(facts)).code is ErrorCode.REVIEW_ROUND_LIMIT


def test_approved_dispatches_finalize_in_main_checkout_naming_the_archive():
    facts = Facts(plans={"feat": BUILT_PLAN}, reviews={"feat": Review(Verdict.APPROVED)})
    result = action(work(facts))
    assert (result.step, result.subfolder) == (Step.FINALIZE, None)
    assert "done/005-feat/" in result.note


def test_approved_with_uncommitted_user_files_in_main_sends_no_finalizer():
    """The finalize would refuse to merge over them, three times; the planner says so before sending it."""

    def approved(dirty: str) -> Facts:
        reviews = {"feat": Review(Verdict.APPROVED)}
        return Facts(plans={"feat": BUILT_PLAN}, reviews=reviews, main_dirty=(dirty,))

    result = action(work(approved("notes.txt")))
    assert isinstance(result, Error) and (result.code, result.slug) == (ErrorCode.FINALIZE_REFUSED, "feat")
    assert "notes.txt" in result.message
    # the roadmap's own `[>]` claim is the planner's: it does not hold the finalize back
    assert action(work(approved("todos/roadmap.md"))).step is Step.FINALIZE


# --- agents and fallback --------------------------------------------------------------------------


def test_unavailable_preferred_agent_falls_back_to_the_next_in_the_row():
    result = action(work(Facts(down=dict([down("gemini")]))))
    assert (result.agent, result.thinking_mode) == ("claude", "med")


def test_expired_unavailability_counts_as_available():
    result = action(work(Facts(down=dict([down("gemini", minutes=-5)]))))
    assert result.agent == "gemini"


def test_no_agent_available_asks_the_orchestrator_to_do_it_itself():
    facts = Facts(down=dict([down("gemini"), down("claude"), down("codex", reason="rate_limited")]))
    result = action(work(facts))
    assert isinstance(result, RunYourself)
    assert (result.step, result.subfolder) == (Step.BUILD, "trees/feat")
    assert {u.agent for u in result.unavailable} == {"gemini", "claude", "codex"}


def used(agent: str, *percents: float, resets_in: int = 120) -> tuple[str, tuple[UsageWindow, ...]]:
    """`agent`'s windows `w0`, `w1`, ... used `percents`, each resetting `resets_in` minutes after NOW."""
    resets = NOW + timedelta(minutes=resets_in)
    seen = NOW - timedelta(minutes=1)
    return agent, tuple(UsageWindow(agent, f"w{i}", p, resets, seen) for i, p in enumerate(percents))


@pytest.mark.parametrize(
    ("usage", "agent"),
    [
        ([used("gemini", 50, 20)], "gemini"),  # under the headroom (90) in every window
        ([used("gemini", 95)], "claude"),  # over: the next agent of the row, under (no usage on record)
        ([used("gemini", 90)], "claude"),  # at the headroom is not under it
        ([used("gemini", 10, 92)], "claude"),  # one window over is enough
        ([used("gemini", 95), used("claude", 91, 5)], "codex"),
        ([used("gemini", 95), used("claude", 89.9)], "claude"),
        ([used("gemini", 95, resets_in=-1)], "gemini"),  # its window reset: preferred again
        ([used("gemini", 95), used("claude", 100, resets_in=0)], "claude"),  # resets exactly now
        ([used("codex", 99)], "gemini"),  # an agent further down the row changes nothing
        ([], "gemini"),
    ],
)
def test_an_agent_under_its_headroom_goes_before_one_over_it(usage, agent):
    result = action(work(Facts(used=dict(usage))))
    assert isinstance(result, Dispatch)
    assert result.agent == agent
    assert result.note is None  # the agent chosen is under its headroom


def test_when_every_available_agent_is_over_the_first_still_takes_the_step_with_a_note():
    over = dict([used("gemini", 95), used("claude", 93), used("codex", 99)])
    result = action(work(Facts(used=over)))
    assert isinstance(result, Dispatch)
    assert (result.agent, result.thinking_mode) == ("gemini", "med")
    assert result.note is not None and "gemini" in result.note and "95%" in result.note

    result = action(work(Facts(used=over, down=dict([down("gemini")]))))
    assert result.agent == "claude" and "claude" in (result.note or "")


def test_the_near_limit_note_comes_after_the_steps_own_note():
    approved = Facts(
        reviews={"feat": Review(Verdict.APPROVED)}, plans={"feat": BUILT_PLAN, "other": OPEN_PLAN}
    )
    over = dict([used("claude", 95), used("gemini", 95), used("codex", 95)])
    result = action(work(replace(approved, used=over)))
    assert result.step is Step.FINALIZE
    own, near = result.note.splitlines()
    assert own == action(work(approved)).note and "claude" in near


def test_usage_never_brings_back_an_unavailable_agent():
    facts = Facts(down=dict([down("gemini"), down("claude"), down("codex")]), used=dict([used("gemini", 1)]))
    assert isinstance(action(work(facts)), RunYourself)


@pytest.mark.parametrize(
    ("headroom", "agent"), [(96, "gemini"), (95, "claude"), (50, "claude"), (100, "gemini")]
)
def test_the_headroom_comes_from_config(headroom, agent):
    facts = Facts(used=dict([used("gemini", 95), used("claude", 40)]), config=Config(headroom=headroom))
    assert action(work(facts)).agent == agent


def test_config_agent_list_removes_agents_from_every_row():
    facts = Facts(config=Config(agents=("claude", "codex")))
    assert action(work(facts)).agent == "claude"


# --- next_prepare ----------------------------------------------------------------------------------


def test_prepare_picks_first_unprepared_open_item_active_first():
    facts = Facts(
        roadmap_text="- [ ] b\n- [>] a\n- [ ] c\n",
        requirements={"a", "b"},
        plans={"a": OPEN_PLAN, "b": OPEN_PLAN},
    )
    assert action(decide_prepare(facts)).slug == "c"


def test_prepare_with_everything_prepared_reports_the_first_open_item():
    facts = Facts(
        roadmap_text="- [ ] b\n- [>] a\n", requirements={"a", "b"}, plans={"a": OPEN_PLAN, "b": OPEN_PLAN}
    )
    assert action(decide_prepare(facts)) == Prepared("a")


def test_prepare_skips_archived_items_and_reports_no_work():
    facts = Facts(roadmap_text="- [>] feat\n", archives={"feat": "done/001-feat/"})
    assert action(decide_prepare(facts)).code is ErrorCode.NO_WORK


def test_prepare_dispatches_requirements_architect_in_main_with_note():
    result = action(decide_prepare(Facts(requirements=set(), trees={}), "feat"))
    assert (result.step, result.agent, result.thinking_mode, result.subfolder) == (
        Step.REQUIREMENTS,
        "claude",
        "slow",
        None,
    )
    assert "collaborator" in result.note


@pytest.mark.parametrize("plan", [None, PlanStatus(0, 0)])
def test_prepare_dispatches_plan_architect_when_plan_missing_or_without_tasks(plan):
    result = action(decide_prepare(Facts(plans={"feat": plan}, trees={}), "feat"))
    assert result.step is Step.PLAN and result.subfolder is None


def test_prepare_architect_falls_back_to_gemini_then_self():
    facts = Facts(requirements=set(), down=dict([down("claude")]))
    assert action(decide_prepare(facts, "feat")).agent == "gemini"
    facts.down = dict([down("claude"), down("gemini")])
    result = action(decide_prepare(facts, "feat"))
    assert isinstance(result, RunYourself) and result.again == call("next_prepare")


def test_prepare_has_no_effects():
    assert decide_prepare(Facts(), "feat").effects == ()


def test_prepare_without_roadmap_is_no_work():
    assert action(decide_prepare(Facts(roadmap_text=None))).code is ErrorCode.NO_WORK


def test_ready_items_once_the_items_finalized_are_delivered_come_in_roadmap_order():
    """What a run claims ahead while `feat` is finalized: `after` waits for feat, so it is ready only once
    feat is delivered, and then it comes before `last` (roadmap order), as it will for the lane feat frees."""
    roadmap = "- [>] feat — the feature\n- [ ] after (after: feat) — next\n- [ ] last — later\n"
    facts = Facts(roadmap_text=roadmap)
    assert ready_items(facts) == ("feat", "last")
    assert ready_items(facts, frozenset({"feat"})) == ("after", "last")
    assert ready_items(replace(facts, bugs=1), frozenset({"feat"}))[0] == ""  # the bug list first
    feat = frozenset({"feat"})
    assert next_item_after(facts, feat, feat) is None  # `after` is next, but it waits for feat
    assert next_item_after(facts, feat, feat | {"after"}) == "last"  # `after` has a lane of its own
    independent = Facts(roadmap_text="- [>] feat — the feature\n- [ ] after — next\n- [ ] last — later\n")
    assert next_item_after(independent, feat, feat) == "after"
    assert next_item_after(replace(independent, bugs=1), feat, feat) is None  # the bug list comes next
