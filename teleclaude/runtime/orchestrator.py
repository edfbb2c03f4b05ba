"""`teleclaude run`: the orchestrator loop, unattended. Ask `next_work`, start the worker it names, wait for
the worker's events, end its session, ask again, until the roadmap is done or a human is needed.

The files decide every step; this loop only keeps the project's worker count at `--parallel` (default one)
and reacts to events (`react`, one table). It keeps no state of its own between runs: a restarted run
adopts the live sessions of the project from the runtime's database before it asks the planner anything,
so a killed run that is started again neither loses a worker nor starts a second one for the same step.
"""

from __future__ import annotations

import secrets
import shlex
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Protocol

from teleclaude.adapters.sessions_db import RunRow
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import StoreError
from teleclaude.config.checks import Checks
from teleclaude.config.matrix import Config
from teleclaude.config.notify import Notice
from teleclaude.config.parse import ConfigError
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.checks import describe
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import (
    Action,
    Dispatch,
    Prepared,
    RunYourself,
    Step,
    UsageWindow,
)
from teleclaude.planner.core.render import to_text, usage_text
from teleclaude.planner.core.timeparse import format_duration, format_utc
from teleclaude.runtime import gating
from teleclaude.runtime.api import Runtime, guarded
from teleclaude.runtime.core import ahead as ahead_rules
from teleclaude.runtime.core import loop as rules
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.ahead import (
    USUAL_NEXT,
    Successor,
    likely_next,
    successor_now,
    usual_next,
)
from teleclaude.runtime.core.loop import (
    LIMIT_MARGIN,
    READY_AGAIN,
    UNATTENDED,
    WAIT_ATTEMPTS,
    AskAgain,
    DropLane,
    GiveUp,
    Handled,
    Prepare,
    Reaction,
    RestUntil,
    Retries,
    Start,
    StepKey,
    TwinFirst,
    WaitFor,
    WaitOut,
    first_back,
    implied_event,
    react,
)
from teleclaude.runtime.core.sessions import Ended, Event, EventKind, Session, SessionState, Started, Waited
from teleclaude.runtime.core.stops import (
    INTERRUPTED,
    REPEAT_LIMIT,
    Outcome,
    RunSettings,
    Stop,
    advice,
    attention_text,
    ends_the_run,
    failed_twice_text,
    headline,
    item,
    parked_stop,
    repeated_text,
    resume_command,
)
from teleclaude.runtime.core.supervision import bare_command
from teleclaude.runtime.launcher import Warm, starter_gone
from teleclaude.runtime.observer import local_zone
from teleclaude.runtime.remote import item_slug

# the loop's values and rules live in runtime/core/ (loop.py, stops.py, ahead.py): named here too, for the
# front ends and the tests that import them from the run
__all__ = [
    "LIMIT_MARGIN",
    "READY_AGAIN",
    "REPEAT_LIMIT",
    "TICK",
    "UNATTENDED",
    "USUAL_NEXT",
    "WAIT_ATTEMPTS",
    "Countdown",
    "Handled",
    "Outcome",
    "Progress",
    "Reaction",
    "Retries",
    "RunReport",
    "RunSettings",
    "StatusLine",
    "Stop",
    "Successor",
    "advice",
    "attention_text",
    "cut",
    "failed_twice_text",
    "first_back",
    "headline",
    "implied_event",
    "likely_next",
    "parked_stop",
    "react",
    "repeated_text",
    "report",
    "resume_command",
    "run",
    "successor_now",
    "usual_next",
    "where",
]

TICK = 1.0  # seconds per wait: how often the status line is redrawn

# --- what a run returns and shows --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport:
    outcome: Outcome
    steps: int  # sessions this run started
    action: Action | None  # the planner's last answer
    session: Session | None  # the last worker session
    text: str  # the report, first line `OUTCOME:` (or the planner's `SELF:` / `ERROR: CODE`)
    history: tuple[Handled, ...] = ()
    delivered: tuple[str, ...] = ()  # archive folders that appeared during this run, e.g. "done/001-x/"
    run_id: str = ""  # its record in the session store (`teleclaude report` draws it); "" if not recorded

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code


class StatusLine(Protocol):
    """What the live status line shows: `Progress` of a worker, or a `Countdown` to an agent's reset."""

    def line(self) -> str: ...
    def key(self) -> str: ...  # the line without the clock: a plain log prints it again when this changes


@dataclass(frozen=True)
class Progress:
    """What the live status line shows about the worker being waited for."""

    step: int
    session: Session
    elapsed: float  # seconds since the session was started
    others: tuple[Session, ...] = ()  # the other workers in flight (--parallel)
    digest: str = ""  # the first line of the last digest the runtime sent about a worker
    parked: tuple[str, ...] = ()  # --parallel: the items parked, each `SLUG (its first report line)`
    computers: tuple[str, ...] = ("local",)  # the names meaning this machine ([runtime] computers)
    usage: str = ""  # the agents in use, each with its windows: `AGENT 5h 83% ↺ 19:00 · 7d 41%`

    def line(self) -> str:
        return f"{self.key()} · {format_duration(self.elapsed)}"

    def key(self) -> str:
        """The line without the clock: a plain log prints it again only when this changes."""
        s = self.session
        agent = s.agent if s.computer in self.computers else f"{s.agent}@{s.computer}"
        text = f"[{self.step}] {s.command} {s.slug} · {agent} · {s.state.value}".replace("  ", " ")
        if s.nudges:
            text += f" · {s.nudges} nudge{'s' if s.nudges > 1 else ''}"
        if s.status_text:
            text += f" · {s.status_text.splitlines()[0][:60]}"
        if self.others:
            text += " | also " + ", ".join(f"{o.command} {o.slug} ({o.state.value})" for o in self.others)
        if self.digest:
            text += f" | digest: {cut(self.digest, 80)}"
        if self.parked:
            text += " | parked: " + ", ".join(item[:60] for item in self.parked)
        if self.usage:  # last: a narrow terminal cuts it before anything above
            text += f" | usage: {self.usage}"
        return text


