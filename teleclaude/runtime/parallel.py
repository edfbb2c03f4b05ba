"""`teleclaude run` of the whole roadmap (`Lanes`): up to `--parallel` items in flight at once, each asked
about with `next_work(slug)` in its own lane, its worker started on a thread of its own so that the lanes'
starts overlap. Which items get a lane and where, when a lane rests or parks, and what is claimed ahead are
runtime/core/loop.py's and ahead.py's rules; this room carries them out.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from teleclaude.adapters import sandbox
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import (
    Action,
    Dispatch,
    Step,
)
from teleclaude.planner.core.render import to_text
from teleclaude.runtime import mainguard, trace
from teleclaude.runtime.api import guarded
from teleclaude.runtime.core import ahead as ahead_rules
from teleclaude.runtime.core import given_up as given_up_rules
from teleclaude.runtime.core import loop as rules
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.loop import (
    DropLane,
    GiveUp,
    Prepare,
    RestUntil,
    Retries,
    Start,
    WaitOut,
)
from teleclaude.runtime.core.sessions import Ended, EventKind, Session, Started, Waited
from teleclaude.runtime.core.stops import (
    Outcome,
    Stop,
    advice,
    ends_the_run,
    headline,
    item,
)
from teleclaude.runtime.core.supervision import bare_command
from teleclaude.runtime.given_up import GivenUp
from teleclaude.runtime.launcher import Warm
from teleclaude.runtime.remote import item_slug
from teleclaude.runtime.run_report import Countdown, live
from teleclaude.runtime.serial import STARTING, Serial, Warming

ASKERS = 8  # threads asking the lanes' next_work at once: their git calls overlap


@dataclass
class Lane:
    """One roadmap item in flight ("" = the bug list) and its worker, if one is running."""

    slug: str
    session: Session | None = None
    adopted: bool = False
    retries: Retries = field(default_factory=Retries)
    computer: str = "local"  # where its worktree steps run: this machine or a [computers.NAME] with lanes
    resting: Countdown | None = None  # every agent for its step is out: asked again once it is back
    rest: RestUntil | None = None  # while resting: until when, and on which agents
    # its worker's start, under way in the background: the step, and the runtime's answer to come
    starting: tuple[Dispatch, Future[Started | Error]] | None = None
    warming: Warming | None = None  # the worker started ahead for its step likely next (`_warm_after`)
    asking: Future[Action] | None = None  # its next_work, asked on a thread (`_ask_lanes`)


@dataclass
class Lanes(Serial):
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
    asker: ThreadPoolExecutor | None = None  # the lanes' next_work, asked side by side (`_ask_lanes`)
    # a pipe an answer on the asker's threads writes to: it wakes the run's wait on its workers
    answered: tuple[int, int] | None = None
    # the lanes after the last `_fill`, and when it asked
    asked: tuple[frozenset[str], float] = (frozenset(), float("-inf"))
    # items claimed while a lane's item is finalized, each with its first worker started ahead
    # (`_next_item_ahead`): the lanes that free up take them first
    ahead: dict[str, Warming] = field(default_factory=dict)
    ender: ThreadPoolExecutor | None = None  # the sessions of workers through, ended side by side (`_end`)
    # each with its step and the index of its entry in the run's history, which takes the ended session once
    # it is
    ending: list[tuple[rules.StepKey, int, Future[Ended | Error]]] = field(default_factory=list)
    given_up: GivenUp | None = None  # computers away, the workers given up there (`_give_up`)

    def go(self) -> Stop:
        if self.runtime.config.remotes:  # (here alone: nothing to give up)
            self.given_up = GivenUp(self.runtime, self.settings.root)
            self.given_up.resume()
        try:
            return self._go()
        finally:  # a start under way ends first (its worker gets its command), so the report lists it
            self._ended()
            if self.ender is not None:
                self.ender.shutdown(wait=True)
            if self.starter is not None:
                self.starter.shutdown(wait=True)
            if self.asker is not None:  # an answer not carried out: its item stays claimed, as one in flight
                self.asker.shutdown(wait=True)
            if self.answered is not None:
                for fd in self.answered:
                    os.close(fd)
                self.answered = None
            for lane in self.lanes.values():  # a worker started ahead ends with the run (Ctrl-C too)
                self._claim_warm(lane.warming, None)
                lane.warming = None
            for warming in self.ahead.values():  # its item stays claimed, as any item in flight
                self._claim_warm(warming, None)
            self.ahead.clear()
            self._claim_warm(self.warming, None)
            self._stop_warmer()
            if self.given_up is not None:
                self.given_up.close()
                self.state.given_up = self.given_up.report()

    def _go(self) -> Stop:
        refilled = False
        while True:
            stop = self._fill()
            filled = frozenset(self.lanes)
            stop = stop or self._advance_all()
            if stop:
                return stop
            if rules.refill(frozenset(self.lanes), filled, refilled):
                refilled = True
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
        self._ended()  # a worker's session being ended is no worker to adopt
        for session in live(self.runtime, self.settings.root, lambda s: s.slug not in self.state.parked):
            lane = self.lanes.setdefault(session.slug, Lane(session.slug))
            busy = any(x is not None for x in (lane.session, lane.starting, lane.warming, lane.asking))
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
        """The lane's computer for a step in the item's worktree by an agent installed there, while ssh
        reaches it and holds no given-up worker of the item not yet ended there; else here."""
        down = self.runtime.tmux.unreachable()
        if self.given_up is not None:
            down |= self.given_up.holding(action.slug)
        agents = {n: computer.agents for n, computer in self.runtime.config.remotes.items() if n not in down}
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
        """Ask `next_work` for every lane without a worker, and start what it says. Whether main moved is
        asked once for all of them (`mainguard.moved`); with more than one lane it and their questions are
        asked on threads (`_ask_lanes`), and each answer is carried out once it has come, while the run's
        wait hears the hooks meanwhile (an answer wakes it)."""
        now = self.runtime.clock()
        out = self._out() if any(lane.resting for lane in self.lanes.values()) else None
        asking = []
        for lane in list(self.lanes.values()):
            if lane.asking is not None:
                continue
            if lane.rest and not rules.rest_over(lane.rest, now, out):
                continue
            if lane.resting:  # back: asked again below
                self.notify(
                    notices.agents_back(lane.resting.step, lane.resting.agent, str(self.settings.root))
                )
            if lane.session is None and lane.starting is None:
                asking.append(lane)
        if asking and self.settings.parallel > 1:
            self._ask_lanes(asking)
        elif asking:  # nothing to hear meanwhile but its own lane's news
            moved = mainguard.moved(self.runtime, self.settings.root)
            if moved is not None:
                return self._error_stop(moved)  # the whole run stops, not this lane
            for lane in asking:
                stop = self._advance(lane, self._next_work(lane.slug))
                if stop:
                    return stop
        return self._answers()

    def _next_work(self, slug: str) -> Action:
        trace.mark("ask", slug)
        action = guarded(mainguard.next_work, self.runtime, slug or None, self.settings.root, True, True)
        trace.mark("answered", slug)
        return action

    def _ask_lanes(self, lanes: list[Lane]) -> None:
        """`next_work` of each lane on the asker's threads (an answer that changes nothing is decided beside
        the others: planner/api.py), once one of them found main where teleclaude left it (MAIN_MOVED is
        each lane's answer, and stops the run); each answer wakes the run's wait (`answered`)."""
        if self.asker is None:
            self.asker = ThreadPoolExecutor(min(self.settings.parallel, ASKERS), thread_name_prefix="ask")
        if self.answered is None:
            self.answered = os.pipe()
            for fd in self.answered:
                os.set_blocking(fd, False)
        wake = self.answered[1]
        # first in the queue: the threads that wait on it are never the ones it waits for
        moved = self.asker.submit(mainguard.moved, self.runtime, self.settings.root)

        def ask(slug: str) -> Action:
            return moved.result() or self._next_work(slug)

        for lane in lanes:
            lane.asking = self.asker.submit(ask, lane.slug)
            lane.asking.add_done_callback(lambda _: _poke(wake))

    def _answers(self) -> Stop | None:
        """The lanes' answers that have come, carried out."""
        if self.answered is not None:
            _drain(self.answered[0])
        for lane in list(self.lanes.values()):
            if lane.asking is None or not lane.asking.done():
                continue
            action, lane.asking = lane.asking.result(), None
            if self.lanes.get(lane.slug) is not lane:
                continue  # its item left the lanes meanwhile
            stop = self._advance(lane, action)
            if stop:
                return stop
        return None

    def _advance(self, lane: Lane, action: Action) -> Stop | None:
        if isinstance(action, Dispatch):
            self._learn(action)
        if rules.bug_list_done(lane.slug, action):
            self._claim_warm(lane.warming, None)
            del self.lanes[lane.slug]
            return None
        self.state.action = action
        self._answer(action)
        named = action if isinstance(action, Dispatch) else None
        where = self._computer_for(lane, named) if named else "local"
        warm = self._claim_warm(lane.warming, named, where)
        lane.warming = None
        if ahead_rules.catch_up_first(warm is not None, action) and isinstance(action, Dispatch):
            guarded(app.catch_up, action.slug, cwd=self.settings.root)  # made ahead: what merged meanwhile
            guarded(sandbox.relink, Path(action.project), action.subfolder)  # where its sandbox commits too
        begun: Session | Stop | None
        match rules.lane_answer(action, self.settings.prepare):
            case Start(action=dispatch):
                begun = self._launch(lane, dispatch, computer=where, warm=warm)
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
                    lane.rest = back
                    return None
                begun = back
            case GiveUp(action=refused):
                begun = self._error_stop(refused)
            case Stop() as stop:
                begun = stop
        lane.resting, lane.rest = None, None
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
        trace.mark("submitted", lane.slug)
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
                after = ahead_rules.after_start(action, begun.args, lane.adopted)
                if after.warm:  # on the computer its step would go to
                    lane.warming = self._warm_after(action, partial(self._computer_for, lane))
                if after.claim:
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
        action = mainguard.next_work(self.runtime, slug, root)
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

    def _end(self, session: Session) -> Session:
        """The sessions of the workers through are ended side by side, on threads (a tmux call each), while
        their lanes ask for their next steps: ended before any worker is started (`_may_start`) or adopted
        (`_adopt`)."""
        if self.ender is None:
            self.ender = ThreadPoolExecutor(max(self.settings.parallel, 1), thread_name_prefix="end")
        ended = self.ender.submit(guarded, self.runtime.end_session, session.id)
        self.ending.append((rules.step_key(session.command, session.slug), len(self.state.history), ended))
        return session

    def _ended(self, step: rules.StepKey | None = None) -> None:
        """Wait for the sessions being ended (`_end`), or only those `rules.ended_first` before a start of
        `step`; their entries in the history take the ended session."""
        if step is None:
            ending, self.ending = self.ending, []
        else:
            computers = bool(self.runtime.config.remotes)
            ending = [entry for entry in self.ending if rules.ended_first(entry[0], step, computers)]
            self.ending = [entry for entry in self.ending if not rules.ended_first(entry[0], step, computers)]
        history = self.state.history
        for _, index, future in ending:
            ended = future.result()
            if isinstance(ended, Ended) and index < len(history):
                history[index] = replace(history[index], session=ended.session)

    def _watch(self, sessions: list[Session], adopted: bool = False) -> Stop | None:
        """Serial's wait on one worker (nothing in flight; the planner's answer): ended on return."""
        try:
            return super()._watch(sessions, adopted)
        finally:
            self._ended()

    def _may_start(self, action: Dispatch, retries: Retries, besides: str = "") -> Session | Stop | None:
        """Serial's, once the step's worker being ended is (it holds the step until then:
        `rules.ended_first`)."""
        self._ended(rules.step_key(action.command, action.slug))
        trace.mark("ended", action.slug)
        return super()._may_start(action, retries, besides)

    def _wait(self) -> Stop | None:
        """One wait on every worker in flight; a lane whose worker is through asks again next round."""
        stop = self._collect() or self._give_up()
        if stop:
            return stop
        busy = {lane.session.id: lane for lane in self.lanes.values() if lane.session is not None}
        starts: list[Future[Any]] = [lane.starting[1] for lane in self.lanes.values() if lane.starting]
        asks: list[Future[Any]] = [lane.asking for lane in self.lanes.values() if lane.asking is not None]
        how = rules.lanes_wait(bool(busy), bool(starts), self.settings.tick, bool(asks))
        if how.starts:
            wait_futures([*starts, *asks], timeout=how.timeout, return_when=FIRST_COMPLETED)
            return None
        if how.rest:  # every lane waits for an agent's reset
            self._count_down()
            time.sleep(how.timeout)
            return None
        self._status([lane.session for lane in busy.values() if lane.session is not None])  # new starts too
        wake = self.answered[0] if self.answered is not None and asks else None
        waited = guarded(self.runtime.wait_for_sessions, list(busy), how.timeout, fresh=False, wake=wake)
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
            trace.mark("heard", event.session_id)
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

    def _give_up(self) -> Stop | None:
        """Workers on a computer away longer than `unreachable_wait` are given up (runtime/given_up.py):
        each lane moves to another computer ssh reaches, or here, and asks for its step again."""
        if self.given_up is None:
            return None
        busy = {lane.session.id: lane for lane in self.lanes.values() if lane.session is not None}
        remote_lanes = {name: computer.lanes for name, computer in self.runtime.config.remotes.items()}
        for session in self.given_up.check([lane.session for lane in busy.values() if lane.session]):
            lane = busy[session.id]
            others = [other.computer for other in self.lanes.values() if other is not lane]
            down = self.runtime.tmux.unreachable()
            lane.computer = given_up_rules.moved_to(lane.computer, others, remote_lanes, down)
            self.show(f"    {session.id} {session.command} {session.slug}: {session.last_error}")
            stop = self._settle(lane, EventKind.EXITED, {session.id: session}, session.last_error)
            if stop:
                return stop
        for kept in self.given_up.sweep():
            self.show(f"    {kept.text()}")
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
            trace.mark("through", lane.slug)
            lane.session, lane.adopted = None, False
        return None


def _poke(fd: int) -> None:
    with suppress(OSError):  # full (the wait wakes all the same) or closed (the run is over)
        os.write(fd, b"!")


def _drain(fd: int) -> None:
    with suppress(OSError):  # empty
        while os.read(fd, 512):
            pass
