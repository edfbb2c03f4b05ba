"""Workers started ahead (`[runtime] warm_start`): which step a worker is started to its prompt for while the
step before it works, when the one started ahead is given its step, and when the next item is claimed ahead.
Pure; the shell is runtime/serial.py (`_warm_after`, `_claim_warm`) and runtime/parallel.py
(`_next_item_ahead`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from teleclaude.config.matrix import Config, choose_agent
from teleclaude.planner.core.model import Action, Dispatch, Step, Unavailability, UsageWindow
from teleclaude.runtime.core.loop import GOOD, Handled
from teleclaude.runtime.core.supervision import bare_command

# --- workers started ahead ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Successor:
    """The step next_work named after a step of the same item ended well in this run: the guess for the
    step after that step of the next item (`likely_next`)."""

    dispatch: Dispatch  # without its note
    same_folder: bool  # in the finished step's folder (the item's worktree), else in the main checkout


# the step that follows one done well on the usual path (a build or a fix is reviewed; a reviewed item, or one
# whose merge conflict was fixed, is finalized), and whether in the same folder: the guess before this run
# has seen what follows it (`usual_next`)
USUAL_NEXT: Mapping[Step, tuple[Step, bool]] = {
    Step.BUILD: (Step.REVIEW, True),
    Step.FIX: (Step.REVIEW, True),
    Step.REVIEW: (Step.FINALIZE, False),
    Step.FIX_MERGE: (Step.FINALIZE, False),
}


def usual_next(
    action: Dispatch,
    matrix: Config,
    unavailable: Mapping[str, Unavailability],
    usage: Mapping[str, tuple[UsageWindow, ...]],
    now: datetime,
) -> Successor | None:
    """The usual next step after `action`'s, by the agent the planner would choose for it now (its matrix
    row's first agent that is in and under the headroom); None after a step without one, or with nobody."""
    usual = USUAL_NEXT.get(action.step)
    if usual is None:
        return None
    step, same_folder = usual
    chosen = choose_agent(matrix, step, unavailable, now, usage)
    if chosen is None:
        return None
    folder = action.subfolder if same_folder else None
    choice = Dispatch(step, action.slug, action.project, chosen.agent, chosen.thinking_mode, folder)
    return Successor(choice, same_folder)


def successor_now(
    action: Dispatch,
    seen: Successor | None,
    matrix: Config,
    unavailable: Mapping[str, Unavailability],
    usage: Mapping[str, tuple[UsageWindow, ...]],
    now: datetime,
) -> Successor | None:
    """The guess for the step after `action`'s: the one seen to follow it in this run while its agent is
    still the one the planner would choose for that step now (not out, not over the headroom when another
    is under it), else the usual next step by the agent chosen now (`usual_next`). A worker is never started
    ahead for an agent that will not be given the step."""
    if seen is not None:
        chosen = choose_agent(matrix, seen.dispatch.step, unavailable, now, usage)
        if chosen is not None and (chosen.agent, chosen.thinking_mode) == (
            seen.dispatch.agent,
            seen.dispatch.thinking_mode,
        ):
            return seen
    return usual_next(action, matrix, unavailable, usage, now)


def likely_next(action: Dispatch, successors: Mapping[str, Successor]) -> Dispatch | None:
    """The step most likely to follow `action` once its worker is through: the one that followed the same
    step of an earlier item in this run, for `action`'s item, in its folder; None when none did."""
    after = successors.get(action.command)
    if after is None or (not after.same_folder and after.dispatch.subfolder is not None):
        return None  # a folder of its own that is not the main checkout: another item's
    folder = action.subfolder if after.same_folder else None
    return replace(after.dispatch, slug=action.slug, project=action.project, subfolder=folder)


def learned(action: Dispatch, history: Sequence[Handled]) -> tuple[str, Successor] | None:
    """`action` follows the step whose worker was through last, of the same item and ended well: (that
    step's bare command, what followed it) to count (`likely_next` takes the most frequent, the first seen
    of a tie: a rejected review does not make a fix the guess after every review); None when no such step."""
    last = next((h for h in reversed(history) if h.session.slug == action.slug), None)
    if last is None or last.adopted or last.kind not in GOOD:
        return None
    same_folder = action.subfolder == last.session.subfolder
    return bare_command(last.session.command), Successor(replace(action, note=None), same_folder)


def most_seen(counted: Counter[Successor] | None) -> Successor | None:
    return counted.most_common(1)[0][0] if counted else None


@dataclass(frozen=True)
class Ahead:
    """Whether workers may be started ahead in this run at all, and whether one more could still be given
    its step (`started`: this run's sessions and starts under way, against --max-steps)."""

    warm_start: bool
    remotes: bool  # other computers: no next item is claimed ahead (a step of it may go to another clone)
    started: int
    max_steps: int

    @property
    def allowed(self) -> bool:
        return self.warm_start and self.started < self.max_steps


def start_ahead(ahead: Ahead, predicted: Dispatch | None) -> Dispatch | None:
    """The worker to start ahead while a step works (`[runtime] warm_start`): its likely next step."""
    return predicted if ahead.allowed else None


def claims(
    predicted: Dispatch, action: Dispatch | None, warm_on: str = "local", start_on: str = "local"
) -> bool:
    """A worker started ahead for `predicted` on computer `warm_on` (the one its lane's step would go to) is
    given `action` only when it is that step (same agent, thinking mode and folder) and goes to that computer
    now (`start_on`: not if the computer dropped meanwhile); else it is ended, never given a step it was
    not started for."""
    return action is not None and replace(action, note=None) == predicted and warm_on == start_on


def catch_up_first(claimed: bool, action: Action) -> bool:
    """A build claimed by a worker started ahead: its worktree, made ahead, first catches up with main."""
    return claimed and isinstance(action, Dispatch) and action.step is Step.BUILD


def claim_next_item(ahead: Ahead, parallel: int, lanes: int, finalizing: int, claimed: int) -> bool:
    """Without --parallel, while an item is finalized, the next ready item is claimed and its first worker
    started ahead, one per item being finalized (off with --parallel: test_parallel once saw a second
    merge fix, cause unknown; speed.md)."""
    return ahead.allowed and not ahead.remotes and parallel <= 1 and lanes > 0 and claimed < finalizing


@dataclass(frozen=True)
class AfterStart:
    """What a lane's worker, once started, sets going ahead: the worker of its item's likely next step
    (`warm`), the next item claimed (`claim`: it is a finalize)."""

    warm: bool
    claim: bool


def after_start(action: Dispatch, args: str, adopted: bool) -> AfterStart:
    """Nothing for a worker this run did not start (adopted); no worker ahead after an architect's
    unattended start (its arguments are more than its item's slug)."""
    if adopted:
        return AfterStart(False, False)
    return AfterStart(args == action.slug, action.step is Step.FINALIZE)