@dataclass(frozen=True)
class Countdown:
    """The status line while the run waits for an agent to come back from a limit."""

    step: str  # e.g. "build greeting"
    agent: str  # the first agent of the step's row to come back
    until: datetime
    left: float  # seconds

    def line(self) -> str:
        return f"{self.key()} · {format_duration(self.left)} left"

    def key(self) -> str:
        return f"waiting for {self.agent} (out until {format_utc(self.until)}) to do {self.step}"


# --- the loop ----------------------------------------------------------------------------------------------


def run(
    project: Path,
    slug: str | None,
    prepare: bool,
    max_steps: int,
    runtime: Runtime,
    show: Callable[[str], None],
    status: Callable[[StatusLine], None],
    tick: float = TICK,
    verbose: bool = False,
    parallel: int = 1,
    wait_for_limits: bool = True,
    rehearsal_of: Path | None = None,
    notify: Callable[[Notice], None] | None = None,
) -> RunReport:
    """Drive `slug` (or the whole roadmap) until COMPLETE, SELF, ERROR, a stuck worker or `max_steps`.

    `show` gets the log lines (each answer, start and event), `status` the live state of the worker being
    waited for, every `tick` seconds; `verbose` also shows the planner's full answers. Ctrl-C returns an
    INTERRUPTED report and leaves every worker running. `parallel` > 1 (without a slug) keeps up to that
    many roadmap items in flight at once (`_Lanes`). When every agent that may take a step is out, the run
    waits for the first to come back (at most `[runtime] limit_wait`), unless `wait_for_limits` is False.
    `rehearsal_of` is the user's checkout when `project` is its clone (`run --stand-ins`): the report's next
    commands are for that checkout. `notify` gets the notices (`[notify]`): it must not block
    (adapters/notify.py `Notifier.post`).
    """
    began = time.monotonic()
    notify = notify or _silent
    root = _checkout_root(Path(project))
    limit_wait = runtime.config.limit_wait if wait_for_limits else 0.0
    settings = RunSettings(root, slug, prepare, max_steps, tick, verbose, parallel, limit_wait, rehearsal_of)
    state = RunState(archived_before=tuple(_archives(root)))
    untrusted = guarded(runtime.config.check_trusted)
    if isinstance(untrusted, Error):  # before the planner claims an item no worker can be started for
        return report(Stop(Outcome.ERROR, to_text(untrusted)), settings, state, runtime)
    kind = _Lanes if slug is None else _Loop  # a whole roadmap: items go on while one is parked
    loop = kind(settings, state, runtime, show, status, notify=notify)
    run_id = _record_start(runtime, root, slug)
    try:
        with runtime.store.kept_open():
            stop = loop.go()
    except KeyboardInterrupt:
        stop = INTERRUPTED
    finally:
        runtime.context.run_id = ""
    finished = report(stop, settings, state, runtime)
    if stop.outcome is not Outcome.INTERRUPTED:  # Ctrl-C: the user is at the terminal
        elapsed = time.monotonic() - began
        notify(
            notices.run_ended(
                finished.text, state.steps, finished.delivered, elapsed, str(root), stop.outcome.value
            )
        )
    if run_id and not isinstance(
        guarded(runtime.store.end_run, run_id, runtime.clock(), stop.outcome.value), Error
    ):
        finished = replace(finished, run_id=run_id)
    return finished


def _record_start(runtime: Runtime, root: Path, slug: str | None) -> str:
    """A new run in the session store, and its id on every session it starts; "" when the store cannot
    be written (the run goes on without its timeline)."""
    now = runtime.clock()
    run_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    recorded = guarded(runtime.store.add_run, RunRow(run_id, str(root), slug or "", now))
    if isinstance(recorded, Error):
        return ""
    runtime.context.run_id = run_id
    return run_id


STARTING = Stop(Outcome.SELF, "the worker is being started")  # a sentinel of `_launch`: under way
START_LOOK = 0.2  # seconds per wait while a lane's worker is being started
Warming = tuple[Dispatch, Future["Warm | Error"]]  # a worker being started ahead for this step


@dataclass
class RunState:
    """What this run has done so far."""

    archived_before: tuple[str, ...]  # the folders in done/ when the run started
    steps: int = 0
    action: Action | None = None  # the planner's last answer
    session: Session | None = None  # the last worker session
    history: list[Handled] = field(default_factory=list)
    retries: Retries = field(default_factory=Retries)
    digest: str = ""  # the first line of the last digest heard, while its worker is not through
    digest_of: str = ""  # the session that digest is about
    parked: dict[str, Stop] = field(default_factory=dict)  # --parallel: item -> why it cannot go on
    starting: int = 0  # --parallel: worker starts under way in the background (count towards --max-steps)


