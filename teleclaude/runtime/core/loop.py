"""What `teleclaude run` does next, decided from the facts of a moment: the planner's answer, a worker's
event and session, the lanes in flight, the agents' availability, the clock, the run's settings.

Every rule of the loop lives here as a pure function that returns a value (start, wait for a twin, ask
again, rest until T, prepare, end, stop with why); `runtime/serial.py` and `runtime/parallel.py` gather the
facts (the planner, the session store, tmux, the clock) and carry the values out. Tested row by row in
tests/unit/test_run_loop.py, as `planner/core/decide.py` is in test_decide.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import TypeGuard

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import Action, Complete, Dispatch, Prepared, RunYourself
from teleclaude.planner.core.render import to_text
from teleclaude.runtime.core.sessions import EventKind, Session, SessionState
from teleclaude.runtime.core.stops import (
    REPEAT_LIMIT,
    Outcome,
    RunSettings,
    Stop,
    failed_twice_text,
    parked_stop,
    repeated_text,
    resume_command,
)
from teleclaude.runtime.core.supervision import bare_command

UNATTENDED = "(unattended: nobody will answer questions; decide yourself and write the file)"
LIMIT_MARGIN = 1.0  # seconds after an agent's reset before the planner is asked again
WAIT_ATTEMPTS = 3  # waits failing in a row (tmux or the database) before the run stops
# seconds between asks for the ready items (a planner call, git) while a lane is free and no lane left since
# the last ask: only a change outside this run (a roadmap edited, another run's item delivered) is seen then
READY_AGAIN = 10.0


# --- a worker's events --------------------------------------------------------------------------------------


class Reaction(Enum):
    WAIT = "wait"  # the worker goes on: keep waiting
    NEXT = "next"  # the worker is through: end its session (if still there) and ask the planner again
    FAILED = "failed"  # the same, but it failed: a second failure of the same step in a row stops the run
    ATTENTION = "attention"  # stop the run and leave the worker running for a human


def react(kind: EventKind, session: Session) -> Reaction:
    """What the loop does on each event of a worker: the whole policy, in one place."""
    match kind:
        case EventKind.TURN_ENDED:
            # Back at its prompt. During a post-report cycle the runtime decides (FINISHED or DIRECTED);
            # a worker typed into since then is working again.
            if session.cycle_started_at is not None or session.state is SessionState.RUNNING:
                return Reaction.WAIT
            return Reaction.NEXT
        case EventKind.FINISHED:  # the runtime ended it: the files say the step is done
            return Reaction.NEXT
        case EventKind.EXITED:
            return Reaction.FAILED if session.state is SessionState.ERRORED else Reaction.NEXT
        case EventKind.RATE_LIMITED:  # the agent is marked unavailable already: the planner falls back
            return Reaction.NEXT
        case EventKind.ERRORED:
            return Reaction.FAILED
        case EventKind.NEEDS_ATTENTION:
            return Reaction.ATTENTION
        case _:  # REMINDED, DIRECTED, DIGEST: shown; the runtime is handling the worker
            return Reaction.WAIT


def implied_event(session: Session) -> EventKind | None:
    """The event a session's state stands for, when its event went to another reader or an earlier run."""
    return {
        SessionState.TURN_ENDED: EventKind.TURN_ENDED,
        SessionState.RATE_LIMITED: EventKind.RATE_LIMITED,
        SessionState.NEEDS_ATTENTION: EventKind.NEEDS_ATTENTION,
        SessionState.DONE: EventKind.EXITED,
        SessionState.CANCELLED: EventKind.EXITED,
        SessionState.ERRORED: EventKind.ERRORED,
    }.get(session.state)


NEVER_GOT_ITS_COMMAND = "it never got its command (its starter was stopped)"


def unheard_event(session: Session, stuck: bool) -> tuple[EventKind, str] | None:
    """The event a watched session stands for when none of its own was heard this wait: its state's
    (`implied_event`), or an exit when it is `stuck` PENDING (`stuck_pending`); None: it goes on."""
    kind = implied_event(session)
    if kind is not None:
        return kind, session.last_error
    if stuck:
        return EventKind.EXITED, NEVER_GOT_ITS_COMMAND
    return None


