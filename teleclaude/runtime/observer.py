"""Observing workers: reading their output, noticing exits, vanished panes, rate limits and ended turns,
supervising the quiet ones (reminders, needs-attention, digests), and waiting for their events."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from subprocess import Popen

from teleclaude.adapters.tmux import TmuxError
from teleclaude.errors import Error, ErrorCode
from teleclaude.runtime.context import Context, bad_argument, unknown_session
from teleclaude.runtime.core.dialogs import blocked_message, find_dialog, rejected_command
from teleclaude.runtime.core.limits import DEFAULT_PAUSE, find_limit
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
    observe_idle,
    prompt_visible,
    transition,
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
)
from teleclaude.runtime.launcher import exit_channel
from teleclaude.runtime.panes import Panes

log = logging.getLogger("teleclaude.runtime")

MAX_WAIT = 60.0
WORKING = (SessionState.RUNNING, SessionState.STALLED, SessionState.NEEDS_ATTENTION)
_SCAN_LINES = 2000


class Observer:
    def __init__(self, context: Context, panes: Panes) -> None:
        self.context = context
        self.panes = panes

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
                "Its output is gone; teleclaude__list_sessions() shows what is running.",
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
        sessions = list(sessions)
        live = [s for s in sessions if not s.state.is_final]
        if not live:
            return sessions
        views = self.panes.views()
        fresh = {s.id: self._observe_safely(s, views.get(s.pane_id)) for s in live}
        return [fresh.get(s.id, s) for s in sessions]

    def record_turn_end(self, session_id: str, source: str = "stop hook") -> None:
        """An agent's Stop hook said its turn is over (called from `teleclaude hook stop`)."""
        session = self.context.store.get(session_id)
        if session is None or session.state not in WORKING:
            return
        working = progressed(session, self.context.clock())
        self.context.change(working, Change.TURN_ENDED, source, expect=session.state)

    # --- waiting -------------------------------------------------------------------------------------------

    def wait(self, session_ids: Iterable[str] | None = None, timeout: float = 30.0) -> Waited | Error:
        """Events as they happen: returns as soon as there is one, or after `timeout` (at most 60 s)."""
        store, tmux = self.context.store, self.context.tmux
        timeout = max(0.0, min(float(timeout), MAX_WAIT))
        ids = list(session_ids) if session_ids else [s.id for s in store.sessions() if not s.state.is_final]
        unknown = [i for i in ids if store.get(i) is None]
        if unknown:
            return unknown_session(", ".join(unknown))
        deadline = time.monotonic() + timeout
        waiters = {i: tmux.wait_for(exit_channel(i)) for i in ids}
        try:
            while True:
                sessions = self.refresh(store.sessions(ids))
                events = store.undelivered(ids)
                if events:
                    store.mark_delivered(events)
                    return Waited(tuple(events), tuple(sessions), False)
                over = all(s.state.is_final for s in sessions)
                if over or time.monotonic() >= deadline:
                    return Waited((), tuple(sessions), bool(ids) and not over)
                _sleep_until_signal(
                    waiters.values(), min(self.context.config.poll_interval, deadline - time.monotonic())
                )
        finally:
            for waiter in waiters.values():
                waiter.kill()
                waiter.wait()

    # --- one look at one session ---------------------------------------------------------------------------

    def _observe_safely(self, session: Session, view: PaneView | None) -> Session:
        """A pane can vanish between listing and reading it (a finished cycle ended it): look next time."""
        try:
            return self._observe(session, view)
        except TmuxError as error:
            log.info("session %s: its pane changed while being read (%s)", session.id, error)
            return self.context.store.get(session.id) or session

    def _observe(self, session: Session, view: PaneView | None) -> Session:
        context = self.context
        now = context.clock()
        if view is None or view.pane_pid != session.pane_pid:
            why = "its tmux pane is gone" if view is None else "its tmux pane was respawned"
            return context.change(session, Change.ERRORED, why, error=why)
        if session.state is SessionState.PENDING:
            return session  # still being delivered
        scanned, rows, partial = self._scan(session, view)
        if is_progress(rows):
            scanned = progressed(scanned, now)
        limited = self._limit_in(scanned, [*rows, partial], now)
        if limited is not None:
            return context.change(scanned, Change.RATE_LIMITED, limited, expect=session.state, error=limited)
        if view.dead:
            return self._after_exit(scanned, view, expect=session.state)
        profile = context.config.profiles.get(session.agent)
        screen = context.tmux.screen(session.pane_id, view)
        stopped = self._refused_or_blocked(scanned, [*rows, partial], screen, now) if profile else None
        if stopped is not None:
            return stopped
        prompt = prompt_visible(screen, profile.prompt) if profile else False
        watched, ended = observe_idle(scanned, screen, prompt, now, context.config.idle_threshold)
        watched = replace(watched, activity=activity_of(watched, screen, now, context.config.idle_threshold))
        if ended:
            return context.change(watched, Change.TURN_ENDED, "idle at its prompt", expect=session.state)
        return self._supervise(session, watched, screen, now)

    def _scan(self, session: Session, view: PaneView) -> tuple[Session, list[str], str]:
        """Finished rows new to the runtime (its own reading position, apart from any orchestrator's), and the
        unfinished row under the terminal cursor."""
        try:
            cursor = Cursor.decode(session.scan_cursor) if session.scan_cursor else Cursor.start(view)
            chunk = self.panes.read(session, view, cursor, _SCAN_LINES, 1 << 20)
        except InvalidCursor:
            return session, [], ""
        return replace(session, scan_cursor=chunk.cursor.encode()), list(chunk.rows), chunk.partial

    def _limit_in(self, session: Session, rows: list[str], now: datetime) -> str | None:
        """A rate-limit message in new output: mark the agent unavailable, and say what it was."""
        if session.state is SessionState.RATE_LIMITED:
            return None
        profile = self.context.config.profiles.get(session.agent)
        local = datetime.now().astimezone().tzinfo or UTC
        hit = find_limit(session.agent, rows, now, local, profile.limit_patterns if profile else None)
        if hit is None:
            return None
        self.context.availability.mark_unavailable(session.agent, hit.until, hit.reason)
        detail = f"{hit.reason} until {hit.until.isoformat(timespec='seconds')}: {hit.line}"
        log.info("session %s: %s", session.id, detail)
        return detail

    def _refused_or_blocked(
        self, session: Session, rows: list[str], screen: list[str], now: datetime
    ) -> Session | None:
        """A command the CLI refused (`Unrecognized command '/x'`: nothing reached the model, the step never
        ran) errs the session with the CLI's words; a dialog on the screen (trust, hooks review, a quota's
        "Keep trying / Stop") blocks it, or rate-limits it when the dialog is a limit. Never typed into."""
        if session.state is SessionState.RATE_LIMITED:
            return None
        profile = self.context.config.profiles[session.agent]
        refusal = rejected_command(rows, profile.rejected)
        if refusal is not None:
            why = f"{session.agent} refused the command: {refusal}"
            return self.context.change(session, Change.ERRORED, why, expect=session.state, error=why)
        dialog = find_dialog(screen, profile.dialogs)
        if dialog is None:
            return None
        if dialog.limit:
            local = datetime.now().astimezone().tzinfo or UTC
            hit = find_limit(session.agent, screen, now, local, profile.limit_patterns)
            until = hit.until if hit else now + DEFAULT_PAUSE
            self.context.availability.mark_unavailable(session.agent, until, "quota_exhausted")
            detail = f"quota_exhausted until {until.isoformat(timespec='seconds')}: {dialog.name} dialog"
            return self.context.change(
                session, Change.RATE_LIMITED, detail, expect=session.state, error=detail
            )
        why = f"{ErrorCode.WORKER_BLOCKED.value}: {blocked_message(session.agent, dialog, screen)}"
        return self.context.change(session, Change.ERRORED, why, expect=session.state, error=why)

    def _after_exit(self, session: Session, view: PaneView, expect: SessionState) -> Session:
        code = view.dead_status
        detail = f"exit status {code}" if code is not None else "exited"
        if code == 0:
            return self.context.change(session, Change.EXITED_OK, detail, expect=expect, exit_code=code)
        error = f"the CLI {detail}"
        change = Change.EXITED_FAILED
        return self.context.change(session, change, detail, expect=expect, error=error, exit_code=code)

    def _supervise(self, before: Session, session: Session, screen: list[str], now: datetime) -> Session:
        """Reminders, needs-attention and digests, due by the stored timestamps (see core/supervision.py)."""
        config = self.context.config
        events: list[Event] = []
        if cycle_expired(session, now, config):  # its process died: the orchestrator must not wait on
            session = replace(session, cycle_started_at=None)
            if session.state is SessionState.TURN_ENDED:
                session, announced = transition(
                    session, Change.TURN_ENDED, now, "the post-report cycle never ended"
                )
                events += announced
        due = nudge(session, now, config, session.activity is Activity.QUIET)
        if isinstance(due, NeedsAttention):
            session, stuck = transition(session, Change.NEEDS_ATTENTION, now, due.detail, error=due.detail)
            events += stuck
        elif isinstance(due, Reminder):
            session, sent = reminded(session, now, due)
            events += sent
        if digest_due(session, now, config):
            session, report = digest(session, now, screen, config)
            events.append(Event(session.id, EventKind.DIGEST, now, report.text()))
        if session == before:
            return session
        saved = self.context.store.save(session, expect=before.state, events=events)
        if saved is None:
            return (
                self.context.store.get(before.id) or session
            )  # another observer was quicker; it did the same
        if isinstance(due, Reminder):
            self.panes.type_or_log(saved, due.text, interrupt=due.interrupt)
        return saved


def _sleep_until_signal(waiters: Iterable[Popen[bytes]], seconds: float) -> None:
    deadline = time.monotonic() + max(seconds, 0.0)
    while time.monotonic() < deadline:
        if any(w.poll() is not None for w in waiters):
            return
        time.sleep(0.05)