@dataclass
class _Loop:
    settings: RunSettings
    state: RunState
    runtime: Runtime
    show: Callable[[str], None]
    status: Callable[[StatusLine], None]
    usage_read: tuple[float, dict[str, tuple[UsageWindow, ...]]] = (float("-inf"), {})  # when, what
    # step -> how often each step followed it in this run (`_learn`)
    successors: dict[str, Counter[Successor]] = field(default_factory=dict)
    warming: Warming | None = None  # the worker started ahead for the step likely next
    warmer: ThreadPoolExecutor | None = None  # where workers are started ahead (`_warm_after`)
    matrix: Config | None = None  # the project's agent matrix, read once (`usual_next`)
    notify: Callable[[Notice], None] = field(default=lambda notice: None)  # `[notify]`: never blocks
    checks: tuple[Checks | None] | None = None  # the project's trusted [checks], read once (`_checks`)
    gate_sent_back: dict[str, int] = field(default_factory=dict)  # session -> times a red gate sent it back

    def go(self) -> Stop:
        try:
            return self._go_serial()
        finally:  # a worker started ahead and never given its step ends with the run (Ctrl-C too)
            self._claim_warm(self.warming, None)
            self._stop_warmer()

    def _go_serial(self) -> Stop:
        slug = self.settings.slug
        adopted = _live(self.runtime, self.settings.root, lambda s: slug is None or s.slug == slug)
        if adopted:
            names = ", ".join(f"{s.id} ({s.command} {s.slug}, {s.state.value})" for s in adopted)
            self.show(f"watching the sessions already running for this project (started before): {names}")
            stop = self._watch(adopted, adopted=True)
            if stop:
                return stop
        while True:
            action = self._ask()
            if not isinstance(action, Dispatch):
                self._claim_warm(self.warming, None)
                self.warming = None
            stop = self._next(action)
            if stop:
                return stop

    # --- the planner's answers ---------------------------------------------------------------------------

    def _ask(self) -> Action:
        action = app.next_work(self.settings.slug, cwd=self.settings.root)
        self.state.action = action
        self._answer(action)
        return action

    def _answer(self, action: Action) -> None:
        if self.settings.prepare and rules.wants_preparing(action):
            line = f"next → {action.slug} is not prepared yet: --prepare sends its architect"
        elif self._finished(action):
            line = "next → nothing: every roadmap item is done"
        else:
            line = describe(action)
        self.show(f"[{self.state.steps + 1}] {line}")
        if self.settings.verbose:
            self.show("    " + to_text(action).replace("\n", "\n    "))

    def _next(self, action: Action) -> Stop | None:
        """Carry out one answer of next_work; a `Stop` when the run is over."""
        roadmap = (self.settings.root / layout.ROADMAP).is_file()
        match rules.answer(action, self.settings, roadmap):
            case Start(action=dispatch):
                return self._dispatch(dispatch)
            case AskAgain():
                return None
            case Prepare(slug=unprepared):
                assert isinstance(action, Error)
                return self._prepare(action, unprepared)
            case WaitOut(action=out):
                return self._wait_out(out)
            case GiveUp(action=refused):
                return self._error_stop(refused)
            case Stop() as stop:
                return stop
        return None

    def _wait_out(self, action: RunYourself) -> Stop | None:
        """No agent may take the step: wait until the first of them is back, then ask again (None); a `Stop`
        when waiting is off or that is further away than `limit_wait`."""
        back = self._reset_in_reach(action)
        if isinstance(back, Stop):
            return back
        countdown = f"{action.step.command} {item(action.slug)}"
        while (left := (back.until - self.runtime.clock()).total_seconds()) > 0:
            self.status(Countdown(countdown, back.agent, back.until, left))
            time.sleep(min(self.settings.tick, left))
        time.sleep(LIMIT_MARGIN)  # the store counts an agent out until the second it names
        self.notify(notices.agents_back(countdown, back.agent, str(self.settings.root)))
        return None

    def _reset_in_reach(self, action: RunYourself) -> RestUntil | Stop:
        back = rules.wait_out(action, self.runtime.clock(), self.settings.limit_wait)
        if isinstance(back, Stop):
            first = first_back(action)
            if first is not None and self.settings.limit_wait > 0:
                limit = format_duration(self.settings.limit_wait)
                agent, until = first
                self.show(f"    {agent} is back only at {format_utc(until)}: later than limit_wait ({limit})")
            return back
        step = f"{action.step.command} {item(action.slug)}"
        self.show(
            f"    every agent for {step} is out: waiting for {back.agent}, back at {format_utc(back.until)}"
        )
        self.notify(notices.agents_out(step, back.agent, back.until, str(self.settings.root)))
        return back

    def _prepare(self, refusal: Error, slug: str) -> Stop | None:
        """--prepare: start the architect next_prepare names, unattended."""
        action = app.next_prepare(slug, cwd=self.settings.root)
        self._answer(action)
        if not isinstance(action, Prepared):
            self.state.action = action
        match rules.prepared_answer(action, refusal, slug):
            case Start(action=dispatch, args=args):
                return self._dispatch(dispatch, args=args)
            case WaitOut(action=out):
                return self._wait_out(out)
            case Stop() as stop:
                return stop
        return None

    # --- workers -----------------------------------------------------------------------------------------

    def _dispatch(self, action: Dispatch, args: str | None = None) -> Stop | None:
        self._learn(action)
        warm = self._claim_warm(self.warming, action if args is None else None)
        self.warming = None
        if warm is not None:
            held = self._may_start(action, self.state.retries, besides=warm.session.id)
            if held is not None:
                guarded(self.runtime.drop_warm, warm)
                begun: Session | Stop | None = held
            else:
                begun = self._started(action, self.state.retries, guarded(self.runtime.deliver_warm, warm))
        else:
            begun = self._start(action, self.state.retries, args)
        if isinstance(begun, Session):
            fresh = begun.id == getattr(self.state.session, "id", None)
            if fresh and args is None:
                self.warming = self._warm_after(action)
            return self._watch([begun], adopted=not fresh)
        return begun

    def _start(
        self, action: Dispatch, retries: Retries, args: str | None = None, computer: str = "local"
    ) -> Session | Stop | None:
        """Start the worker of `action`: its session (or the live one already doing that step), None to ask
        again, or a `Stop`."""
        held = self._may_start(action, retries)
        if held is not None:
            return held
        return self._started(action, retries, guarded(self.runtime.start, action, args, computer))

    def _may_start(self, action: Dispatch, retries: Retries, besides: str = "") -> Session | Stop | None:
        """None when a worker may be started for `action` (or the worker `besides`, started ahead for it, be
        given it); else the live one already doing that step, or why not."""
        twin = self._twin(rules.step_key(action.command, action.slug), besides)
        started = self.state.steps + self.state.starting
        held = rules.may_start(action, twin, retries, started, self.settings.max_steps, describe(action))
        if isinstance(held, WaitFor):  # started by an earlier run, or by someone else: one worker per step
            self.show(
                f"    {held.session.id} is already doing {action.command} {action.slug}: waiting for it"
            )
            return held.session
        return held or self._set_up(action)

    # --- [checks] ----------------------------------------------------------------------------------------

    def _error_stop(self, action: Action) -> Stop:
        """An answer the run cannot carry out (`rules.error_stop`): is the item's gate failing past
        max_review_rounds?"""
        keeps_failing = isinstance(action, Error) and guarded(
            gating.keeps_failing, self.settings.root, action
        )
        return rules.error_stop(action, keeps_failing is True)

    def _checks(self) -> Checks | None:
        if self.checks is None:
            found = guarded(gating.project_checks, self.settings.root)
            self.checks = (None if isinstance(found, Error) else found,)
        return self.checks[0]

    def _set_up(self, action: Dispatch) -> Stop | None:
        """[checks] setup in the item's new worktree before its first worker: a failure starts none."""
        checks = self._checks()
        if checks is None or not checks.setup or action.subfolder != layout.worktree(action.slug):
            return None
        run = guarded(gating.set_up, self.settings.root, action.slug, checks)
        if run is None:
            return None
        if isinstance(run, Error):
            return Stop(Outcome.ERROR, to_text(run))
        self.show(cut(f"    {action.slug}: setup {run.verdict.value}: {run.summary()}", 200))
        if run.passed:
            return None
        again = shlex.join(["teleclaude", "check", "--setup", action.slug])
        return Stop(Outcome.ERROR, to_text(gating.setup_failed(action.slug, run)), f"{again}, then run again")

    def _sent_back_by_gate(self, session: Session) -> bool:
        """A builder or fixer through with its boxes: the gate in its worktree first; red sends it back."""
        checks = self._checks()
        if checks is None or not checks.gated or self.runtime.config.elsewhere(session.computer):
            return False
        run = guarded(gating.gate_turn, self.settings.root, session, checks)
        if run is None or isinstance(run, Error):
            return False
        self.show(cut(f"    {session.id} {session.command} {session.slug}: {run.summary()}", 200))
        if not gating.red(run):
            return False
        count = self.gate_sent_back.get(session.id, 0)
        if count >= self.runtime.config.max_nudges:
            self.show(f"    {session.id}: the gate is still red after {count} tries: the review follows")
            return False
        sent = guarded(self.runtime.send_message, session.id, gating.sent_back_text(run))
        if isinstance(sent, Error):
            return False
        self.gate_sent_back[session.id] = count + 1
        return True

    def _started(self, action: Dispatch, retries: Retries, started: Started | Error) -> Session | Stop | None:
        """What the runtime's answer to a start means for the run (as `_start` answers)."""
        if isinstance(started, Error):
            if rules.counts_as_started(started.code):
                self.state.steps += 1
            return self._refused(started, rules.step_key(action.command, action.slug), retries)
        self.state.steps += 1
        self.state.session = started.session
        self.show(f"    {where(started.session, self.runtime.config)}")
        return started.session

    def _refused(self, error: Error, step: StepKey, retries: Retries) -> Session | Stop | None:
        """The runtime refused a start: another run got there first (wait for its worker), or tmux or ssh
        failed (once: try again)."""
        match rules.refused(error.code, step, retries):
            case TwinFirst():
                twin = self._twin(step)
                self.show(f"    {error.message.splitlines()[0].rstrip('.')}: waiting for it")
                return twin  # None when it ended meanwhile: ask again
            case AskAgain():
                self.show(f"    could not start it, trying again: {error.message.splitlines()[0]}")
                return None
        return Stop(Outcome.ERROR, to_text(error))

    def _twin(self, step: StepKey, besides: str = "") -> Session | None:
        twins = _live(
            self.runtime,
            self.settings.root,
            lambda s: rules.step_key(s.command, s.slug) == step and s.id != besides,
        )
        return twins[0] if twins else None

    def _watch(self, sessions: list[Session], adopted: bool = False) -> Stop | None:
        """Wait on the sessions, reacting to their events, until each is through (or the run stops)."""
        watching = {s.id: s for s in sessions}
        failures = 0
        while watching:
            waited = guarded(self.runtime.wait_for_sessions, list(watching), self.settings.tick, fresh=False)
            if isinstance(waited, Error):
                failures += 1
                stop = self._wait_failed(waited, failures)
                if stop:
                    return stop
                continue
            assert isinstance(waited, Waited)
            failures = 0
            current = {s.id: s for s in waited.sessions}
            heard = set()
            for event in waited.events:
                if event.session_id in watching:
                    heard.add(event.session_id)
                    self._heard(event, current.get(event.session_id, watching[event.session_id]))
                    through = self._resolve(
                        event.kind, current, event.session_id, event.detail, adopted, self.state.retries
                    )
                    if isinstance(through, Stop):
                        return through
                    if through:
                        watching.pop(event.session_id)
            for session_id in list(watching):
                session = current.get(session_id, watching[session_id])
                watching[session_id] = session
                if session_id in heard:
                    continue
                unheard = rules.unheard_event(session, self._stuck_pending(session))
                if unheard is None:
                    continue
                kind, detail = unheard
                if implied_event(session) is None:
                    self.show(f"    {session.id}: {detail}; ending it")
                through = self._resolve(kind, current, session_id, detail, adopted, self.state.retries)
                if isinstance(through, Stop):
                    return through
                if through:
                    watching.pop(session_id)
            if watching:
                self._status(list(watching.values()))
        return None

    # --- workers started ahead ---------------------------------------------------------------------------

    def _learn(self, action: Dispatch) -> None:
        """`action` follows the step whose worker was through last, of the same item and ended well: counted
        as what follows that step (`ahead_rules.learned`)."""
        learned = ahead_rules.learned(action, self.state.history)
        if learned is not None:
            command, successor = learned
            self.successors.setdefault(command, Counter())[successor] += 1

    def _warm_after(self, action: Dispatch) -> Warming | None:
        """While `action`'s worker works, the worker of the step likely next (`likely_next`; before this run
        saw one follow `action`'s step, `usual_next`) started to its prompt in the background (`[runtime]
        warm_start`): with --parallel, one for each lane. Not with other computers (a
        step of the item may go to another computer's clone: a worker is started ahead here only)."""
        if not self._ahead().allowed:  # off, other computers, or it could never be given its step
            return None
        after = self._successor_now(action, ahead_rules.most_seen(self.successors.get(action.command)))
        predicted = likely_next(action, {action.command: after} if after else {})
        if predicted is None:
            return None
        if self.warmer is None:
            self.warmer = ThreadPoolExecutor(self.settings.parallel, thread_name_prefix="warm")
        return predicted, self.warmer.submit(guarded, self.runtime.warm, predicted)

    def _ahead(self) -> ahead_rules.Ahead:
        config = self.runtime.config
        started = self.state.steps + self.state.starting
        return ahead_rules.Ahead(config.warm_start, bool(config.remotes), started, self.settings.max_steps)

    def _successor_now(self, action: Dispatch, seen: Successor | None) -> Successor | None:
        now = self.runtime.clock()
        try:
            agents = self.runtime.context.availability.on_record(now)
        except StoreError:  # no guess: next_work will say what is wrong with the file
            return None
        return successor_now(action, seen, self._matrix(), agents.unavailable, agents.usage, now)

    def _matrix(self) -> Config:
        if self.matrix is None:
            try:
                self.matrix = load_config(self.settings.root)
            except ConfigError:  # changed since the run began: no guess (next_work says what is wrong)
                self.matrix = Config(matrix={})
        return self.matrix

    def _claim_warm(self, warming: Warming | None, action: Dispatch | None) -> Warm | None:
        """The worker started ahead, when `action` is the step it was started for (same agent, thinking
        mode and folder); else it is ended here, never given a step it was not started for."""
        if warming is None:
            return None
        predicted, future = warming
        warm = future.result()  # a start under way ends first: at most its CLI's start
        step = f"{predicted.command} {predicted.slug}"
        if isinstance(warm, Error):
            self.show(f"    the worker started ahead for {step} failed: {warm.message.splitlines()[0]}")
            return None
        if ahead_rules.claims(predicted, action):
            self.show(f"    {warm.session.id} ({warm.session.agent}) was started ahead for {step}")
            return warm
        guarded(self.runtime.drop_warm, warm)
        self.show(f"    {warm.session.id}, started ahead for {step}, was not needed: ended")
        return None

    def _stop_warmer(self) -> None:
        if self.warmer is not None:
            self.warmer.shutdown(wait=True)

    def _wait_failed(self, waited: Error, failures: int) -> Stop | None:
        """A wait that failed `failures` times in a row: look again, unless it keeps failing or a session is
        unknown (`rules.wait_failed`)."""
        stop = rules.wait_failed(waited, failures)
        if stop is None:
            self.show(f"    waiting failed, looking again: {waited.message.splitlines()[0]}")
        return stop

    def _status(self, sessions: list[Session]) -> None:
        first, others = sessions[0], tuple(sessions[1:])
        elapsed = (self.runtime.clock() - first.created_at).total_seconds()
        parked = tuple(f"{item(slug)} ({headline(stop)})" for slug, stop in self.state.parked.items())
        computers = self.runtime.config.computers
        self.status(
            Progress(
                max(self.state.steps, 1),
                first,
                elapsed,
                others,
                self.state.digest,
                parked,
                computers,
                self._usage(sessions),
            )
        )

    def _usage(self, sessions: list[Session]) -> str:
        """The usage of the agents `sessions` run on, as `agents` shows it; read at most once a tick."""
        read_at, usage = self.usage_read
        if time.monotonic() - read_at >= self.settings.tick:
            usage = self.runtime.usage()
            self.usage_read = (time.monotonic(), usage)
        now = self.runtime.clock()
        zone = local_zone(now)
        texts = {s.agent: usage_text(usage.get(s.agent, ()), now, zone) for s in sessions}
        return "; ".join(f"{agent} {text}" for agent, text in texts.items() if text)

    def _resolve(
        self,
        kind: EventKind,
        current: dict[str, Session],
        session_id: str,
        detail: str,
        adopted: bool,
        retries: Retries,
    ) -> Stop | bool:
        """React to one event: True when the session is through, a `Stop` when the run cannot go on."""
        session = current.get(session_id) or self.runtime.store.get(session_id)
        assert session is not None
        reaction = react(kind, session)
        if reaction is Reaction.WAIT:
            return False
        state = self.state
        state.session = session
        if reaction is Reaction.ATTENTION:
            state.history.append(Handled(session, kind, detail, adopted))
            text = attention_text(session, detail, self.settings.root, self.runtime.config.socket)
            return Stop(Outcome.NEEDS_ATTENTION, text)
        if reaction is Reaction.NEXT and kind is EventKind.TURN_ENDED and self._sent_back_by_gate(session):
            return False  # working again, on the gate's output
        if state.digest_of == session.id:  # its digest leaves the status line with it
            state.digest = state.digest_of = ""
        ended = guarded(self.runtime.end_session, session.id)
        ended_session = ended.session if isinstance(ended, Ended) else session
        state.history.append(Handled(ended_session, kind, detail, adopted))
        return rules.failed_again(session, kind, reaction, retries, detail, state.history) or True

    def _heard(self, event: Event, session: Session) -> None:
        notice = notices.of_event(event, session, str(self.settings.root), in_run=True)
        if notice is not None:
            self.notify(notice)
        detail = f": {event.detail}" if event.detail else ""
        self.show(cut(f"    {session.id} {event.kind.value}{detail}".splitlines()[0], 200))
        if event.kind is not EventKind.DIGEST:
            return
        # the runtime's periodic report: on the status line until the next, or until its worker is through
        self.state.digest = f"{session.command} {session.slug}: {event.detail.splitlines()[0]}"
        self.state.digest_of = session.id
        lines = event.detail.splitlines()
        if "  recent tools:" in lines:  # the worker's latest tool uses, named by its step
            tools = lines[lines.index("  recent tools:") + 1 :]
            for line in (line.strip() for line in tools if line.startswith("    ")):
                self.show(cut(f"      {session.command} {session.slug} used {line}", 200))

    def _finished(self, action: Action) -> bool:
        """NO_WORK for the whole roadmap; it also answers a missing roadmap: an error, not a finished run."""
        roadmap = isinstance(action, Error) and (self.settings.root / layout.ROADMAP).is_file()
        return rules.finished(action, self.settings.slug, roadmap)

    def _stuck_pending(self, session: Session) -> bool:
        """A session its starter left PENDING: it died (its start lock is free), or a start is long over."""
        if session.state is not SessionState.PENDING:
            return False
        gone = starter_gone(self.runtime.store.path, session)
        if gone:
            fresh = self.runtime.store.get(session.id)  # a starter saves RUNNING before it lets go
            gone = fresh is not None and fresh.state is SessionState.PENDING
            if not gone:
                return False
        return rules.stuck_pending(session, gone, self.runtime.clock(), self.runtime.config.startup_timeout)