def stuck_pending(session: Session, starter_gone: bool, now: datetime, startup_timeout: float) -> bool:
    """A session its starter left PENDING: the starter died (its start lock is free; `starter_gone` is
    also False when the store says the session left PENDING meanwhile), or a start is long over."""
    if session.state is not SessionState.PENDING:
        return False
    if starter_gone:
        return True
    return now - session.created_at > timedelta(seconds=startup_timeout * 2)


def wait_failed(waited: Error, failures: int) -> Stop | None:
    """A wait that failed `failures` times in a row: look again (None: a pane that vanished while tmux was
    asked about it), unless it keeps failing or a session is unknown."""
    if failures >= WAIT_ATTEMPTS or waited.code is ErrorCode.UNKNOWN_SESSION:
        return Stop(Outcome.ERROR, to_text(waited))
    return None


# --- retries ------------------------------------------------------------------------------------------------


StepKey = tuple[str, str]  # (bare command, slug): one step of the roadmap, whichever agent does it
GOOD = (EventKind.TURN_ENDED, EventKind.FINISHED)  # how a session that did its step ends


def step_key(command: str, slug: str) -> StepKey:
    return bare_command(command), slug


@dataclass
class Retries:
    """The retry policy: a step that fails twice in a row, or ends its turn REPEAT_LIMIT times in a row
    without the files moving on, stops the run."""

    last_failed: StepKey | None = None  # the step whose session failed last
    turns: list[StepKey] = field(default_factory=list)  # one step's sessions in a row that ended their turn

    def repeating(self, step: StepKey) -> bool:
        return len(self.turns) >= REPEAT_LIMIT and self.turns[-1] == step

    def start_failed(self, step: StepKey) -> bool:
        """A start failed: True when it is the second failure of this step in a row."""
        again = self.last_failed == step
        self.last_failed = step
        return again

    def through(self, step: StepKey, kind: EventKind, failed: bool) -> bool:
        """A session of `step` is through; True when it failed and the one before it failed too."""
        again = failed and self.last_failed == step
        self.last_failed = step if failed else None
        if kind in GOOD:
            self.turns = [*self.turns, step] if self.turns[-1:] == [step] else [step]
        else:
            self.turns = []
        return again


@dataclass(frozen=True)
class Handled:
    """One worker session of this run and how it ended."""

    session: Session
    kind: EventKind | None  # the event that ended it (None: ended because it never got started)
    detail: str = ""
    adopted: bool = False  # started by an earlier run (or someone else) and taken over


def works_elsewhere(session: Session, history: Iterable[Handled]) -> bool:
    """The agent did steps of other items in this run: the item, not the agent, fails."""
    return any(
        h.session.agent == session.agent and h.session.slug != session.slug and h.kind in GOOD
        for h in history
    )


def failed_again(
    session: Session,
    kind: EventKind,
    reaction: Reaction,
    retries: Retries,
    detail: str,
    history: Sequence[Handled],
) -> Stop | None:
    """A worker through (its session ended): the run's stop when its step failed twice in a row."""
    if not retries.through(step_key(session.command, session.slug), kind, failed=reaction is Reaction.FAILED):
        return None
    text = failed_twice_text(session, kind, detail, works_elsewhere=works_elsewhere(session, history))
    return Stop(Outcome.ERROR, text)


# --- the planner's answer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Start the worker of `action` (`args`: an architect's unattended arguments)."""

    action: Dispatch
    args: str | None = None


@dataclass(frozen=True)
class AskAgain:
    """Nothing to do for this answer: ask the planner again."""


@dataclass(frozen=True)
class Prepare:
    """--prepare: ask next_prepare for `slug`'s architect and start it."""

    slug: str


@dataclass(frozen=True)
class WaitOut:
    """Every agent that may take the step is out: rest until the first is back (`wait_out`)."""

    action: RunYourself


@dataclass(frozen=True)
class GiveUp:
    """An answer the run cannot carry out: `error_stop` says how, once the shell knows whether the item's
    gate keeps failing past max_review_rounds."""

    action: Action


@dataclass(frozen=True)
class DropLane:
    """A lane's item is through (delivered, or the bug list emptied): the lane frees up."""


Next = Start | AskAgain | Prepare | WaitOut | GiveUp | Stop


def finished(action: Action, slug: str | None, roadmap_exists: bool) -> bool:
    """NO_WORK for the whole roadmap; it also answers a missing roadmap: an error, not a finished run."""
    return isinstance(action, Error) and action.code is ErrorCode.NO_WORK and slug is None and roadmap_exists


