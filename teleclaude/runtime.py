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
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.core.agents import THINKING_MODES
from teleclaude.core.launch import AgentProfile, RuntimeConfig
from teleclaude.core.limits import find_limit
from teleclaude.core.model import Error, ErrorCode
from teleclaude.core.sessions import (
    Chunk,
    Cursor,
    Ended,
    Event,
    EventKind,
    InvalidCursor,
    Output,
    PaneView,
    Session,
    SessionState,
    StaleView,
    Started,
    Waited,
    observe_idle,
    prompt_visible,
    read_since,
)

log = logging.getLogger("teleclaude.runtime")

MAX_WAIT = 60.0
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
        )
        self.store.save(running, expect=SessionState.PENDING)
        return Started(running)

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
            view = self.tmux.views()[session.pane_id]
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
            event=Event(session.id, EventKind.ERRORED, failed.updated_at, error.message),
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
        fresh = {s.id: self._observe(s, views.get(s.pane_id)) for s in live}
        return [fresh.get(s.id, s) for s in sessions]

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
        scanned = self._scan_for_limits(session, view)
        if scanned.state is not session.state or view.dead:
            return self._after_exit(scanned, view) if view.dead else scanned
        profile = self.config.profiles.get(session.agent)
        screen = self.tmux.screen(session.pane_id, view)
        prompt = prompt_visible(screen, profile.prompt) if profile else False
        watched, ended = observe_idle(scanned, screen, prompt, now, self.config.idle_threshold)
        if ended:
            return self._transition(
                watched, SessionState.TURN_ENDED, EventKind.TURN_ENDED, "idle at its prompt"
            )
        return self._bookkeep(session, watched)

    def _scan_for_limits(self, session: Session, view: PaneView) -> Session:
        """Read the output that is new to the runtime, and act on a rate-limit message in it."""
        try:
            cursor = Cursor.decode(session.scan_cursor) if session.scan_cursor else Cursor.start(view)
            chunk = self._read(session, view, cursor, _SCAN_LINES, 1 << 20)
        except InvalidCursor:
            return session
        rows = [*chunk.rows, chunk.partial]
        scanned = replace(session, scan_cursor=chunk.cursor.encode())
        profile = self.config.profiles.get(session.agent)
        now = self.clock()
        local = datetime.now().astimezone().tzinfo or UTC
        hit = find_limit(session.agent, rows, now, local, profile.limit_patterns if profile else None)
        if hit is None or session.state is SessionState.RATE_LIMITED:
            return scanned
        self.availability.mark_unavailable(session.agent, hit.until, hit.reason)
        detail = f"{hit.reason} until {hit.until.isoformat(timespec='seconds')}: {hit.line}"
        log.info("session %s: %s", session.id, detail)
        return self._transition(
            scanned, SessionState.RATE_LIMITED, EventKind.RATE_LIMITED, detail, last_error=detail
        )

    def _after_exit(self, session: Session, view: PaneView) -> Session:
        code = view.dead_status
        state = SessionState.DONE if code == 0 else SessionState.ERRORED
        detail = f"exit status {code}" if code is not None else "exited"
        error = "" if code == 0 else f"the CLI {detail}"
        return self._transition(
            session, state, EventKind.EXITED, detail, exit_code=code, last_error=error or session.last_error
        )

    def _transition(
        self, session: Session, state: SessionState, kind: EventKind, detail: str, **changes: object
    ) -> Session:
        """Change state and record the event, unless another observer changed the state first."""
        now = self.clock()
        changed = replace(session, state=state, updated_at=now, **changes)
        if self.store.save(changed, expect=session.state, event=Event(session.id, kind, now, detail)):
            return changed
        return self.store.get(session.id) or session

    def _bookkeep(self, before: Session, after: Session) -> Session:
        """Store the reading position and screen bookkeeping, without touching a state changed meanwhile."""
        if after == before:
            return after
        return after if self.store.save(after, expect=before.state) else (self.store.get(before.id) or after)

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
            if interrupt:
                self.tmux.send_key(session.pane_id, "Escape")
                time.sleep(self.config.settle)
            self.tmux.send_text(session.pane_id, text.strip())
            time.sleep(self.config.settle)
            self._press_enter(session)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        now = self.clock()
        resumed = replace(
            session,
            state=SessionState.RUNNING,
            updated_at=now,
            delivered_at=now,
            screen_hash="",
            prompt_polls=0,
        )
        self.store.save(resumed, expect=session.state)
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
        self.store.save(ended)
        return Ended(ended)

    def record_turn_end(self, session_id: str, source: str = "stop hook") -> None:
        """An agent's Stop hook said its turn is over (called from `teleclaude hook stop`)."""
        session = self.store.get(session_id)
        if session is None or session.state is not SessionState.RUNNING:
            return
        self._transition(session, SessionState.TURN_ENDED, EventKind.TURN_ENDED, source)


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


def guarded(function: Callable[..., object], *args: object, **kwargs: object) -> object:
    """Call a Runtime method; tmux and database failures become `Error` values like every other failure."""
    from teleclaude.app import _guarded

    def call() -> object:
        try:
            return function(*args, **kwargs)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, f"{error}\nCheck that tmux works: tmux -V")
        except sqlite3.Error as error:
            return Error(
                ErrorCode.FILE_ERROR,
                f"the session database failed: {error}.\n"
                "Check the file named by $TELECLAUDE_DB, else ~/.teleclaude/teleclaude.db.",
            )

    return _guarded(call)()