# --- several items at once (--parallel N) -----------------------------------------------------------------


@dataclass
class Lane:
    """One roadmap item in flight ("" = the bug list) and its worker, if one is running."""

    slug: str
    session: Session | None = None
    adopted: bool = False
    retries: Retries = field(default_factory=Retries)
    computer: str = "local"  # where its worktree steps run: this machine or a [computers.NAME] with lanes
    resting: Countdown | None = None  # every agent for its step is out: asked again once it is back
    # its worker's start, under way in the background: the step, and the runtime's answer to come
    starting: tuple[Dispatch, Future[Started | Error]] | None = None
    warming: Warming | None = None  # the worker started ahead for its step likely next (`_warm_after`)


@dataclass
class _Lanes(_Loop):
    """Up to `parallel` items at once, each asked about with `next_work(slug)` in its own worktree.

    Which items may go is the planner's `ready_items` (the bug list first, `[>]` items, then pending items
    whose dependencies are delivered); which are in flight is derived from the live sessions, so a restarted
    run, or a second run beside this one, adopts the workers it finds instead of starting them again. A new
    lane goes to a `[computers.NAME]` with a free lane (`lanes`, in the order of teleclaude.toml), else to
    this machine; its steps in `trees/{slug}` run there, the main checkout's steps (finalize) here.
    """

    lanes: dict[str, Lane] = field(default_factory=dict)
    failed_waits: int = 0  # in a row
    starter: ThreadPoolExecutor | None = None  # the lanes' worker starts (`_launch`)
    # the lanes after the last `_fill`, and when it asked
    asked: tuple[frozenset[str], float] = (frozenset(), float("-inf"))
    # items claimed while a lane's item is finalized, each with its first worker started ahead
    # (`_next_item_ahead`): the lanes that free up take them first
    ahead: dict[str, Warming] = field(default_factory=dict)

    def go(self) -> Stop:
        try:
            return self._go()
        finally:  # a start under way ends first (its worker gets its command), so the report lists it
            if self.starter is not None:
                self.starter.shutdown(wait=True)
            for lane in self.lanes.values():  # a worker started ahead ends with the run (Ctrl-C too)
                self._claim_warm(lane.warming, None)
                lane.warming = None
            for warming in self.ahead.values():  # its item stays claimed, as any item in flight
                self._claim_warm(warming, None)
            self.ahead.clear()
            self._claim_warm(self.warming, None)
            self._stop_warmer()

    def _go(self) -> Stop:
        refilled = False
        while True:
            stop = self._fill()
            filled = set(self.lanes)
            stop = stop or self._advance_all()
            if stop:
                return stop
            if self.lanes and set(self.lanes) < filled and not refilled:
                refilled = (
                    True  # a lane left (its item delivered or parked): its next item starts before a wait
                )
                continue
            refilled = False
            if not self.lanes:
                stop = self._fill()
                if stop:
                    return stop
                if self.lanes:
                    continue
                stop = rules.idle(self.state.parked)  # nothing can go on without the parked items
                if stop:
                    return stop
                stop = self._next(self._ask())  # nothing in flight and nothing ready: the planner says why
                self._claim_warm(self.warming, None)  # started ahead by `_dispatch`: the lanes go on instead
                self.warming = None
                if stop:
                    return stop
                continue
            stop = self._wait()
            if stop:
                return stop

    def _adopt(self) -> None:
        """The project's live workers no lane of this run waits on (left by an earlier run, or started by a
        run beside this one) get a lane here too: so `parallel` caps the project's workers, not this run's."""
        for session in _live(self.runtime, self.settings.root, lambda s: s.slug not in self.state.parked):
            lane = self.lanes.setdefault(session.slug, Lane(session.slug))
            busy = lane.session is not None or lane.starting is not None or lane.warming is not None
            if not rules.adopts(session, self.state.parked, busy):
                continue
            if session.computer in self.runtime.config.remotes:
                lane.computer = session.computer
            self.show(f"adopting {session.id} ({session.command} {session.slug}, {session.state.value})")
            lane.session, lane.adopted = session, True

    def _fill(self) -> Stop | None:
        parallel = self.settings.parallel
        for slug in list(self.ahead):  # before anything else: no other lane adopts its worker
            if len(self.lanes) < parallel and slug not in self.lanes:
                self.lanes[slug] = Lane(slug, warming=self.ahead.pop(slug))
        asked_lanes, asked_at = self.asked
        if not rules.ask_ready(frozenset(self.lanes), asked_lanes, time.monotonic() - asked_at, parallel):
            return None  # no lane left since the last ask: what was not ready then is not ready now
        self._adopt()
        if len(self.lanes) >= self.settings.parallel:
            return None
        ready = app.ready_items(cwd=self.settings.root)
        if isinstance(ready, Error):
            return Stop(Outcome.ERROR, to_text(ready))
        lanes = {slug: lane.computer for slug, lane in self.lanes.items()}
        remote_lanes = {name: computer.lanes for name, computer in self.runtime.config.remotes.items()}
        for slug, computer in rules.new_lanes(
            lanes, ready, self.state.parked, parallel, remote_lanes
        ).items():
            self.lanes[slug] = Lane(slug, computer=computer)
        self.asked = (frozenset(self.lanes), time.monotonic())
        return None

    def _computer_for(self, lane: Lane, action: Dispatch) -> str:
        """The lane's computer for a step in the item's worktree by an agent installed there; else here."""
        agents = {name: computer.agents for name, computer in self.runtime.config.remotes.items()}
        return rules.computer_for(lane.computer, agents, action, item_slug(action.subfolder))

    def _park(self, lane: Lane, stop: Stop) -> Stop | None:
        """One item cannot go on: park it (its worker, if any, is left as it is) and let the other lanes
        carry on. A stop that is the whole run's (--max-steps, Ctrl-C) still ends the run."""
        if ends_the_run(stop):
            return stop
        self._claim_warm(lane.warming, None)
        lane.warming = None
        self.lanes.pop(lane.slug, None)
        self.state.parked[lane.slug] = stop
        self.show(f"    parked {item(lane.slug)}: {headline(stop)}")
        after = stop.next or advice(Outcome.PARKED, self.settings)
        self.notify(notices.parked(lane.slug, headline(stop), str(self.settings.root), after))
        for line in stop.what.splitlines()[1:]:
            self.show(f"      {line}")
        return None

    def _advance_all(self) -> Stop | None:
        """Ask `next_work` for every lane without a worker, and start what it says."""
        now = self.runtime.clock()
        for lane in list(self.lanes.values()):
            if lane.resting and not rules.rest_over(lane.resting.until, now):
                continue
            if lane.resting:  # back: asked again below
                self.notify(
                    notices.agents_back(lane.resting.step, lane.resting.agent, str(self.settings.root))
                )
            if lane.session is None and lane.starting is None:
                stop = self._advance(lane)
                if stop:
                    return stop
        return None

    def _advance(self, lane: Lane) -> Stop | None:
        action = app.next_work(lane.slug or None, cwd=self.settings.root)
        if isinstance(action, Dispatch):
            self._learn(action)
        if rules.bug_list_done(lane.slug, action):
            self._claim_warm(lane.warming, None)
            del self.lanes[lane.slug]
            return None
        self.state.action = action
        self._answer(action)
        warm = self._claim_warm(lane.warming, action if isinstance(action, Dispatch) else None)
        lane.warming = None
        if ahead_rules.catch_up_first(warm is not None, action) and isinstance(action, Dispatch):
            guarded(app.catch_up, action.slug, cwd=self.settings.root)  # made ahead: what merged meanwhile
        begun: Session | Stop | None
        match rules.lane_answer(action, self.settings.prepare):
            case Start(action=dispatch):
                begun = self._launch(lane, dispatch, computer=self._computer_for(lane, dispatch), warm=warm)
            case DropLane():
                del self.lanes[lane.slug]
                return None
            case Prepare():
                begun = self._start_architect(lane)
            case WaitOut(action=out):
                back = self._reset_in_reach(out)
                if isinstance(back, RestUntil):  # the other lanes go on meanwhile
                    step = f"{out.step.command} {item(lane.slug)}"
                    lane.resting = Countdown(step, back.agent, back.until, 0.0)
                    return None
                begun = back
            case GiveUp(action=refused):
                begun = self._error_stop(refused)
            case Stop() as stop:
                begun = stop
        lane.resting = None
        if begun is STARTING:
            return None
        if isinstance(begun, Session):
            lane.session, lane.adopted = begun, begun is not self.state.session
            return None
        if isinstance(begun, Stop):
            return self._park(lane, begun)
        return None

    def _launch(
        self,
        lane: Lane,
        action: Dispatch,
        args: str | None = None,
        computer: str = "local",
        warm: Warm | None = None,
    ) -> Session | Stop | None:
        """Start the lane's worker in the background (STARTING), so that its start (typing, waiting for the
        prompt, the Enter check) overlaps the other lanes' starts and the wait on their workers; or, as
        `_start` answers, why it is not started. `warm`: the worker started ahead for it, typed into."""
        held = self._may_start(action, lane.retries, besides=warm.session.id if warm else "")
        if held is not None:
            if warm is not None:
                guarded(self.runtime.drop_warm, warm)
            return held
        if self.starter is None:
            self.starter = ThreadPoolExecutor(max(self.settings.parallel, 1), thread_name_prefix="start")
        self.state.starting += 1
        started = (
            self.starter.submit(guarded, self.runtime.deliver_warm, warm)
            if warm is not None
            else self.starter.submit(guarded, self.runtime.start, action, args, computer)
        )
        lane.starting = (action, started)
        return STARTING

    def _collect(self) -> Stop | None:
        """The lanes whose worker start has finished: their worker, or what the runtime's refusal means."""
        for lane in list(self.lanes.values()):
            if lane.starting is None or not lane.starting[1].done():
                continue
            action, answer = lane.starting
            lane.starting = None
            self.state.starting -= 1
            begun = self._started(action, lane.retries, answer.result())
            if isinstance(begun, Session):
                lane.session, lane.adopted = begun, begun is not self.state.session
                if not lane.adopted and begun.args == action.slug:  # not an architect's unattended start
                    lane.warming = self._warm_after(action)
                if not lane.adopted and action.step is Step.FINALIZE:
                    self._next_item_ahead()
            elif isinstance(begun, Stop):
                stop = self._park(lane, begun)
                if stop:
                    return stop
        return None

    def _next_item_ahead(self) -> None:
        """While the item of a run without --parallel is finalized, the next ready item is claimed
        (`next_work` on it: its `[>]`, its worktree) and its first worker started ahead (`[runtime]
        warm_start`), so the lane it frees goes on without a cold start; its build is caught up with main
        before it is typed (`app.catch_up`). Never the bug list (worked in the main checkout). A run that
        stops meanwhile leaves that item claimed, as it leaves any item in flight."""
        root = self.settings.root
        finalizing = frozenset(
            slug
            for slug, lane in self.lanes.items()
            if lane.session is not None and bare_command(lane.session.command) == Step.FINALIZE.command
        )
        parallel, lanes, ahead = self.settings.parallel, len(self.lanes), len(self.ahead)
        if not ahead_rules.claim_next_item(self._ahead(), parallel, lanes, len(finalizing), ahead):
            return
        # none when the item next still waits for them: next_work of a named item does not ask
        taken = frozenset((*self.lanes, *self.ahead, *self.state.parked))
        slug = app.next_item_after(finalizing, taken, cwd=root)
        if not isinstance(slug, str):
            return
        action = app.next_work(slug, cwd=root)
        if not isinstance(action, Dispatch) or action.slug != slug:
            return  # next_work says why when its lane asks
        predicted = replace(action, note=None)
        self.show(f"    ahead: {slug} claimed, its {action.command} worker starting")
        if self.warmer is None:
            self.warmer = ThreadPoolExecutor(self.settings.parallel, thread_name_prefix="warm")
        self.ahead[slug] = (predicted, self.warmer.submit(guarded, self.runtime.warm, predicted))

    def _start_architect(self, lane: Lane) -> Session | Stop | None:
        action = app.next_prepare(lane.slug, cwd=self.settings.root)
        self._answer(action)
        decided = rules.lane_prepared(action, lane.slug)
        if isinstance(decided, Start):
            return self._launch(lane, decided.action, args=decided.args)
        return decided

    def _wait(self) -> Stop | None:
        """One wait on every worker in flight; a lane whose worker is through asks again next round."""
        stop = self._collect()
        if stop:
            return stop
        busy = {lane.session.id: lane for lane in self.lanes.values() if lane.session is not None}
        starts = [lane.starting[1] for lane in self.lanes.values() if lane.starting is not None]
        if not busy and starts:
            wait_futures(starts, timeout=self.settings.tick, return_when=FIRST_COMPLETED)
            return None
        if not busy:  # every lane waits for an agent's reset
            self._count_down()
            time.sleep(self.settings.tick)
            return None
        self._status([lane.session for lane in busy.values() if lane.session is not None])  # new starts too
        # while a start is under way, look often: its worker joins the wait as soon as it has its command
        timeout = min(self.settings.tick, START_LOOK) if starts else self.settings.tick
        waited = guarded(self.runtime.wait_for_sessions, list(busy), timeout, fresh=False)
        if isinstance(waited, Error):
            self.failed_waits += 1
            return self._wait_failed(waited, self.failed_waits)
        self.failed_waits = 0
        assert isinstance(waited, Waited)
        current = {s.id: s for s in waited.sessions}
        heard: set[str] = set()
        for event in waited.events:
            lane = busy.get(event.session_id)
            if lane is None or lane.session is None:
                continue
            heard.add(event.session_id)
            self._heard(event, current.get(event.session_id, lane.session))
            stop = self._settle(lane, event.kind, current, event.detail)
            if stop:
                return stop
        for session_id, lane in busy.items():
            if session_id in heard or lane.session is None:
                continue
            session = current.get(session_id, lane.session)
            lane.session = session
            unheard = rules.unheard_event(session, self._stuck_pending(session))
            if unheard is not None:
                kind, detail = unheard
                stop = self._settle(lane, kind, current, detail)
                if stop:
                    return stop
        running = [lane.session for lane in self.lanes.values() if lane.session is not None]
        if running:
            self._status(running)
        return None

    def _count_down(self) -> None:
        resting = [lane.resting for lane in self.lanes.values() if lane.resting]
        if resting:
            first = min(resting, key=lambda countdown: countdown.until)
            left = (first.until - self.runtime.clock()).total_seconds()
            self.status(replace(first, left=max(left, 0.0)))

    def _settle(self, lane: Lane, kind: EventKind, current: dict[str, Session], detail: str) -> Stop | None:
        assert lane.session is not None
        through = self._resolve(kind, current, lane.session.id, detail, lane.adopted, lane.retries)
        if isinstance(through, Stop):
            return self._park(lane, through)
        if through:
            lane.session, lane.adopted = None, False
        return None


