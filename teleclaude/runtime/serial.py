"""`teleclaude run` of one item, or of the roadmap one item after another (`Serial`): ask `next_work`, start
the worker it names, wait for its events, end its session, ask again. The rules are runtime/core/loop.py's
(and ahead.py's for the worker of the step likely next, started ahead); this room gathers their facts (the
planner, the session store, tmux, the clock) and carries their values out. `runtime/parallel.py` builds the
lanes of `--parallel` on it.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import StoreError
from teleclaude.config.checks import Checks
from teleclaude.config.matrix import Config
from teleclaude.config.notify import Notice
from teleclaude.config.parse import ConfigError
from teleclaude.errors import Error, guard
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
from teleclaude.runtime import gating, mainguard, spend
from teleclaude.runtime.api import Runtime, guarded
from teleclaude.runtime.core import ahead as ahead_rules
from teleclaude.runtime.core import loop as rules
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.ahead import (
    Successor,
    likely_next,
    successor_now,
)
from teleclaude.runtime.core.loop import (
    LIMIT_MARGIN,
    AskAgain,
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
    Outcome,
    RunSettings,
    Stop,
    attention_text,
    headline,
    item,
    resume_command,
)
from teleclaude.runtime.core.supervision import step_of
from teleclaude.runtime.launcher import Warm
from teleclaude.runtime.observer import local_zone
from teleclaude.runtime.run_report import Countdown, Progress, RunState, StatusLine, cut, live, where
from teleclaude.runtime.worker_setup import starter_gone

STARTING = Stop(Outcome.SELF, "the worker is being started")  # a sentinel of `_launch`: under way
Warming = tuple[Dispatch, Future["Warm | Error"]]  # a worker being started ahead for this step


@dataclass
class Serial:
    """One item (`run SLUG`), or the planner's next step after next step; `Lanes` builds on it."""

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
    budget: spend.BudgetWatch = field(default_factory=spend.BudgetWatch)  # [budget], before each step

    def go(self) -> Stop:
        try:
            return self._go_serial()
        finally:  # a worker started ahead and never given its step ends with the run (Ctrl-C too)
            self._claim_warm(self.warming, None)
            self._stop_warmer()

    def _go_serial(self) -> Stop:
        slug = self.settings.slug
        adopted = live(self.runtime, self.settings.root, lambda s: rules.serial_adopts(s, slug))
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
        action = mainguard.next_work(self.runtime, self.settings.slug, self.settings.root)
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
        while not rules.rest_over(back, now := self.runtime.clock(), self._out()):
            left = (back.until - now).total_seconds()
            self.status(Countdown(countdown, back.agent, back.until, max(left, 0.0)))
            time.sleep(min(self.settings.tick, max(left + LIMIT_MARGIN, 0.01)))
        self.notify(notices.agents_back(countdown, back.agent, str(self.settings.root)))
        return None

    def _out(self) -> frozenset[str] | None:
        """The agents out now, as the availability store has them (one marked back by hand ends a rest);
        None when it cannot be read (the rest goes on until the reset)."""
        out = guarded(self.runtime.context.availability.unavailable, self.runtime.clock())
        return None if isinstance(out, Error) else frozenset(out)

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
        if held:
            return held
        over = spend.held_back(
            self.budget,
            self.runtime,
            self._matrix().spend,
            action,
            resume_command(self.settings),
            self.show,
            self.notify,
        )
        if over is not None:  # an item's: parked; the run's or the day's: the run stops, between steps
            whole_run, what, after = over
            return Stop(Outcome.NEEDS_ATTENTION if whole_run else Outcome.PARKED, what, after, whole_run)
        return self._set_up(action)

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
        if checks is None or not rules.sets_up(bool(checks.setup), action):
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
        if spend.out_of_budget(self.runtime, self._matrix().spend, session):  # past a [budget]: no other turn
            return False
        count = self.gate_sent_back.get(session.id, 0)
        if not rules.sends_back(count, self.runtime.config.max_nudges):
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
        """The runtime refused a start: wait for its twin, try again, or the item's stop (`rules.refused`)."""
        match rules.refused(error, step, retries):
            case TwinFirst():
                twin = self._twin(step)
                self.show(f"    {error.message.splitlines()[0].rstrip('.')}: waiting for it")
                return twin  # None when it ended meanwhile: ask again
            case AskAgain():
                self.show(f"    could not start it, trying again: {error.message.splitlines()[0]}")
                return None
            case Stop() as stop:
                return stop

    def _twin(self, step: StepKey, besides: str = "") -> Session | None:
        twins = live(
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

    def _warm_after(self, action: Dispatch, on: Callable[[Dispatch], str] | None = None) -> Warming | None:
        """While `action`'s worker works, the worker of the step likely next (`likely_next`; before this run
        saw one follow `action`'s step, `usual_next`) started to its prompt in the background (`[runtime]
        warm_start`) on the computer that step would go to (`on`, else here): with --parallel, one a lane."""
        if not self._ahead().allowed:  # off, or it could never be given its step
            return None
        after = self._successor_now(action, ahead_rules.most_seen(self.successors.get(action.command)))
        predicted = likely_next(action, {action.command: after} if after else {})
        if predicted is None:
            return None
        if self.warmer is None:
            self.warmer = ThreadPoolExecutor(self.settings.parallel, thread_name_prefix="warm")
        where = on(predicted) if on else "local"
        return predicted, self.warmer.submit(guarded, self.runtime.warm, predicted, where)

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

    def _claim_warm(self, warming: Warming | None, action: Dispatch | None, on: str = "local") -> Warm | None:
        """The worker started ahead, when `action` is the step it was started for (same agent, thinking mode
        and folder) and goes to its computer (`on`); else it is ended, never given a step it was not for."""
        if warming is None:
            return None
        predicted, future = warming
        warm = future.result()  # a start under way ends first: at most its CLI's start
        step = f"{predicted.command} {predicted.slug}"
        if isinstance(warm, Error):
            self.show(f"    the worker started ahead for {step} failed: {warm.message.splitlines()[0]}")
            return None
        if ahead_rules.claims(predicted, action, warm.session.computer, on):
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
                self.budget.warning,
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
        if rules.gate_first(reaction, kind) and self._sent_back_by_gate(session):
            return False  # working again, on the gate's output
        if state.digest_of == session.id:  # its digest leaves the status line with it
            state.digest = state.digest_of = ""
        state.history.append(Handled(self._end(session), kind, detail, adopted))
        self._clean_up_elsewhere(session)
        return rules.failed_again(session, kind, reaction, retries, detail, state.history) or True

    def _end(self, session: Session) -> Session:
        """End the worker's session (its tmux session killed, the row ENDED): the ended session."""
        ended = guarded(self.runtime.end_session, session.id)
        return ended.session if isinstance(ended, Ended) else session

    def _clean_up_elsewhere(self, session: Session) -> None:
        """After a finalize that delivered the item: its worktrees and branches on the other computers removed
        by the run itself (a sandboxed finalizer has no ssh keys and no session store; `teleclaude finalize`
        outside one has done it already, and the second time finds nothing)."""
        if (
            not self.runtime.config.remotes
            or step_of(session.command) is not Step.FINALIZE
            or not session.slug
        ):
            return
        from teleclaude.runtime.remote import clean_up_finalized

        cleaned = guard(clean_up_finalized)(session.slug, self.settings.root)
        for result in [] if isinstance(cleaned, Error) else cleaned:
            self.show(f"    {result.text()}")

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