def wants_preparing(action: Action) -> TypeGuard[Error]:
    """An item refused for want of its requirements or plan: its next step is its architect's."""
    return (
        isinstance(action, Error)
        and action.code is ErrorCode.NOT_PREPARED
        and action.next_step is not None
        and action.next_step.tool == "next_prepare"
    )


def answer(action: Action, settings: RunSettings, roadmap_exists: bool) -> Next:
    """What the run does with one answer of next_work (the serial loop, or a lane with nothing in flight)."""
    match action:
        case Dispatch():
            return Start(action)
        case Complete(slug=slug, archive=archive) if settings.slug is not None:
            return Stop(Outcome.COMPLETE, f"{slug} is delivered to {archive}")
        case Complete():  # an item of the roadmap is done: on to the next
            return AskAgain()
        case Error() if finished(action, settings.slug, roadmap_exists):
            return Stop(Outcome.COMPLETE, "every roadmap item is done")
        case Error(code=ErrorCode.NOT_PREPARED, slug=unprepared) if settings.prepare and unprepared:
            return Prepare(unprepared)
        case RunYourself():
            return WaitOut(action)
        case Error(slug=unprepared) if unprepared and wants_preparing(action):
            again = resume_command(replace(settings, slug=unprepared, prepare=True))
            return Stop(Outcome.ERROR, to_text(action), f"prepare it with its architect: {again}")
        case _:
            return GiveUp(action)


def bug_list_done(slug: str, action: Action) -> bool:
    """The bug list's lane ("") is answered with another item's step, or none: the bug list is done and its
    lane frees up (the item answered is another lane's)."""
    return slug == "" and not (isinstance(action, Dispatch) and action.slug == "")


def lane_answer(action: Action, prepare: bool) -> Next | DropLane:
    """What a lane does with next_work's answer for its item (after `bug_list_done`)."""
    match action:
        case Dispatch():
            return Start(action)
        case Complete():  # its finalize cleaned up here and on the computers its workers ran on
            return DropLane()
        case Error(code=ErrorCode.NOT_PREPARED) if prepare:
            return Prepare(action.slug or "")
        case RunYourself():
            return WaitOut(action)
        case _:
            return GiveUp(action)


def prepared_answer(action: Action, refusal: Error, slug: str) -> Next:
    """--prepare: what the serial run does with next_prepare's answer for an item next_work refused."""
    match action:
        case Dispatch():
            return Start(action, args=f"{slug} {UNATTENDED}")
        case RunYourself():
            return WaitOut(action)
        case Prepared():  # prepared, and still refused: what next_work says is for a human
            return Stop(Outcome.ERROR, to_text(refusal))
        case _:
            return Stop(Outcome.ERROR, to_text(action))


def lane_prepared(action: Action, slug: str) -> Start | Stop:
    """--prepare: what a lane does with next_prepare's answer for its item: its architect, else it parks
    (a lane does not wait for an agent's reset to prepare)."""
    match action:
        case Dispatch():
            return Start(action, args=f"{slug} {UNATTENDED}")
        case RunYourself():
            return Stop(Outcome.SELF, to_text(action))
        case _:
            return Stop(Outcome.ERROR, to_text(action))


def error_stop(action: Action, keeps_failing: bool) -> Stop:
    """An answer the run cannot carry out; an item whose gate keeps failing past max_review_rounds needs
    a human's attention. Main moved behind teleclaude's back (planner/mainref.py) is every lane's answer:
    the whole run stops, not one lane."""
    if isinstance(action, Error) and action.code is ErrorCode.MAIN_MOVED:
        return Stop(Outcome.NEEDS_ATTENTION, to_text(action), whole_run=True)
    if isinstance(action, Error) and keeps_failing:
        what = f"the gate of {action.slug} keeps failing past max_review_rounds\n{to_text(action)}"
        return Stop(Outcome.NEEDS_ATTENTION, what)
    return Stop(Outcome.ERROR, to_text(action))


# --- agents out: wait until one is back ---------------------------------------------------------------------


@dataclass(frozen=True)
class RestUntil:
    """Wait (or rest the lane) until `agent`, the first of the step's row to come back, is back; or until
    any agent of the row that was out (`waits_on`) is marked back by hand (`rest_over`)."""

    agent: str
    until: datetime
    waits_on: frozenset[str] = frozenset()


