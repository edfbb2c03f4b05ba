"""Observing workers: reading their output, noticing exits, vanished panes, rate limits and ended turns,
supervising the quiet ones (reminders, needs-attention, digests), and waiting for their events."""

from __future__ import annotations

import logging
import re
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from subprocess import Popen

from teleclaude.adapters import procs, sandbox
from teleclaude.adapters.tmux import TURN_END_OPTION, TmuxError
from teleclaude.agents.profile import AgentProfile, Blocker
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core.tool_lines import tool_lines
from teleclaude.runtime import trace
from teleclaude.runtime.context import Context, bad_argument, unknown_session
from teleclaude.runtime.core.apiwait import api_wait_limit, tool_shown
from teleclaude.runtime.core.blockers import blocked_text, find_blocker, refusal_text, refused_command
from teleclaude.runtime.core.continuation import not_replayed
from teleclaude.runtime.core.limits import DEFAULT_PAUSE, LimitHit, find_limit, reset_time
from teleclaude.runtime.core.looks import due, look_every, turn_over
from teleclaude.runtime.core.marks import turn_end_prompt, turn_end_stamp
from teleclaude.runtime.core.screens import observe_idle, waiting_for_input
from teleclaude.runtime.core.sessions import (
    Activity,
    Change,
    Cursor,
    Event,
    EventKind,
    InvalidCursor,
    Output,
    PaneView,
    Session,
    SessionState,
    Waited,
    output_stamp,
    seen_of,
    transition,
    unseen_rows,
)
from teleclaude.runtime.core.supervision import (
    NeedsAttention,
    Reminder,
    activity_of,
    cycle_expired,
    digest,
    digest_due,
    is_progress,
    nudge,
    progressed,
    reminded,
    worker_name,
)
from teleclaude.runtime.hook_news import HookNews, local_zone
from teleclaude.runtime.panes import Panes, scan_cursor

log = logging.getLogger("teleclaude.runtime")

MAX_WAIT = 60.0
_LOOKS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="look")  # the looks at poked workers
_SCAN_LINES = 2000
_BLOCKABLE = (SessionState.RUNNING, SessionState.STALLED, SessionState.TURN_ENDED)