# --- the report --------------------------------------------------------------------------------------------


def report(stop: Stop, settings: RunSettings, state: RunState, runtime: Runtime) -> RunReport:
    what = stop.what
    first = what if what.startswith(("SELF:", "ERROR:")) else f"{stop.outcome.value}: {what}"
    running = _live(runtime, settings.root, lambda s: True)
    delivered = tuple(
        f"done/{name}/" for name in _archives(settings.root) if name not in state.archived_before
    )
    lines = [
        first,
        "",
        f"steps: {state.steps} session{'s' if state.steps != 1 else ''} started",
        f"delivered: {', '.join(delivered) or 'nothing in this run'}",
        f"running: {len(running) or 'none'}",
        *(f"  {where(s, runtime.config)}" for s in running),
        f"next: {stop.next or advice(stop.outcome, settings)}",
    ]
    return RunReport(
        stop.outcome,
        state.steps,
        state.action,
        state.session,
        "\n".join(lines),
        tuple(state.history),
        delivered,
    )


def cut(text: str, length: int) -> str:
    """`text` cut to `length` characters, but never its NO PROGRESS (a digest's warning, at its end)."""
    if len(text) <= length:
        return text
    flag = ", NO PROGRESS"
    if flag in text:
        return text[: length - len(flag) - 1].rstrip() + "…" + flag
    return text[: length - 1] + "…"


