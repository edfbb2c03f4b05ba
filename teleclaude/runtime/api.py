"""The worker runtime: start an agent CLI in tmux, type its command, watch it, and say when it is done.

`Runtime` is the library API behind `teleclaude__run_agent_command` and the session tools: one method per
tool, each answered by one service (`launcher`, `observer`, `cycle`) over a shared `Context`. Every method
returns a value (errors are `Error`s), reads tmux through `adapters.tmux` and keeps sessions and events in
SQLite (`adapters.sessions_db`), so a restarted server, or a CLI next to it, picks up where it stopped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from teleclaude.adapters import git as gitx
from teleclaude.adapters.fleet import Fleet
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import AvailabilityStore, StoreError
from teleclaude.adapters.tmux import Tmux
from teleclaude.agents.tokens import Tokens
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.errors import Error, guard
from teleclaude.planner.core.model import Dispatch, UsageWindow
from teleclaude.planner.core.terminal import printable
from teleclaude.runtime import continuing, remote, trace
from teleclaude.runtime import supervisor as supervisors
from teleclaude.runtime.context import Context
from teleclaude.runtime.core.marks import same_key
from teleclaude.runtime.core.sessions import Ended, Output, Reported, Session, Started, StartRequest, Waited
from teleclaude.runtime.core.supervision import Directive, Finished
from teleclaude.runtime.cycle import Cycle
from teleclaude.runtime.launcher import Launcher, Warm
from teleclaude.runtime.observer import Observer
from teleclaude.runtime.panes import Panes
from teleclaude.runtime.supervisor import Supervisor

log = logging.getLogger("teleclaude.runtime")


class Runtime:
    def __init__(
        self,
        config: RuntimeConfig,
        store: SessionStore,
        tmux: Tmux | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        env: Mapping[str, str] | None = None,
    ) -> None:
        tmux = tmux or _tmux(config, store)
        # the agents' availability lives in the sessions' file: a limit and its session's change are one write
        availability = AvailabilityStore(store.path)
        self.context = Context(config, store, availability, tmux, clock, os.environ if env is None else env)
        if config.remotes:
            brought = remote.BringBack(dict(config.remotes))
            self.context.before_turn_end, self.context.turn_ends_ahead = brought, brought.ahead
        panes = Panes(self.context)
        self.launcher = Launcher(self.context, panes)
        self.observer = Observer(self.context, panes)
        self.cycle = Cycle(self.context, panes)
        self.observer.report = self.cycle.report
        self.supervisor = Supervisor(self.context, self.observer, self.launcher)
        # starts the project's supervisor process (a test drives `supervisor.round` itself instead); of the
        # context, not `self`: a cycle would keep the runtime, and its observer's clients, until a collection
        context = self.context
        self.start_supervisor: Callable[[str], Error | None] = lambda project: supervisors.start(
            project, context.store.path, context.env
        )

    @property
    def config(self) -> RuntimeConfig:
        return self.context.config

    @property
    def store(self) -> SessionStore:
        return self.context.store

    @property
    def tmux(self) -> Tmux:
        return self.context.tmux

    def clock(self) -> datetime:
        return self.context.clock()

    # --- starting ------------------------------------------------------------------------------------------

    def start(self, dispatch: Dispatch, args: str | None = None, computer: str = "local") -> Started | Error:
        """Start the worker a `Dispatch` of the planner names (`args`: instead of the bare slug). A step its
        item's last worker left is taken up (continuing.py): its conversation resumed by the same agent, or
        handed over to another with a continuation note; a resume the CLI refuses starts fresh."""
        trace.mark("start", dispatch.slug)
        request = _request(dispatch, args, computer)
        continued = continuing.continued(self.context, request) if args is None else request
        return self._start_continued(request, continued)

    def _start_continued(self, request: StartRequest, continued: StartRequest) -> Started | Error:
        started = self.run_agent_command(continued)
        if isinstance(started, Error) and continued.resumed_from:
            reason = started.message.splitlines()[0] if started.message else started.code.value
            log.warning(
                "%s %s: resuming %s's conversation failed, a fresh start: %s",
                request.command,
                request.args,
                continued.resumed_from,
                printable(reason),
            )
            started = self.run_agent_command(request)
        return started

    def warm(self, dispatch: Dispatch, computer: str = "local") -> Warm | Error:
        """The worker of a step `next_work` will likely name, started to its prompt (on `computer`) and not
        typed into (`Launcher.warm`): `deliver_warm` once next_work names it, else `drop_warm`."""
        return self.launcher.warm(_request(dispatch, None, computer))

    def deliver_warm(self, warm: Warm) -> Started | Error:
        """The warm worker's command typed; but a step its item's last worker left is taken up as `start`
        takes it up (a worker started ahead is fresh): the warm worker ended, the step resumed in the left
        conversation or handed over with its note."""
        trace.mark("warm-given", warm.session.id)
        request = warm.request
        continued = continuing.continued(self.context, request) if request is not None else None
        if request is None or continued is None or continued == request:
            return self.launcher.deliver_warm(warm)
        self.launcher.drop_warm(warm)
        return self._start_continued(request, continued)

    def drop_warm(self, warm: Warm) -> None:
        self.launcher.drop_warm(warm)

    def run_agent_command(self, request: StartRequest) -> Started | Error:
        """`request.parent` (core/parents.py `Parent.encode`): who is woken with the worker's digests, pushed
        into its pane by the project's supervisor, started here when none runs."""
        started = self.launcher.start(request)
        if isinstance(started, Started) and started.session.parent:
            self._supervise(started.session)
        return started

    def _supervise(self, session: Session) -> None:
        failed = self.start_supervisor(session.project)
        if failed is not None:  # the digests still reach wait_for_sessions
            log.warning("session %s: %s", session.id, failed.message)

    def adopt(self) -> None:
        """Start the supervisor of each project whose sessions still need one (after a crash)."""
        projects = {s.project for s in self.store.sessions() if supervisors.supervised(s)}
        for project in sorted(projects):
            failed = self.start_supervisor(project)
            if failed is not None:
                log.warning("%s: %s", project, failed.message)

    def supervise(self, project: str) -> bool:
        """`teleclaude supervise`: run the project's supervisor here until nothing is left to supervise;
        False when another one runs."""
        root = str(Path(project).resolve())
        return supervisors.run(self.supervisor, root, self.config.poll_interval)

    # --- observing and waiting -----------------------------------------------------------------------------

    def list_sessions(self, include_finished: bool = True) -> list[Session]:
        return self.observer.list_sessions(include_finished)

    def usage(self) -> dict[str, tuple[UsageWindow, ...]]:
        """Each agent's rate-limit windows not yet reset, as its CLI last reported them (none when the store
        cannot be read: only the status line shows them)."""
        try:
            return self.context.availability.usage(self.clock())
        except StoreError as error:
            log.debug("usage not read: %s", error)
            return {}

    def recent_tools(self, sessions: Iterable[Session]) -> dict[str, tuple[str, ...]]:
        """session id -> its latest tool uses, `Read: src/x.py (1m ago)` (sessions without any left out)."""
        return self.observer.recent_tools([s.id for s in sessions], self.clock())

    def get_session_output(
        self, session_id: str, cursor: str | None = None, max_lines: int = 200, max_bytes: int = 16_000
    ) -> Output | Error:
        return self.observer.output(session_id, cursor, max_lines, max_bytes)

    def refresh(self, sessions: Iterable[Session]) -> list[Session]:
        return self.observer.refresh(sessions)

    def wait_for_sessions(
        self,
        session_ids: Iterable[str] | None = None,
        timeout: float = 30.0,
        fresh: bool = True,
        wake: int | None = None,
    ) -> Waited | Error:
        return self.observer.wait(session_ids, timeout, fresh, wake)

    def owns(self, session_id: str, key: str) -> bool:
        """`key` is the session's own (its worker's TELECLAUDE_SESSION_KEY), or there is no such session: a
        hook checks it before it records anything on the session (runtime/core/marks.py)."""
        session = self.store.get(session_id)
        return session is None or same_key(session.key, key)

    def record_turn_end(self, session_id: str, source: str = "stop hook", prompt: str = "") -> bool:
        return self.observer.record_turn_end(session_id, source, prompt)

    def record_stop_failure(self, session_id: str, error: str, message: str) -> bool:
        return self.observer.record_stop_failure(session_id, error, message)

    def record_transcript(self, session_id: str, path: str, conversation: str = "") -> bool:
        return self.observer.record_transcript(session_id, path, conversation)

    def record_spend(self, session_id: str, tokens: Tokens) -> bool:
        """What the session used so far, as its stop hook read it from its CLI's record (core/spend.py)."""
        return self.store.add_spend(session_id, self.clock(), tokens)

    # --- acting --------------------------------------------------------------------------------------------

    def send_message(self, session_id: str, text: str, interrupt: bool = False) -> Output | Error:
        sent = self.launcher.send(session_id, text, interrupt)
        if isinstance(sent, Error):
            return sent
        if sent.parent:  # it works again: its parent hears of it again
            self._supervise(sent)
        return self.observer.output(session_id)

    def end_session(self, session_id: str) -> Ended | Error:
        return self.launcher.end(session_id)

    def report_status(self, session_id: str, text: str, wait_cmd: str | None = None) -> Reported | Error:
        return self.cycle.report(session_id, text, wait_cmd)

    def run_cycle(self, session_id: str, argv: list[str], started: datetime) -> Finished | Directive | Error:
        return self.cycle.run(session_id, argv, started)


