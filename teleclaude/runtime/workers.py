"""The worker runtime: start an agent CLI in tmux, type its command, watch it, and say when it is done.

`Runtime` is the library API behind `teleclaude__run_agent_command` and the session tools. Every method
returns a value (errors are `Error`s), reads tmux through `adapters.tmux` and keeps sessions and events in
SQLite (`adapters.sessions_db`), so a restarted server, or a CLI next to it, picks up where it stopped.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TypeVar

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.config.matrix import THINKING_MODES
from teleclaude.config.profiles import AgentProfile, RuntimeConfig
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.runtime.core.limits import find_limit
from teleclaude.runtime.core.sessions import (
    Activity,
    Chunk,
    Cursor,
    Ended,
    Event,
    EventKind,
    InvalidCursor,
    Output,
    PaneView,
    Reported,
    Session,
    SessionState,
    StaleView,
    Started,
    Waited,
    observe_idle,
    prompt_visible,
    read_since,
)
from teleclaude.runtime.core.supervision import (
    Directive,
    Finished,
    NeedsAttention,
    Reminder,
    activity_of,
    assess,
    cycle_expired,
    digest,
    digest_due,
    is_progress,
    nudge,
    progressed,
    reminded,
    resumed,
)

log = logging.getLogger("teleclaude.runtime.workers")

MAX_WAIT = 60.0
_WORKING = (SessionState.RUNNING, SessionState.STALLED, SessionState.NEEDS_ATTENTION)
_COMMAND = re.compile(r"[a-z0-9][a-z0-9:._-]{0,80}")
_SCAN_LINES = 2000


class Runtime:
    def __init__(
        self,
        config: RuntimeConfig,
        store: SessionStore,
        availability: AvailabilityStore,
        tmux: Tmux | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.availability = availability
        self.tmux = tmux or Tmux(config.socket, config.tmux_timeout)
        self.clock = clock
        self.env = os.environ if env is None else env

    # --- starting ------------------------------------------------------------------------------------------

    def run_agent_command(
        self,
        computer: str,
        command: str,
        args: str,
        project: str,
        agent: str,
        thinking_mode: str,
        subfolder: str | None = None,
    ) -> Started | Error:
        problem = self._check_request(computer, command, args, agent, thinking_mode)
        if problem:
            return problem
        workdir = _workdir(project, subfolder)
        if isinstance(workdir, Error):
            return workdir
        profile = self.config.profiles[agent]
        binary = _find_binary(profile, self.env)
        if binary is None:
            names = " or ".join(profile.binaries)
            return Error(
                ErrorCode.AGENT_NOT_INSTALLED,
                f"{names} is not on PATH.\nInstall the {agent} CLI, set [runtime.agents.{agent}] binary in "
                "teleclaude.toml, or mark it unavailable: "
                f"teleclaude__mark_agent_unavailable(agent={agent!r}).",
            )
        now = self.clock()
        session = Session(
            id=secrets.token_hex(4),
            agent=agent,
            command=command,
            args=args,
            project=str(Path(project).resolve()),
            subfolder=subfolder or None,
            state=SessionState.PENDING,
            created_at=now,
            updated_at=now,
            computer=computer,
        )
        session = replace(session, tmux_session=f"tc-{session.id}")
        try:
            started = self.tmux.start(
                session.tmux_session,
                str(workdir),
                profile.argv(binary, thinking_mode),
                self._worker_env(session),
                _exit_channel(session.id),
                self.config.history_limit,
                (self.config.width, self.config.height),
            )
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, f"{error}\nIs tmux installed and working? Try: tmux -V")
        session = replace(session, pane_id=started.pane_id, pane_pid=started.pane_pid)
        self.store.add(session)
        return self._deliver(session, profile)

    def _check_request(
        self, computer: str, command: str, args: str, agent: str, thinking_mode: str
    ) -> Error | None:
        if computer not in self.config.computers:
            known = ", ".join(self.config.computers)
            return Error(
                ErrorCode.UNKNOWN_COMPUTER,
                f"{computer!r} is not a computer this runtime knows ({known}).\n"
                'Use computer="local", or name this machine in teleclaude.toml: [runtime] computers = [...].',
            )
        if agent not in self.config.profiles:
            known = ", ".join(self.config.profiles)
            return Error(
                ErrorCode.UNKNOWN_AGENT, f"{agent!r} is not an agent the runtime can start ({known})."
            )
        if thinking_mode not in THINKING_MODES:
            return _bad_argument(
                f"thinking_mode must be one of {', '.join(THINKING_MODES)}, not {thinking_mode!r}"
            )
        if not _COMMAND.fullmatch(command):
            return _bad_argument(
                f"{command!r} is not a command name such as next-build or prompts:next-build"
            )
        if any(ord(char) < 32 for char in args) or len(args) > 500:
            return _bad_argument("args must be one short line (the slug), without control characters")
        return None

    def _worker_env(self, session: Session) -> dict[str, str]:
        env = {"TELECLAUDE_SESSION_ID": session.id, "TELECLAUDE_DB": str(self.store.path)}
        for name in ("PATH", "HOME"):
            if self.env.get(name):
                env[name] = self.env[name]
        return env

    def _deliver(self, session: Session, profile: AgentProfile) -> Started | Error:
        """Wait for the CLI's prompt, paste the command, settle, press Enter, and check the screen moved."""
        text = profile.slash_command(session.command, session.args)
        try:
            screen = self._wait_for_prompt(session, profile)
            if isinstance(screen, Error):
                return self._fail(session, screen)
            self.tmux.send_text(session.pane_id, text)
            time.sleep(self.config.settle)
            if not self._press_enter(session):
                return self._fail(
                    session, _delivery_failed(session, text, "the screen did not change after Enter")
                )
        except TmuxError as error:
            return self._fail(session, Error(ErrorCode.TMUX_FAILED, str(error)))
        view = self.tmux.views()[session.pane_id]
        now = self.clock()
        running = replace(
            session,
            state=SessionState.RUNNING,
            updated_at=now,
            delivered_at=now,
            scan_cursor=Cursor.start(view).encode(),
            screen_hash="",  # so the first look after delivery counts as a change
            last_change_at=now,
            last_progress_at=now,
        )
        return Started(self.store.save(running, expect=SessionState.PENDING) or running)

    def _wait_for_prompt(self, session: Session, profile: AgentProfile) -> list[str] | Error:
        deadline = time.monotonic() + self.config.startup_timeout
        while True:
            view = self.tmux.views().get(session.pane_id)
            if view is None or view.dead:
                screen = self.tmux.screen(session.pane_id, view) if view else []
                return _delivery_failed(session, "", "the CLI exited before showing its prompt", screen)
            screen = self.tmux.screen(session.pane_id, view)
            if prompt_visible(screen, profile.prompt):
                return screen
            if time.monotonic() > deadline:
                why = f"no prompt after {self.config.startup_timeout:g}s"
                return _delivery_failed(session, "", why, screen)
            time.sleep(0.1)

    def _press_enter(self, session: Session, attempts: int = 3) -> bool:
        """Enter, then up to 1 s for the screen to change: agent CLIs drop an Enter that comes too soon."""
        for _ in range(attempts):
            view = self.tmux.views().get(session.pane_id)
            if view is None or view.dead:
                return True  # nothing left to press Enter in; observing says what happened
            before = self.tmux.screen(session.pane_id, view)
            self.tmux.send_key(session.pane_id, "Enter")
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                time.sleep(0.1)
                view = self.tmux.views().get(session.pane_id)
                if view is None or view.dead or self.tmux.screen(session.pane_id, view) != before:
                    return True
        return False

    def _fail(self, session: Session, error: Error) -> Error:
        """Delivery failed: no session is left behind, and the row says why."""
        self.tmux.kill_session(session.tmux_session)
        failed = replace(
            session, state=SessionState.ERRORED, updated_at=self.clock(), last_error=error.message
        )
        self.store.save(
            failed,
            expect=SessionState.PENDING,
            events=[Event(session.id, EventKind.ERRORED, failed.updated_at, error.message)],
        )
        return error

    # --- observing -----------------------------------------------------------------------------------------

    def list_sessions(self, include_finished: bool = True) -> list[Session]:
        sessions = self.refresh(self.store.sessions())
        return [s for s in sessions if include_finished or not s.state.is_final]

    def get_session_output(
        self, session_id: str, cursor: str | None = None, max_lines: int = 200, max_bytes: int = 16_000
    ) -> Output | Error:
        session = self.store.get(session_id)
        if session is None:
            return _unknown_session(session_id)
        if max_lines < 1 or max_bytes < 64:
            return _bad_argument("max_lines must be at least 1 and max_bytes at least 64")
        view = self._views().get(session.pane_id)
        if view is None or view.pane_pid != session.pane_pid:
            return Error(
                ErrorCode.UNKNOWN_SESSION,
                f"session {session_id} has no pane any more (state {session.state.value}).\n"
                "Its output is gone; teleclaude__list_sessions() shows what is running.",
            )
        try:
            parsed = Cursor.decode(cursor) if cursor else None
            chunk = self._read(session, view, parsed, max_lines, max_bytes)
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
        views = self._views()
        fresh = {s.id: self._observe_safely(s, views.get(s.pane_id)) for s in live}
        return [fresh.get(s.id, s) for s in sessions]

    def _observe_safely(self, session: Session, view: PaneView | None) -> Session:
        """A pane can vanish between listing and reading it (a finished cycle ended it): look next time."""
        try:
            return self._observe(session, view)
        except TmuxError as error:
            log.info("session %s: its pane changed while being read (%s)", session.id, error)
            return self.store.get(session.id) or session

    def _views(self) -> dict[str, PaneView]:
        try:
            return self.tmux.views()
        except TmuxError as error:
            log.warning("cannot list tmux panes: %s", error)
            return {}

    def _observe(self, session: Session, view: PaneView | None) -> Session:
        now = self.clock()
        if view is None or view.pane_pid != session.pane_pid:
            why = "its tmux pane is gone" if view is None else "its tmux pane was respawned"
            return self._transition(session, SessionState.ERRORED, EventKind.ERRORED, why, last_error=why)
        if session.state is SessionState.PENDING:
            return session  # still being delivered
        scanned, rows, partial = self._scan(session, view)
        if is_progress(rows):
            scanned = progressed(scanned, now)
        limited = self._limit_in(scanned, [*rows, partial], now)
        if limited is not None:
            return self._transition(
                scanned,
                SessionState.RATE_LIMITED,
                EventKind.RATE_LIMITED,
                limited,
                expect=session.state,
                last_error=limited,
            )
        if view.dead:
            return self._after_exit(scanned, view, expect=session.state)
        profile = self.config.profiles.get(session.agent)
        screen = self.tmux.screen(session.pane_id, view)
        prompt = prompt_visible(screen, profile.prompt) if profile else False
        watched, ended = observe_idle(scanned, screen, prompt, now, self.config.idle_threshold)
        watched = replace(watched, activity=activity_of(watched, screen, now, self.config.idle_threshold))
        if ended:
            return self._transition(
                watched,
                SessionState.TURN_ENDED,
                EventKind.TURN_ENDED,
                "idle at its prompt",
                expect=session.state,
            )
        return self._supervise(session, watched, screen, now)

    def _scan(self, session: Session, view: PaneView) -> tuple[Session, list[str], str]:
        """Finished rows new to the runtime (its own reading position, apart from any orchestrator's), and the
        unfinished row under the terminal cursor."""
        try:
            cursor = Cursor.decode(session.scan_cursor) if session.scan_cursor else Cursor.start(view)
            chunk = self._read(session, view, cursor, _SCAN_LINES, 1 << 20)
        except InvalidCursor:
            return session, [], ""
        return replace(session, scan_cursor=chunk.cursor.encode()), list(chunk.rows), chunk.partial

    def _limit_in(self, session: Session, rows: list[str], now: datetime) -> str | None:
        """A rate-limit message in new output: mark the agent unavailable, and say what it was."""
        if session.state is SessionState.RATE_LIMITED:
            return None
        profile = self.config.profiles.get(session.agent)
        local = datetime.now().astimezone().tzinfo or UTC
        hit = find_limit(session.agent, rows, now, local, profile.limit_patterns if profile else None)
        if hit is None:
            return None
        self.availability.mark_unavailable(session.agent, hit.until, hit.reason)
        detail = f"{hit.reason} until {hit.until.isoformat(timespec='seconds')}: {hit.line}"
        log.info("session %s: %s", session.id, detail)
        return detail

    def _supervise(self, before: Session, session: Session, screen: list[str], now: datetime) -> Session:
        """Reminders, needs-attention and digests, due by the stored timestamps (see core/supervision.py)."""
        events: list[Event] = []
        if cycle_expired(session, now, self.config):  # its process died: the orchestrator must not wait on
            session = replace(session, cycle_started_at=None)
            if session.state is SessionState.TURN_ENDED:
                events.append(
                    Event(session.id, EventKind.TURN_ENDED, now, "the post-report cycle never ended")
                )
        due = nudge(session, now, self.config, session.activity is Activity.QUIET)
        if isinstance(due, NeedsAttention):
            session = replace(
                session, state=SessionState.NEEDS_ATTENTION, last_error=due.detail, updated_at=now
            )
            events.append(Event(session.id, EventKind.NEEDS_ATTENTION, now, due.detail))
        elif isinstance(due, Reminder):
            session = replace(reminded(session, now), updated_at=now)
            kind = "hard (interrupting)" if due.interrupt else "soft"
            events.append(
                Event(session.id, EventKind.REMINDED, now, f"{kind} reminder {due.number}: {due.text}")
            )
        if digest_due(session, now, self.config):
            session, report = digest(session, now, screen, self.config)
            events.append(Event(session.id, EventKind.DIGEST, now, report.text()))
        if session == before:
            return session
        saved = self.store.save(session, expect=before.state, events=events)
        if saved is None:
            return self.store.get(before.id) or session  # another observer was quicker; it did the same
        if isinstance(due, Reminder):
            self._type(saved, due.text, interrupt=due.interrupt)
        return saved

    def _type(self, session: Session, text: str, interrupt: bool = False) -> None:
        """`_type_line` for the supervisor: a failure is logged, not raised."""
        try:
            self._type_line(session, text, interrupt)
        except TmuxError as error:
            log.warning("session %s: could not type into its pane: %s", session.id, error)

    def _type_line(self, session: Session, text: str, interrupt: bool = False) -> None:
        """Type one line into the worker and press Enter (Escape first to interrupt it)."""
        if interrupt:
            self.tmux.send_key(session.pane_id, "Escape")
            time.sleep(self.config.settle)
        self.tmux.send_text(session.pane_id, text)
        time.sleep(self.config.settle)
        self._press_enter(session)

    def _after_exit(self, session: Session, view: PaneView, expect: SessionState) -> Session:
        code = view.dead_status
        state = SessionState.DONE if code == 0 else SessionState.ERRORED
        detail = f"exit status {code}" if code is not None else "exited"
        error = "" if code == 0 else f"the CLI {detail}"
        return self._transition(
            session,
            state,
            EventKind.EXITED,
            detail,
            expect=expect,
            exit_code=code,
            last_error=error or session.last_error,
        )

    def _transition(
        self,
        session: Session,
        state: SessionState,
        kind: EventKind,
        detail: str,
        expect: SessionState | None = None,
        **changes: object,
    ) -> Session:
        """Change state and record the event, unless another observer changed the stored state first.

        `expect` is the state this observer read from the store (by default `session.state`).
        """
        now = self.clock()
        changed = replace(session, state=state, updated_at=now, **changes)
        event = Event(session.id, kind, now, detail)
        saved = self.store.save(changed, expect=expect or session.state, events=[event])
        return saved or self.store.get(session.id) or session

    def _read(self, session: Session, view: PaneView, cursor: Cursor | None, lines: int, size: int) -> Chunk:
        """read_since on a consistent picture: again with a fresh view while the pane scrolls under us."""
        for _ in range(20):
            try:
                capture = partial(self.tmux.capture, session.pane_id, history_size=view.history_size)
                return read_since(view, cursor, capture, lines, size)
            except StaleView:
                view = self.tmux.views().get(session.pane_id) or view
        capture = partial(self.tmux.capture, session.pane_id)
        return read_since(view, cursor, capture, lines, size)  # a pane that never stops: take it as it is

    # --- waiting -------------------------------------------------------------------------------------------

    def wait_for_sessions(
        self, session_ids: Iterable[str] | None = None, timeout: float = 30.0
    ) -> Waited | Error:
        """Events as they happen: returns as soon as there is one, or after `timeout` (at most 60 s)."""
        timeout = max(0.0, min(float(timeout), MAX_WAIT))
        ids = (
            list(session_ids)
            if session_ids
            else [s.id for s in self.store.sessions() if not s.state.is_final]
        )
        unknown = [i for i in ids if self.store.get(i) is None]
        if unknown:
            return _unknown_session(", ".join(unknown))
        deadline = time.monotonic() + timeout
        waiters = {i: self.tmux.wait_for(_exit_channel(i)) for i in ids}
        try:
            while True:
                sessions = self.refresh(self.store.sessions(ids))
                events = self.store.undelivered(ids)
                if events:
                    self.store.mark_delivered(events)
                    return Waited(tuple(events), tuple(sessions), False)
                if all(s.state.is_final for s in sessions) or time.monotonic() >= deadline:
                    return Waited(
                        (), tuple(sessions), bool(ids) and not all(s.state.is_final for s in sessions)
                    )
                _sleep_until_signal(
                    waiters.values(), min(self.config.poll_interval, deadline - time.monotonic())
                )
        finally:
            for waiter in waiters.values():
                waiter.kill()
                waiter.wait()

    # --- acting --------------------------------------------------------------------------------------------

    def send_message(self, session_id: str, text: str, interrupt: bool = False) -> Output | Error:
        session = self.store.get(session_id)
        if session is None:
            return _unknown_session(session_id)
        if session.state.is_final:
            return _bad_argument(f"session {session_id} is {session.state.value}: start a new one instead")
        if not text.strip() or "\n" in text.strip():
            return _bad_argument("text must be one non-empty line")
        try:
            self._type_line(session, text.strip(), interrupt)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        # refused only if an observer saved meanwhile; the worker's new output tells the next look anyway
        self.store.save(resumed(session, self.clock()), expect=session.state)
        return self.get_session_output(session_id)

    def end_session(self, session_id: str) -> Ended | Error:
        session = self.store.get(session_id)
        if session is None:
            return _unknown_session(session_id)
        try:
            self.tmux.kill_session(session.tmux_session)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        if session.state.is_final:
            return Ended(session)
        state = SessionState.DONE if session.state is SessionState.TURN_ENDED else SessionState.CANCELLED
        ended = replace(session, state=state, updated_at=self.clock())
        return Ended(self.store.save(ended) or ended)

    # --- self-reports and the post-report cycle ------------------------------------------------------------

    def report_status(self, session_id: str, text: str, wait_cmd: str | None = None) -> Reported | Error:
        """A worker says how it is doing. With `wait_cmd`, a post-report cycle starts in the background."""
        session_id = session_id or self.env.get("TELECLAUDE_SESSION_ID", "")
        text = " ".join(text.split())[:500]
        if not text:
            return _bad_argument("text must say something: what you did, what you are doing next")
        argv = _command_line(wait_cmd) if wait_cmd and wait_cmd.strip() else None
        if isinstance(argv, Error):
            return argv
        for _ in range(5):  # compare-and-set against observers saving meanwhile
            session = self.store.get(session_id)
            if session is None:
                return _unknown_session(session_id)
            if session.state.is_final:
                return _bad_argument(
                    f"session {session_id} is {session.state.value}: there is no one to report to"
                )
            now = self.clock()
            cycle = _millis(now) if argv else session.cycle_started_at  # a new cycle replaces a running one
            changed = replace(
                progressed(session, now),
                status_text=text,
                status_at=now,
                updated_at=now,
                cycle_started_at=cycle,
            )
            saved = self.store.save(changed, expect=session.state)
            if saved:
                break
        else:
            return Error(ErrorCode.LOCK_TIMEOUT, f"session {session_id} kept changing; report again.")
        if argv:
            try:
                self.spawn_cycle(saved, argv)
            except OSError as error:
                self._end_cycle(saved.id, saved.cycle_started_at)
                return Error(ErrorCode.FILE_ERROR, f"could not start the post-report cycle: {error}")
        return Reported(saved, cycle=argv is not None)

    def spawn_cycle(self, session: Session, argv: list[str]) -> None:
        """Run the post-report cycle in a process of its own, so neither the MCP call nor the CLI waits.

        `-P`: the worker's folder may hold a copy of teleclaude (when teleclaude builds itself); the cycle
        must run the installed one.
        """
        stamp = session.cycle_started_at.isoformat()
        command = [
            sys.executable,
            "-P",
            "-m",
            "teleclaude",
            "sessions",
            "cycle",
            session.id,
            stamp,
            "--",
            *argv,
        ]
        child = subprocess.Popen(
            command,
            cwd=session.workdir,
            env={**self.env, "TELECLAUDE_DB": str(self.store.path)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        threading.Thread(target=child.wait, daemon=True).start()  # reap it when it ends

    def run_cycle(self, session_id: str, argv: list[str], started: datetime) -> Finished | Directive | Error:
        """After a report: run `argv`, wait for a quiet pane, then end the session or type one directive.

        `started` names the cycle: when a newer report replaced it, this one concludes nothing.
        """
        try:
            session = self.store.get(session_id)
            if session is None:
                return _unknown_session(session_id)
            waited = self._run_wait_command(session, argv)
            self._spin_until_quiet(session)
            verdict = self._assess(session)
            for _ in range(5):
                current = self.store.get(session_id)
                if current is None or current.state.is_final or current.cycle_started_at != started:
                    return verdict
                if self._conclude_cycle(current, verdict, waited):
                    return verdict
            return verdict
        finally:
            self._end_cycle(session_id, started)

    def _conclude_cycle(self, session: Session, verdict: Finished | Directive | Error, waited: str) -> bool:
        now = self.clock()
        if isinstance(verdict, Error):
            # the planner cannot say (a broken worktree, a bad file): nothing is typed and nothing ended; a
            # worker back at its prompt is announced again, so its orchestrator asks next_work and sees why
            detail = f"post-report cycle: the planner answers ERROR: {verdict.code.value} ({waited})"
            cleared = replace(session, cycle_started_at=None, updated_at=now)
            kind = EventKind.TURN_ENDED if session.state is SessionState.TURN_ENDED else None
            events = [Event(session.id, kind, now, detail)] if kind else []
            log.warning("session %s: %s", session.id, detail)
            return self.store.save(cleared, expect=session.state, events=events) is not None
        if isinstance(verdict, Directive):
            event = Event(session.id, EventKind.DIRECTED, now, f"{verdict.text} ({waited})")
            saved = self.store.save(resumed(session, now), expect=session.state, events=[event])
            if saved is None:
                return False
            self._type(saved, verdict.text)
            return True
        ended = replace(session, state=SessionState.DONE, updated_at=now, cycle_started_at=None)
        event = Event(session.id, EventKind.FINISHED, now, f"{verdict.reason} ({waited})")
        if self.store.save(ended, expect=session.state, events=[event]) is None:
            return False
        try:
            self.tmux.kill_session(session.tmux_session)
        except TmuxError as error:
            log.warning("session %s: could not end its tmux session: %s", session.id, error)
        return True

    def _end_cycle(self, session_id: str, started: datetime | None) -> None:
        """Forget a cycle that ended without concluding (a crash, a refused save), unless a newer one runs."""
        for _ in range(5):
            session = self.store.get(session_id)
            if session is None or session.cycle_started_at is None or session.cycle_started_at != started:
                return
            if self.store.save(replace(session, cycle_started_at=None), expect=session.state):
                return

    def _run_wait_command(self, session: Session, argv: list[str]) -> str:
        """Run the worker's wait command in its folder, in a process group of its own (killed whole on
        timeout); its output goes to a file, so a background child keeping it open cannot hold us."""
        with tempfile.TemporaryFile("w+") as output:
            try:
                child = subprocess.Popen(
                    argv,
                    cwd=session.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                )
            except OSError as error:
                return f"{argv[0]} could not run: {error.strerror or error}"
            try:
                code = child.wait(timeout=self.config.wait_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return f"{argv[0]} still ran after {self.config.wait_timeout:g}s and was stopped"
            output.seek(0)
            last = [line for line in output.read()[-4000:].splitlines() if line.strip()][-1:]
        return f"{argv[0]} exited {code}" + (f": {last[0][:200]}" if last else "")

    def _spin_until_quiet(self, session: Session) -> None:
        """Until the screen has not changed for idle_threshold, or spin_max has passed."""
        deadline = time.monotonic() + self.config.spin_max
        last, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline:
            view = self._views().get(session.pane_id)
            if view is None or view.dead:
                return
            screen = self.tmux.screen(session.pane_id, view)
            if screen != last:
                last, quiet_since = screen, time.monotonic()
            elif time.monotonic() - quiet_since >= self.config.idle_threshold:
                return
            time.sleep(self.config.poll_interval)

    def _assess(self, session: Session) -> Finished | Directive | Error:
        """Ask the planner, read-only, whether the files still call for this session's step."""
        from teleclaude.adapters import git as gitx
        from teleclaude.adapters.settings import load_config
        from teleclaude.planner.api import RepoFacts
        from teleclaude.planner.core.decide import decide_work

        def ask() -> Finished | Directive:
            repo = gitx.find_repo(session.project)
            facts = RepoFacts(repo, load_config(repo.root))
            decision = decide_work(facts, session.slug)
            plan = facts.plan(session.slug) if session.subfolder else None
            ahead = gitx.commits_ahead(repo, session.slug) if session.subfolder else 0
            open_tasks = plan.open_build_tasks if plan else 0
            return assess(session.command, session.slug, decision, open_tasks, ahead)

        return guard(ask)()

    def record_turn_end(self, session_id: str, source: str = "stop hook") -> None:
        """An agent's Stop hook said its turn is over (called from `teleclaude hook stop`)."""
        session = self.store.get(session_id)
        if session is None or session.state not in _WORKING:
            return
        now = self.clock()
        self._transition(
            progressed(session, now),
            SessionState.TURN_ENDED,
            EventKind.TURN_ENDED,
            source,
            expect=session.state,
        )


# --- helpers -----------------------------------------------------------------------------------------------


def open_runtime(project: str | Path | None = None) -> Runtime:
    from teleclaude.adapters.settings import load_config

    root = None
    if project is not None:
        from teleclaude.adapters.git import NotAGitRepo, find_repo

        try:
            root = find_repo(Path(project)).root
        except (NotAGitRepo, OSError):
            root = None
    config = load_config(root).runtime or RuntimeConfig()
    return Runtime(config, SessionStore(), AvailabilityStore())


def _workdir(project: str, subfolder: str | None) -> Path | Error:
    root = Path(project)
    if not root.is_absolute() or not root.is_dir():
        return Error(ErrorCode.INVALID_SUBFOLDER, f"project {project!r} is not an absolute path to a folder.")
    root = root.resolve()
    if not subfolder:
        return root
    if "\0" in subfolder:
        return Error(ErrorCode.INVALID_SUBFOLDER, f"subfolder {subfolder!r} contains a NUL character.")
    if Path(subfolder).is_absolute():
        return Error(ErrorCode.INVALID_SUBFOLDER, f"subfolder {subfolder!r} must be relative to the project.")
    target = (root / subfolder).resolve()
    if not target.is_relative_to(root):
        return Error(
            ErrorCode.INVALID_SUBFOLDER, f"subfolder {subfolder!r} leads outside the project {root}."
        )
    if not target.is_dir():
        return Error(
            ErrorCode.INVALID_SUBFOLDER,
            f"{target} does not exist.\nCall teleclaude__next_work() again: it creates the worktree first.",
        )
    return target


def _millis(moment: datetime) -> datetime:
    """The precision the store keeps, so a stamp read back compares equal to the one written."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _command_line(text: str) -> list[str] | Error:
    """A wait_cmd as an argument list: split like a shell would, but never run by one."""
    try:
        argv = shlex.split(text)
    except ValueError as error:
        return _bad_argument(f"wait_cmd {text!r} cannot be split into arguments: {error}")
    if not argv:
        return _bad_argument("wait_cmd is empty")
    return argv


def _find_binary(profile: AgentProfile, env: Mapping[str, str]) -> str | None:
    for name in profile.binaries:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return found
    return None


def _exit_channel(session_id: str) -> str:
    return f"tc-exit-{session_id}"


def _sleep_until_signal(waiters, seconds: float) -> None:
    deadline = time.monotonic() + max(seconds, 0.0)
    while time.monotonic() < deadline:
        if any(w.poll() is not None for w in waiters):
            return
        time.sleep(0.05)


def _delivery_failed(session: Session, text: str, why: str, screen: list[str] | None = None) -> Error:
    last = "\n".join(row for row in (screen or []) if row.strip())[-800:]
    what = f"could not deliver {text!r}" if text else "could not start the worker"
    return Error(
        ErrorCode.TMUX_FAILED,
        f"{session.agent}: {what}: {why}.\n"
        + (f"Last screen:\n{last}\n" if last else "")
        + f"Run the agent by hand in {session.workdir} to see what it needs (a login, a trust prompt), or "
        f"mark it unavailable: teleclaude__mark_agent_unavailable(agent={session.agent!r}).",
    )


def _unknown_session(session_id: str) -> Error:
    return Error(
        ErrorCode.UNKNOWN_SESSION,
        f"no session {session_id!r}.\nteleclaude__list_sessions() shows the sessions there are.",
    )


def _bad_argument(message: str) -> Error:
    return Error(ErrorCode.INVALID_ARGUMENT, message)


# --- the front ends' door ---------------------------------------------------------------------------------


T = TypeVar("T")


def guarded(function: Callable[..., T], *args: object, **kwargs: object) -> T | Error:
    """Call a Runtime method; tmux and database failures become `Error` values like every other failure."""
    return guard(function)(*args, **kwargs)