def first_back(action: RunYourself) -> tuple[str, datetime] | None:
    """The agent of the step's row that comes back first from its limit, and when."""
    if not action.unavailable:
        return None
    first = min(action.unavailable, key=lambda gone: gone.until)
    return first.agent, first.until


def wait_out(action: RunYourself, now: datetime, limit_wait: float) -> RestUntil | Stop:
    """Rest until the first agent of the step's row is back; SELF at once when none is out for a while
    (no agent staffs the step), when waiting is off (`limit_wait` 0) or that is further than `limit_wait`."""
    back = first_back(action)
    if back is None or (back[1] - now).total_seconds() > limit_wait:
        return Stop(Outcome.SELF, to_text(action))
    return RestUntil(*back, frozenset(gone.agent for gone in action.unavailable))


def rest_over(rest: RestUntil, now: datetime, out: Collection[str] | None = None) -> bool:
    """The rest is over: its agent's reset is past, with the margin the store needs (it counts an agent out
    until the second it names); or an agent it waits on is no longer among those `out` now (marked back:
    `teleclaude agents available`, the board's `v`). `out` None: not known (the store could not be read)."""
    if out is not None and not rest.waits_on <= frozenset(out):
        return True
    return rest.until + timedelta(seconds=LIMIT_MARGIN) <= now


# --- starting a worker --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitFor:
    """A live worker is already doing the step (started by an earlier run or someone else): wait for it."""

    session: Session


def may_start(
    action: Dispatch, twin: Session | None, retries: Retries, started: int, max_steps: int, described: str
) -> WaitFor | Stop | None:
    """None when a worker may be started for `action` (`started`: this run's sessions and starts under
    way; `described`: the planner's line for it); else the `twin` already doing the step (one worker per
    step), or why not."""
    if twin is not None:
        return WaitFor(twin)
    if retries.repeating(step_key(action.command, action.slug)):
        return Stop(Outcome.NEEDS_ATTENTION, repeated_text(action))
    if started >= max_steps:
        return Stop(Outcome.MAX_STEPS, f"--max-steps {max_steps} reached before {described}")
    return None


@dataclass(frozen=True)
class TwinFirst:
    """Another run started the step first: wait for its worker (asked again when it is gone)."""


TRIED_AGAIN = (ErrorCode.TMUX_FAILED, ErrorCode.COMPUTER_UNREACHABLE, ErrorCode.SANDBOX_RACED)


def refused(error: Error, step: StepKey, retries: Retries) -> TwinFirst | AskAgain | Stop:
    """The runtime refused a start: another run got there first, or tmux, ssh or the making of its sandbox
    failed (once: try again). Any other refusal is the item's stop, its error and next step as said: a
    start again would fail the same (a worktree whose HEAD a worker pointed at another branch, a CLI
    blocked by a dialog). That stop is never the whole run's (`ends_the_run`): a lane parks its item and
    the other lanes go on; a run of that one item ends with it."""
    if error.code is ErrorCode.ALREADY_RUNNING:
        return TwinFirst()
    if error.code in TRIED_AGAIN and not retries.start_failed(step):
        return AskAgain()
    return Stop(Outcome.ERROR, to_text(error))


def counts_as_started(code: ErrorCode) -> bool:
    """A refused start that did start a session: a dialog or its exit stopped it (--max-steps counts it)."""
    return code is ErrorCode.WORKER_BLOCKED


def serial_adopts(session: Session, slug: str | None) -> bool:
    """A run started again watches the project's live workers before it asks the planner anything (of its
    item only, with a slug): a killed run neither loses a worker nor starts a second one for a step."""
    return slug is None or session.slug == slug


# --- [checks] in a run --------------------------------------------------------------------------------------


def sets_up(setup: bool, action: Dispatch) -> bool:
    """[checks] setup runs before the first worker of an item whose step is in its new worktree."""
    return setup and action.subfolder == layout.worktree(action.slug)


def gate_first(reaction: Reaction, kind: EventKind) -> bool:
    """A worker back at its prompt and through (not failed, not exited) meets [checks] gate first."""
    return reaction is Reaction.NEXT and kind is EventKind.TURN_ENDED


def sends_back(count: int, max_nudges: int) -> bool:
    """A red gate sends the worker back to fix it `max_nudges` times; then the review follows."""
    return count < max_nudges