class Observer(HookNews):
    def __init__(self, context: Context, panes: Panes) -> None:
        self.context = context
        self.panes = panes
        # One `tmux wait-for` per watched session, kept from one wait to the next (a run loop waits every
        # second: starting a client per session per wait was most of its own CPU), with its pidfd (every look
        # and sleep selects on them); ended with the observer.
        self._waiters: dict[str, Popen[bytes]] = {}
        self._pidfds = procs.Pidfds()
        # The sessions the last wait looked at, and when. A run loop waits again each second, from the rows
        # of the look just taken (a look lists the panes, reads those that printed); it looks next once
        # `_every` is over (core/looks.py: a poll interval, longer while the looks find nothing new), or at
        # once when a watched pane exits or a hook wakes it. `_printed`: the look under way read one that did.
        self._looked: tuple[frozenset[str], float] = (frozenset(), float("-inf"))
        self._every, self._printed = 0.0, False
        # (agent, window) -> when the usage this observer last kept was seen: each look writes only news
        self._usage_seen: dict[tuple[str, str], datetime] = {}
        # session id -> the marks its channel held at its last look (those are not its pane's: `_clear_mark`)
        self._channel_marks: dict[str, frozenset[str]] = {}
        # What the last look read of each pane: a pane that printed nothing since (by its output events, when
        # `Tmux.follow`s, or by tmux's time of its last output) is not read again (its screen and rows cannot
        # have changed).
        self._read: dict[str, _Read] = {}
        # The screen the last scan of each pane saw: what a scan that lost its place reads again is new only
        # where it differs (`_scan`)
        self._shown: dict[str, tuple[str, ...]] = {}
        # session id -> (path, size, time) of its CLI's record when read again after its turn ended: read
        # once more only when it changed (spend.read_again)
        self._spend_read: dict[str, tuple[str, int, int]] = {}
        # records a sandboxed worker's report_status, left in its channel (Cycle.report; set by api.py)
        self.report: Callable[[str, str, str | None, str], object] | None = None
        # session id -> its channel's pipe here, read to be woken by its hooks (None: it has no channel); the
        # sessions whose pipes were poked, not yet looked at
        self._listening: dict[str, int | None] = {}
        self._unmarked: list[tuple[str, str]] | None = None
        self._pokes: frozenset[str] = frozenset()
        # ended once nothing holds the observer, or at exit (atexit.register(self._stop_waiters) kept every
        # observer, and its last clients unreaped: hundreds of zombie `tmux: client`s in a test worker)
        weakref.finalize(self, procs.end, self._waiters, self._listening, self._pidfds)

    # --- looking -------------------------------------------------------------------------------------------

    def list_sessions(self, include_finished: bool = True) -> list[Session]:
        sessions = self.refresh(self.context.store.sessions())
        return [s for s in sessions if include_finished or not s.state.is_final]

    def output(
        self, session_id: str, cursor: str | None = None, max_lines: int = 200, max_bytes: int = 16_000
    ) -> Output | Error:
        session = self.context.store.get(session_id)
        if session is None:
            return unknown_session(session_id)
        if max_lines < 1 or max_bytes < 64:
            return bad_argument("max_lines must be at least 1 and max_bytes at least 64")
        view = self.panes.views().get(session.pane_id)
        if view is None or view.pane_pid != session.pane_pid:
            return Error(
                ErrorCode.UNKNOWN_SESSION,
                f"session {session_id} has no pane any more (state {session.state.value}).\n"
                "Its output is gone; the session list shows what is running.",
                next_step=call("list_sessions"),
            )
        try:
            parsed = Cursor.decode(cursor) if cursor else None
            chunk = self.panes.read(session, view, parsed, max_lines, max_bytes)
        except InvalidCursor as error:
            return Error(
                ErrorCode.INVALID_CURSOR, f"{error}.\nCall again without a cursor to start from the screen."
            )
        return Output(session, chunk)

    def refresh(self, sessions: Iterable[Session]) -> list[Session]:
        """Look at every live session once: exits, vanished panes, limits, and turns that ended."""
        return self._look_at(list(sessions))[0]

    def _look_first(
        self, sessions: list[Session], first: frozenset[str], views: dict[str, PaneView] | None = None
    ) -> list[Session]:
        """The sessions, those of `first` looked at (the others' kept for the next look; `views`: listed)."""
        if not first:
            return sessions
        chosen = [s for s in sessions if s.id in first]
        over = [s for s in chosen if views is not None and turn_over(views.get(s.pane_id))]
        # workers on another computer: their branches brought back at once, their marks taken away together
        ahead = self.panes.captured_ahead(chosen, views)  # (their captures: one ssh client a computer)
        with self._marks_together(), ahead, self.context.turn_ends_ahead(over):
            looked = {s.id: s for s in self._look_at(chosen, whole=False, views=views)[0]}
        return [looked.get(s.id, s) for s in sessions]

    def _look_at(
        self,
        sessions: list[Session],
        news: Callable[[], bool] | None = None,
        whole: bool = True,
        views: dict[str, PaneView] | None = None,
    ) -> tuple[list[Session], bool]:
        """`refresh`, and whether it looked at every live session: `news` is asked after each, and a look it
        answers True stops there (a hook's news is told before the rest are looked at: at thirty workers
        under load a look outlasted second after second of hand-overs). A whole look sets when the next is
        due (`_every`: later when no pane printed and no session changed). A look not `whole` (the workers
        whose hooks poked, or whose panes moved on another computer) looks at them side by side: each waits
        on a capture and a write to the store. `views`: the panes as just listed (else listed now)."""
        live = [s for s in sessions if not s.state.is_final]
        if not live:
            return sessions, True
        self._printed = False
        listed = self.panes.views() if views is None else views
        down = self.context.tmux.unreachable()  # after the views: they find out

        def look(s: Session) -> Session:
            view = listed.get(s.pane_id)
            return self._unreachable(s) if s.computer in down else self._observe_safely(s, view)

        if not whole:
            fresh = dict(zip([s.id for s in live], _LOOKS.map(look, live), strict=True))
            return [fresh.get(s.id, s) for s in sessions], False
        fresh = {}
        for s in live:
            fresh[s.id] = look(s)
            if news is not None and len(fresh) < len(live) and news():
                return [fresh.get(s.id, s) for s in sessions], False
        config, changed = self.context.config, any(fresh[s.id].state is not s.state for s in live)
        self._every = look_every(self._every, config.poll_interval, self._printed or changed)
        watched = {s.pane_id for s in fresh.values() if not s.state.is_final}
        self._read = {pane: read for pane, read in self._read.items() if pane in watched}
        self._shown = {pane: shown for pane, shown in self._shown.items() if pane in watched}
        self._spend_read = {i: read for i, read in self._spend_read.items() if i in fresh}
        self._channel_marks = {i: marks for i, marks in self._channel_marks.items() if i in fresh}
        return [fresh.get(s.id, s) for s in sessions], True

    # --- waiting -------------------------------------------------------------------------------------------

    def wait(
        self,
        session_ids: Iterable[str] | None = None,
        timeout: float = 30.0,
        fresh: bool = True,
        wake: int | None = None,
    ) -> Waited | Error:
        """Events as they happen: returns as soon as there is one, or after `timeout` (at most 60 s).

        `fresh=False` (a caller that waits again and again, as `run`'s loop, with short waits while a worker
        starts): a look less than a poll interval old will do, whatever the timeout; a pane's exit or a hook's
        news (their wake-up) is looked at at once all the same. `wake`: a file descriptor of the caller's
        (`run`'s lanes: a next_work answered on a thread) whose being readable ends a sleep, with no event."""
        store, tmux = self.context.store, self.context.tmux
        timeout = max(0.0, min(float(timeout), MAX_WAIT))
        ids = list(session_ids) if session_ids else [s.id for s in store.sessions() if not s.state.is_final]
        sessions = store.sessions(ids)  # one read of the rows, which also tells the unknown ids
        found = {s.id for s in sessions}
        unknown = [i for i in ids if i not in found]
        if unknown:
            return unknown_session(", ".join(unknown))
        deadline = time.monotonic() + timeout
        poll = self.context.config.poll_interval
        # Only a wait that sleeps before its deadline skips its first look: a short one always looks. A run's
        # wait (not fresh) takes a session that joined since the last look (a worker just given its command)
        # at the next: thirty hand-overs looked at thirty panes each time one more worker joined
        every = poll if fresh else due(self._every, poll)  # a run's: longer while looks find nothing new
        just_looked = (timeout >= poll or not fresh) and self._looked_within(ids, every, joined_too=not fresh)
        poked, self._pokes = self._pokes, frozenset()  # heard by a wait that returned for its caller's `wake`
        woken, just_looked, remotes = bool(poked), just_looked and not poked, self.context.config.remotes
        # listened to before the look: a mark left after it pokes the pipe (rings its computer's waiter)
        live = [s for s in sessions if not s.state.is_final]
        channels = self._listened([s for s in live if s.computer not in remotes])
        rings, views = self._rings(live) if timeout else {}, None
        while True:
            if not just_looked:
                # what a hook stored is told before a look at every pane (the look comes with the next wait):
                # thirty hand-overs woke a wait thirty times, each looking at thirty panes first; so is what a
                # sandboxed worker's hook left (it poked its pipe), and a remote pane that moved (a ring)
                ready = procs.sleep_until_ended((), 0, [*channels, *rings])[1]
                rang, moved, listed = self._rung(sessions, rings, ready)
                poked |= self._poked(channels, ready) | moved
                views, woken = listed or views, woken or rang
                sessions, poked, views = self._look_first(sessions, poked, views), frozenset(), None
                stored = store.undelivered(ids) if woken or not fresh else []
                if stored:
                    store.mark_delivered(stored)
                    return Waited(tuple(stored), tuple(sessions), False)
                # a look also stops at a sandboxed worker's poke, a computer's waiter, and the caller's `wake`
                pipes = [*self._listening_to(), *rings, *([wake] if wake is not None else [])]
                with procs.Exits(self._waiters.values(), pipes, self._pidfds) as news:
                    sessions, whole = self._look_at(sessions, news)
                if whole:
                    self._looked = (frozenset(ids), time.monotonic())
            events = store.undelivered(ids)
            if events:
                store.mark_delivered(events)
                return Waited(tuple(events), tuple(sessions), False)
            down = tmux.unreachable()  # their waiters could not connect: the sleep is the poll
            self._stop_waiters([s.id for s in sessions if s.state.is_final or s.computer in down])
            watching = [s for s in sessions if not s.state.is_final and s.computer not in down]
            here = [s for s in watching if s.computer not in remotes]
            watched = [s.id for s in here]
            # started even by a wait that ends now (its look outlasted it, on a busy machine): the next one
            # sleeps on them rather than looking again. A worker here has a `wait-for` client of its own; the
            # workers on another computer share one waiter there (`_rings`), on that computer's tmux server
            waiters = [self._waiter(s.id, tmux) for s in here] if timeout else []
            rings = self._rings(watching) if timeout else {}
            over = all(s.state.is_final for s in sessions)
            if over or time.monotonic() >= deadline:
                return Waited((), tuple(sessions), bool(ids) and not over)
            channels = self._listened(here)
            pipes = [*channels, *rings, *([wake] if wake is not None else [])]
            left = min(poll, deadline - time.monotonic())
            ended, ready = procs.sleep_until_ended(waiters, left, pipes, self._pidfds)
            rang, moved, views = self._rung(sessions, rings, ready)
            poked = poked | self._poked(channels, ready) | moved
            woken = self._forget_signalled(watched) or ended or bool(poked) or rang
            if wake in ready:  # the caller's own news: a hook's is told at its next wait
                self._pokes = poked
                return Waited((), tuple(sessions), False)
            sessions = store.sessions(ids)
            just_looked = not (fresh or woken) and self._looked_within(ids, due(self._every, poll), True)

    def _looked_within(self, ids: list[str], seconds: float, joined_too: bool = False) -> bool:
        """The last look took in every one of `ids` (`joined_too`: whichever it took in; those that joined
        since are looked at with the rest at the next), less than `seconds` ago."""
        looked_ids, looked_at = self._looked
        return time.monotonic() - looked_at < seconds and (joined_too or set(ids) <= looked_ids)

    # --- one look at one session ---------------------------------------------------------------------------

    def _unreachable(self, session: Session) -> Session:
        """A session whose computer ssh cannot reach: not gone (its worker may work on, its hooks mark its
        pane), only unread; marked so until its computer answers and a look reads its pane again."""
        if session.activity is Activity.UNREACHABLE or not session.pane_id:
            return session
        why = "session %s: %s cannot be reached; its pane is read again once it can"
        log.warning(why, session.id, session.computer)
        store, marked = self.context.store, replace(session, activity=Activity.UNREACHABLE)
        return store.save(marked, expect=session.state) or store.get(session.id) or session

    def _observe_safely(self, session: Session, view: PaneView | None) -> Session:
        """A pane can vanish between listing and reading it (a finished cycle ended it): look next time."""
        try:
            return self._observe(session, view)
        except TmuxError as error:
            log.info("session %s: its pane changed while being read (%s)", session.id, error)
            return self.context.store.get(session.id) or session

    def _still_starting(self, session: Session, now: datetime) -> Session:
        """A worker whose launcher holds its step while its tmux session opens (a push over ssh first); one
        that never opened (its launcher was killed) frees the step."""
        config = self.context.config
        if now - session.created_at < timedelta(seconds=config.ssh_timeout + config.startup_timeout):
            return session
        why = "its worker never started (the process starting it ended first)"
        return self.context.change(session, Change.ERRORED, why, error=why)

    def _observe(self, session: Session, view: PaneView | None) -> Session:
        context = self.context
        now = context.clock()
        if session.state is SessionState.PENDING and not session.pane_id:
            return self._still_starting(session, now)
        if view is None or view.pane_pid != session.pane_pid:
            why = "its tmux pane is gone" if view is None else "its tmux pane was respawned"
            return context.change(session, Change.ERRORED, why, error=why)
        if session.state is SessionState.PENDING:
            return session  # still being delivered
        # one listing of the worker's channel rather than a read of each file it may hold (most hold none)
        remote = session.computer in self.context.config.remotes
        files = frozenset() if remote else sandbox.listing(context.store.path, session.id)
        view, named = self._with_channel(session, view, files)
        session = self._channel_transcript(session, files, named)
        session = self._channel_report(session, files)
        transcript = self._transcript(session)
        self._transcript_usage(session, transcript)
        self._marked_usage(session, view)
        self._marked_spend(session, view)
        if session.state is SessionState.TURN_ENDED or view.dead:  # after its stop hook's reading is kept
            self._spend_again(session)
        failed = self._turn_error(session, transcript) or self._marked_failure(session, view)
        if failed is not None:  # typed errors come before the words on the screen
            return failed
        scanned, rows, partial, screen = self._look(session, view)
        resumed: tuple[Event, ...] = ()  # kept when nothing else changes the state on this look
        if is_progress(_not_waiting(rows, self.context.config.profiles.get(session.agent))):
            scanned, resumed = progressed(scanned, now)
        limited = self._limit_in(scanned, [*rows, partial], now)
        if limited is not None:
            return self._record_limit(scanned, limited, limited.line, session.state)
        if view.dead:
            return self._after_exit(scanned, view, expect=session.state)
        turn_end = self._sealed(session, TURN_END_OPTION, view.turn_end)
        if turn_end is not None:
            # the stop hook of a worker on another computer marked its pane (a sandboxed one its channel):
            # recorded as a local hook's is
            trace.mark("hook", session.id, at=turn_end_stamp(turn_end))  # its news is found only now
            trace.mark("read", session.id)
            hooked = self._hook_ended(scanned, now, session.state, turn_end_prompt(turn_end))
            if hooked is not None:  # recorded: the mark has done its work
                self._clear_mark(session, TURN_END_OPTION)
            return hooked or context.store.get(session.id) or scanned  # else the mark stays for the next look
        profile = context.config.profiles.get(session.agent)
        blocked = self._blocked(scanned, [*rows, partial], screen, now, expect=session.state)
        if blocked is not None:
            return blocked
        if profile and _tool_shown(tuple(screen), profile.tool_running):
            scanned = replace(scanned, tool_seen_at=now)  # the API wait after it is counted from here
        waited = self._api_wait_in(scanned, screen, now)
        if waited is not None:
            return self._record_limit(scanned, waited, waited.line, session.state)
        prompt = _waiting_for_input(tuple(screen), profile.prompt, profile.busy) if profile else False
        watched, ended = observe_idle(scanned, screen, prompt, now, context.config.idle_threshold)
        retry = profile.retry if profile else ""
        activity = activity_of(watched, screen, now, context.config.idle_threshold, retry)
        if activity is not watched.activity:
            watched = replace(watched, activity=activity)
        if ended:
            return context.change(watched, Change.TURN_ENDED, "idle at its prompt", expect=session.state)
        return self._supervise(session, watched, screen, now, resumed)

    def _look(self, session: Session, view: PaneView) -> tuple[Session, list[str], str, list[str]]:
        """`_scan` and the screen; of a pane that printed nothing since the last look (by its output events or
        by tmux's time of its last output) with the same view and reading position, what that look read,
        without a capture."""
        tmux = self.context.tmux
        tmux.watch(session.tmux_session, session.pane_id)
        events = tmux.output_mark(session.pane_id)  # before the capture: output during it changes the mark
        stamp = output_stamp(view)
        mark = ("events", events) if events is not None else None if stamp is None else ("activity", stamp)
        shape = (view.pane_pid, view.history_size, view.cursor_y, view.height, view.alternate)
        last = self._read.get(session.pane_id)
        if (
            mark is not None
            and last is not None
            and last == _Read(mark, shape, session.scan_cursor, last.partial, last.screen)
        ):
            return session, [], last.partial, list(last.screen)
        self._printed = True  # (or nothing tells whether it did)
        scanned, rows, partial, screen = self._scan(session, view)
        if mark is not None:
            self._read[session.pane_id] = _Read(mark, shape, scanned.scan_cursor, partial, tuple(screen))
        else:
            self._read.pop(session.pane_id, None)
        return scanned, rows, partial, screen

    def _scan(self, session: Session, view: PaneView) -> tuple[Session, list[str], str, list[str]]:
        """Finished rows new to the runtime (its own reading position, apart from any orchestrator's), the
        unfinished row under the terminal cursor, and the screen. Of an alternate screen, read whole when it
        changed, only the rows that were not on it at the last read (an old limit row must not limit the next
        turn again)."""
        try:
            chunk, screen = self.panes.look(session, view, scan_cursor(session, view), _SCAN_LINES, 1 << 20)
        except InvalidCursor:
            return session, [], "", self.context.tmux.screen(session.pane_id, view)
        rows, seen = list(chunk.rows), session.seen_rows
        if not chunk.alternate_screen:  # a resumed worker's: the rows its CLI replayed, kept
            seen = seen if session.resumed_from else ()
            rows = not_replayed(rows, seen)
            shown = self._shown.get(view.pane_id)
            if chunk.lines_missed is None and shown is not None:
                # the rows after its reading position changed, so the screen was read again: a CLI that
                # redraws rows above its cursor (one that keeps it in its input box, below its spinner and
                # retry countdown: tests/realcli/NOTES.md) printed nothing new in the rows shown as before
                rows, _ = unseen_rows(rows, seen_of(shown))
            self._shown[view.pane_id] = tuple(screen)
        elif rows:  # the screen changed
            rows, seen = unseen_rows(rows, seen)
        scanned = replace(session, scan_cursor=chunk.cursor.encode(), seen_rows=seen)
        return scanned, rows, chunk.partial, screen

    def _limit_in(self, session: Session, rows: list[str], now: datetime) -> LimitHit | None:
        """A rate-limit message in new output."""
        if session.state is SessionState.RATE_LIMITED:
            return None
        profile = self.context.config.profiles.get(session.agent)
        patterns = profile.limit_patterns if profile else None
        return find_limit(session.agent, rows, now, local_zone(now), patterns)

    def _api_wait_in(self, session: Session, screen: list[str], now: datetime) -> LimitHit | None:
        """Waiting on the API with no output for `api_wait_limit` (core/apiwait.py: silent retries)."""
        profile = self.context.config.profiles.get(session.agent)
        if profile is None:
            return None
        limit = self.context.config.api_wait_limit
        return api_wait_limit(session, screen, now, limit, profile.api_wait, profile.tool_running)

    def _blocked(
        self, session: Session, rows: list[str], screen: list[str], now: datetime, expect: SessionState
    ) -> Session | None:
        """What keeps a working session from going on by itself (blockers.py), never typed into: a command
        the CLI refused in its new output (`Unrecognized command '/x'`: nothing reached the model, the step
        never ran) errs the session with the CLI's words; a dialog that opened needs attention, or, when it
        is the CLI's rate-limit dialog, makes the agent unavailable (reminders stop with the state)."""
        if session.state not in _BLOCKABLE:
            return None
        refusal = refused_command(session.agent, rows)
        if refusal is not None:
            why = refusal_text(session.agent, refusal)
            log.info("session %s: %s", session.id, why)
            return self.context.change(session, Change.ERRORED, why, expect=expect, error=why)
        blocker = _blocker(session.agent, tuple(screen))
        if blocker is None:
            return None
        text = blocked_text(session.agent, blocker, session.workdir, screen)
        detail = f"WORKER_BLOCKED: {text.splitlines()[0]}"
        log.info("session %s: %s", session.id, detail)
        if blocker.rate_limit:
            return self._limited_by_dialog(session, screen, now, expect, detail, text)
        if session.state is SessionState.TURN_ENDED:
            return None  # nothing types into it until someone sends a line, which is refused
        return self.context.change(session, Change.NEEDS_ATTENTION, detail, expect=expect, error=text)

    def _limited_by_dialog(
        self, session: Session, screen: list[str], now: datetime, expect: SessionState, detail: str, text: str
    ) -> Session:
        """The limit's message, with its reset, is on the screen above the dialog (one without a reset, such
        as a daily quota's: the default pause)."""
        hit = self._limit_in(session, screen, now)
        reason = hit.reason if hit else "rate_limited"
        until = reset_time(" ".join(screen), now, local_zone(now)) or (
            hit.until if hit else now + DEFAULT_PAUSE
        )
        return self._record_limit(session, LimitHit(detail, until, reason), detail, expect, error=text)

    def _after_exit(self, session: Session, view: PaneView, expect: SessionState) -> Session:
        code = view.dead_status
        detail = f"exit status {code}" if code is not None else "exited"
        if code == 0:
            return self.context.change(session, Change.EXITED_OK, detail, expect=expect, exit_code=code)
        error = f"the CLI {detail}"
        change = Change.EXITED_FAILED
        return self.context.change(session, change, detail, expect=expect, error=error, exit_code=code)

    def recent_tools(self, session_ids: Iterable[str], now: datetime) -> dict[str, tuple[str, ...]]:
        """session id -> its latest tool uses as its agent CLI's tool hook recorded them, one line each
        (sessions without any left out)."""
        uses = self.context.store.recent_tool_uses(session_ids)
        return {session_id: tuple(tool_lines(found, now)) for session_id, found in uses.items()}

    def _supervise(
        self,
        before: Session,
        session: Session,
        screen: list[str],
        now: datetime,
        resumed: tuple[Event, ...] = (),
    ) -> Session:
        """Reminders, needs-attention and digests, due by the stored timestamps (see core/supervision.py);
        `resumed`: the event of progress that set a stalled worker running on this look."""
        config = self.context.config
        events: list[Event] = [*resumed]
        if cycle_expired(session, now, config):  # its process died: the orchestrator must not wait on
            session = replace(session, cycle_started_at=None)
            if session.state is SessionState.TURN_ENDED:
                session, announced = transition(
                    session, Change.TURN_ENDED, now, "the post-report cycle never ended"
                )
                events += announced
        waiting = session.activity is Activity.WAITING_API  # on the API's retries: a reminder would cut them
        due = None if waiting else nudge(session, now, config, session.activity is Activity.QUIET)
        unresponsive = None
        if isinstance(due, NeedsAttention) and config.unresponsive_pause > 0:
            unresponsive = now + timedelta(seconds=config.unresponsive_pause)
            detail = f"unresponsive until {unresponsive.isoformat(timespec='seconds')}: {due.detail}"
            session, limited = transition(session, Change.RATE_LIMITED, now, detail, error=due.detail)
            events += limited
        elif isinstance(due, NeedsAttention):
            session, stuck = transition(session, Change.NEEDS_ATTENTION, now, due.detail, error=due.detail)
            events += stuck
        elif isinstance(due, Reminder):
            session, sent = reminded(session, now, due)
            events += sent
        if digest_due(session, now, config):
            session, report = digest(
                session, now, screen, config, tools=self.recent_tools([session.id], now).get(session.id, ())
            )
            events.append(Event(session.id, EventKind.DIGEST, now, report.text()))
            if session.parent and config.parent_digests:  # the supervisor types it at the parent's idle
                session = replace(session, parent_pending=report.wake(worker_name(session)))
        if session == before:
            return session
        saved = self.context.store.save(session, expect=before.state, events=events)
        if saved is None:  # another observer was quicker; it did the same
            return self.context.store.get(before.id) or session
        if isinstance(due, Reminder):
            self.panes.type_or_log(saved, due.text, interrupt=due.interrupt)
        if unresponsive is not None:  # as a limit: the planner falls back to the step's next agent
            self.context.availability.mark_unavailable(saved.agent, unresponsive, "unresponsive")
        return saved