def _request(dispatch: Dispatch, args: str | None, computer: str) -> StartRequest:
    return StartRequest(
        computer,
        dispatch.command,
        args or dispatch.slug,
        dispatch.project,
        dispatch.agent,
        dispatch.thinking_mode,
        dispatch.subfolder,
    )


def _tmux(config: RuntimeConfig, store: SessionStore) -> Tmux:
    """This machine's tmux server; with [computers.NAME] in teleclaude.toml, theirs as well (over ssh)."""
    if not config.remotes:
        return Tmux(config.socket, config.tmux_timeout)

    return Fleet(config.socket, config.tmux_timeout, config.remotes, store.live_computers)


def open_runtime(project: str | Path | None = None) -> Runtime:
    root = None
    if project is not None:
        try:
            root = gitx.find_repo(Path(project)).root
        except (gitx.NotAGitRepo, OSError):
            root = None
    config = load_config(root).runtime or RuntimeConfig()
    return Runtime(config, SessionStore())


# --- the front ends' door ---------------------------------------------------------------------------------


T = TypeVar("T")


def guarded(function: Callable[..., T], *args: object, **kwargs: object) -> T | Error:
    """Call a Runtime method; tmux and database failures become `Error` values like every other failure."""
    return guard(function)(*args, **kwargs)