# --- lanes (--parallel N) -----------------------------------------------------------------------------------


def ask_ready(lanes: frozenset[str], asked: frozenset[str], since: float, parallel: int) -> bool:
    """Whether a free lane asks for the ready items now (`since`: seconds since the last ask): not while
    every lane is taken, nor while no lane left since the last ask (what was not ready then is not ready
    now), unless READY_AGAIN passed (a roadmap edited, another run's item delivered)."""
    if len(lanes) >= parallel:
        return False
    return not (lanes and lanes == asked and since < READY_AGAIN)


def new_lanes(
    lanes: Mapping[str, str],
    ready: Sequence[str],
    parked: Iterable[str],
    parallel: int,
    remote_lanes: Mapping[str, int],
) -> dict[str, str]:
    """The ready items that get a lane, each with its computer: `lanes` (item -> computer) in flight,
    `remote_lanes` the other computers' lanes in the order of teleclaude.toml. The bug list ("") is worked
    in the main checkout: never on another computer."""
    taken = dict(lanes)
    skip = set(parked)
    added: dict[str, str] = {}
    for slug in ready:
        if len(taken) >= parallel:
            break
        if slug in taken or slug in skip:
            continue
        computer = free_computer(taken.values(), remote_lanes) if slug else "local"
        taken[slug] = added[slug] = computer
    return added


def free_computer(in_use: Iterable[str], remote_lanes: Mapping[str, int]) -> str:
    """The first other computer with a lane to spare, else this machine."""
    used = Counter(in_use)
    for name, lanes in remote_lanes.items():
        if used[name] < lanes:
            return name
    return "local"


def computer_for(
    lane_computer: str, remote_agents: Mapping[str, Iterable[str]], action: Dispatch, tree_of: str | None
) -> str:
    """The lane's computer for a step in the item's worktree (`tree_of`: the item whose worktree the step's
    folder is) by an agent installed there; else here."""
    agents = remote_agents.get(lane_computer)
    if agents is None or tree_of != action.slug or action.agent not in agents:
        return "local"
    return lane_computer


def adopts(session: Session, parked: Iterable[str], lane_busy: bool) -> bool:
    """A live worker of the project no lane waits on (left by an earlier run, or a run beside this one) gets
    a lane: `parallel` caps the project's workers, not this run's. Not a parked item's, nor one a lane is
    busy with (starting a worker, or one started ahead: that PENDING session is its own)."""
    return session.slug not in set(parked) and not lane_busy


def ended_first(ending: StepKey, starting: StepKey, computers: bool = False) -> bool:
    """Whether a worker being ended is ended before a worker is started for `starting`: one of that very step
    (it holds the step until it is ended: a retry waits for it); another step's, or another item's, is ended
    beside the start (thirty hand-overs waited for each other's tmux calls). With other computers
    (`computers`) every end comes first: an end there takes an ssh channel, and ends beside starts made sshd
    refuse one past `MaxSessions` (a killed client's channel closes there a moment after it is counted free
    here)."""
    return computers or ending == starting


def refill(lanes: frozenset[str], filled: frozenset[str], refilled: bool) -> bool:
    """A lane left since the lanes were filled (its item delivered or parked): its next item is started
    before the next wait, once in a row."""
    return bool(lanes) and lanes < filled and not refilled


@dataclass(frozen=True)
class LanesWait:
    """How the lanes wait this round: on their `workers`, or on the `starts` under way, or they `rest`
    (every lane waits for an agent's reset), each for at most `timeout` seconds."""

    timeout: float
    workers: bool = False
    starts: bool = False
    rest: bool = False


START_LOOK = 0.2  # seconds per wait while a lane's worker is being started


def lanes_wait(workers: bool, starts: bool, tick: float, asks: bool = False) -> LanesWait:
    """While a start is under way the lanes look often: its worker joins the wait as soon as it has its
    command. A lane's next_work being asked (`asks`) wakes the wait on its workers when it is answered, and
    without workers it is waited for as a start is."""
    if not workers:
        return LanesWait(tick, starts=True) if starts or asks else LanesWait(tick, rest=True)
    return LanesWait(min(tick, START_LOOK) if starts else tick, workers=True)


def idle(parked: Mapping[str, Stop]) -> Stop | None:
    """No lane in flight and nothing ready: the parked items' stop, else None (the planner says why)."""
    return parked_stop(parked) if parked else None