@dataclass(frozen=True)
class _Read:
    """A look's reading of a pane: output mark (events count or output time), shape, position, screen."""

    mark: tuple[str, int]
    shape: tuple[int, int, int, int, bool]
    scan_cursor: str
    partial: str
    screen: tuple[str, ...]


def _not_waiting(rows: list[str], profile: AgentProfile | None) -> list[str]:
    """The rows but the CLI's retry countdown (its profile's `api_wait`): a countdown is no progress."""
    if profile is None or not profile.api_wait:
        return rows
    return [row for row in rows if not re.search(profile.api_wait, row)]


# A busy worker's screen is mostly the one the last look saw (`_look` reuses it without a capture): what is
# read off a screen alone is kept for the screens last seen, so thirty quiet panes cost a lookup each a look.
_SCREENS = 256


@lru_cache(maxsize=_SCREENS)
def _blocker(agent: str, screen: tuple[str, ...]) -> Blocker | None:
    return find_blocker(agent, screen)


@lru_cache(maxsize=_SCREENS)
def _tool_shown(screen: tuple[str, ...], tool_running: str) -> bool:
    return tool_shown(list(screen), tool_running)


@lru_cache(maxsize=_SCREENS)
def _waiting_for_input(screen: tuple[str, ...], prompt: str, busy: str) -> bool:
    return waiting_for_input(list(screen), prompt, busy)