def where(session: Session, config: RuntimeConfig) -> str:
    local, socket = not config.elsewhere(session.computer), config.socket
    tmux_session = session.tmux_session.rpartition(":")[2]  # a remote one's carries `NAME:` in front
    return (
        f"{session.id}: {session.command} {session.slug} ({session.agent}, {session.state.value}) in "
        f"{session.subfolder or 'the main checkout'}{'' if local else ' on ' + session.computer}; watch: "
        f"{'' if local else 'there, '}tmux -L {socket} attach -t {tmux_session}"
    ).replace("  ", " ")


# --- helpers -----------------------------------------------------------------------------------------------


def _silent(notice: Notice) -> None:
    """No `[notify]` URLs: nothing is sent."""


def _checkout_root(project: Path) -> Path:
    from teleclaude.adapters.git import NotAGitRepo, find_repo

    try:
        return Path(find_repo(project).root).resolve()
    except (NotAGitRepo, OSError):
        return project.resolve()


def _archives(root: Path) -> list[str]:
    """The folders in done/, e.g. 001-my-slug."""
    try:
        return sorted(p.name for p in (root / layout.DONE).iterdir() if p.is_dir())
    except OSError:
        return []


def _live(runtime: Runtime, root: Path, wanted: Callable[[Session], bool]) -> list[Session]:
    """The project's sessions that are not over yet, and `wanted`."""
    return [
        s
        for s in runtime.store.sessions()
        if not s.state.is_final and _same_path(s.project, root) and wanted(s)
    ]


def _same_path(one: str, other: Path) -> bool:
    try:
        return Path(one).resolve() == other
    except OSError:
        return False
