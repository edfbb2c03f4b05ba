"""The supervisor: reminders and parent wake-ups with nobody polling (seed 003 §B).

`teleclaude supervise --project DIR` runs detached, started by the first dispatch that has a parent, one per
project (it holds a lock file beside the database; a second start while one runs is a no-op). Every poll
interval it looks at the project's live sessions as `wait_for_sessions` would (reminders, digests: the
observer's `_supervise`), queues a final digest when a worker with a parent ends its turn, and types each
waiting digest into its parent at the parent's next idle moment. It exits when no session with a parent is
left to supervise. Its timers are the sessions' stored timestamps, so a supervisor started after a crash
takes them up where they were.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from teleclaude.adapters import fs, procs
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.notify import Notice
from teleclaude.errors import Error, ErrorCode, Failure
from teleclaude.runtime.context import Context
from teleclaude.runtime.core import notices, parents
from teleclaude.runtime.core.sessions import Session, SessionState, screen_hash
from teleclaude.runtime.core.supervision import final_digest, final_due
from teleclaude.runtime.launcher import Launcher
from teleclaude.runtime.observer import Observer
from teleclaude.runtime.panes import NotSent, Panes, Untypable, WorkerBlocked

log = logging.getLogger("teleclaude.runtime")

_WATCHED = (SessionState.PENDING, SessionState.RUNNING, SessionState.STALLED, SessionState.NEEDS_ATTENTION)


def supervised(session: Session) -> bool:
    """A session with a parent that may still have something to tell it."""
    if not session.parent:
        return False
    checking = session.cycle_started_at is not None  # a post-report cycle may send it back to work
    return bool(session.parent_pending) or final_due(session) or checking or session.state in _WATCHED


class Supervisor:
    def __init__(self, context: Context, observer: Observer, launcher: Launcher) -> None:
        self.context = context
        self.observer = observer
        self.launcher = launcher
        # a parent pane -> its screen's hash at the last round's look, and at this round's
        self._screens: dict[str, str] = {}
        self._looked: dict[str, str] = {}
        # `[notify]` (adapters/notify.py `Notifier.post`, set by `teleclaude supervise`): never blocks
        self.notify: Callable[[Notice], None] | None = None
        self._told_up_to: int | None = None  # the last event id looked at for notices

    def round(self, project: str) -> bool:
        """One look at the project's sessions: observe the live ones, queue the final digests, deliver the
        waiting ones. False when no session with a parent is left to supervise."""
        store = self.context.store
        mine = [s for s in store.sessions() if s.project == project]
        self.observer.refresh([s for s in mine if not s.state.is_final])
        mine = [s for s in store.sessions() if s.project == project]
        if self.notify is not None:
            self._notices(mine, project)
        for session in mine:
            if final_due(session):
                self._queue_final(session)
        told: set[str] = set()  # one digest per parent and look: the next waits for its next idle moment
        for session in store.sessions([s.id for s in mine]):
            if session.parent_pending and session.parent not in told and self._deliver(session):
                told.add(session.parent)
        self._screens, self._looked = self._looked, {}
        return any(supervised(s) for s in store.sessions([s.id for s in mine]))

    def _notices(self, sessions: list[Session], project: str) -> None:
        """The notices the new events of the sessions with a parent call for (the run's own workers are
        the run's to tell of); the events before this supervisor started were told by the one before."""
        notify = self.notify
        supervised = {s.id: s for s in sessions if s.parent}
        events = self.context.store.events(list(supervised)) if notify is not None else []
        if self._told_up_to is None:
            self._told_up_to = max((event.id for event in events), default=0)
            return
        for event in events:
            if event.id > self._told_up_to:
                notice = notices.of_event(event, supervised[event.session_id], project, in_run=False)
                if notice is not None and notify is not None:
                    notify(notice)
        self._told_up_to = max((event.id for event in events), default=self._told_up_to)

    def _queue_final(self, session: Session) -> None:
        now = self.context.clock()
        tools = self.observer.recent_tools([session.id], now).get(session.id, ())
        text = final_digest(session, now, self.context.config, tools)  # it replaces a periodic one waiting
        self.context.store.save(replace(session, parent_pending=text, parent_told=True), expect=session.state)

    def _deliver(self, session: Session) -> bool:
        """Type the session's waiting digest into its parent if the parent is idle now; True once typed."""
        parent = parents.decode(session.parent)
        text = session.parent_pending
        if parent is None:
            return self._drop(session, "its parent is not one teleclaude knows how to reach")
        if parent.session_id:
            typed = self._into_session(session, parent.session_id, text)
        else:
            typed = self._into_pane(session, parent, text)
        if typed:
            self._clear(session.id, text)
            if self.notify is not None:  # mirrored when `[notify] digests = true`
                self.notify(notices.digest(session.id, f"{session.command} {session.slug}", text))
        return typed

    def _into_session(self, session: Session, parent_id: str, text: str) -> bool:
        """A parent that is a teleclaude session takes a digest once its own turn has ended."""
        target = self.context.store.get(parent_id)
        if target is None or target.state.is_final:
            return self._drop(session, f"its parent session {parent_id} is over")
        if target.state is not SessionState.TURN_ENDED:
            return False
        sent = self.launcher.send(parent_id, text)
        if isinstance(sent, Error):
            log.info(
                "session %s: digest not yet taken by session %s: %s", session.id, parent_id, sent.message
            )
            return False
        return True

    def _into_pane(self, session: Session, parent: parents.Parent, text: str) -> bool:
        """A parent in a tmux pane takes a digest when its screen has stayed the same for a look, at its
        prompt with nothing typed and no dialog open; typed as `send_message` types (Enter checked)."""
        tmux = Tmux(parent.socket, self.context.config.tmux_timeout)
        try:
            view, screen = tmux.glance(parent.pane)
            if view is None or view.dead:
                return self._drop(session, f"its parent's pane {parent.pane} is gone")
            shown = self._looked[session.parent] = screen_hash(screen)
            profiles = self.context.config.profiles
            if shown != self._screens.get(session.parent) or not parents.idle(
                screen, session.parent_agent, profiles
            ):
                return False
            stand_in = replace(
                session, id=f"parent of {session.id}", agent=session.parent_agent, pane_id=parent.pane
            )
            Panes(replace(self.context, tmux=tmux)).type_line(stand_in, text)
        except NotSent as error:  # typed: once more would only repeat it (in its input, or sent after all)
            log.warning("session %s: digest typed, its Enter not seen taken: %s", session.id, error)
        except (TmuxError, WorkerBlocked, Untypable) as error:
            log.info("session %s: digest not yet taken by its parent's pane: %s", session.id, error)
            return False
        self._looked.pop(session.parent, None)  # it changes now: the next digest waits for a still screen
        return True

    def _drop(self, session: Session, why: str) -> bool:
        log.warning(
            "session %s: %s: its digests are dropped (wait_for_sessions still reports them)", session.id, why
        )
        stored = self.context.store.get(session.id) or session
        self.context.store.save(replace(stored, parent="", parent_pending=""), expect=stored.state)
        return False

    def _clear(self, session_id: str, text: str) -> None:
        """The digest was typed: forget it, unless a newer one took its place meanwhile."""
        for _ in range(10):
            stored = self.context.store.get(session_id)
            if stored is None or stored.parent_pending != text:
                return
            if self.context.store.save(replace(stored, parent_pending=""), expect=stored.state) is not None:
                return


# --- the process ------------------------------------------------------------------------------------------


def lock_path(db: Path, project: str) -> Path:
    """The project's supervisor lock, beside the database (a test's own database, its own supervisors)."""
    return db.parent / f"supervise-{hashlib.sha256(project.encode()).hexdigest()[:16]}.lock"


def run(supervisor: Supervisor, project: str, poll: float) -> bool:
    """Supervise until nothing is left; False at once when another supervisor of the project runs."""
    path = lock_path(supervisor.context.store.path, project)
    with fs.try_lock(path) as held:
        if not held:
            return False
        path.write_text(f"{os.getpid()}\n")
        log.info("supervising %s", project)
        while True:
            try:
                busy = supervisor.round(project)
            except Failure as error:  # the database or tmux, for a moment: look again
                log.warning("supervisor: %s", error)
                busy = True
            if not busy:
                log.info("nothing left to supervise in %s", project)
                return True
            time.sleep(poll)


def start(project: str, db: Path, env: Mapping[str, str]) -> Error | None:
    """Start the project's supervisor, detached, unless one runs (its lock is held)."""
    path = lock_path(db, project)
    with fs.try_lock(path) as free:
        if not free:
            return None
    command = [sys.executable, "-P", "-m", "teleclaude", "supervise", "--project", project]
    try:
        with open(path.with_suffix(".log"), "ab") as output:
            child = subprocess.Popen(
                command,
                cwd=project,
                env={**env, "TELECLAUDE_DB": str(db)},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
            )
    except OSError as error:
        return Error(ErrorCode.FILE_ERROR, f"could not start the supervisor: {error}")
    threading.Thread(target=child.wait, daemon=True).start()  # reap it when it ends
    return None


def parent_of_process(env: Mapping[str, str], profiles: Mapping[str, AgentProfile]) -> tuple[str, str]:
    """(the parent, its agent) of this process (an MCP server an agent CLI started): named by its own
    environment, else by its ancestors' (a CLI may give its MCP server only a few variables); its agent from
    the command line of the process that started it. ("", "") when it is not in tmux."""
    found = parents.from_env(env)
    chain = procs.ancestors(os.getpid())
    for pid in chain:
        if found is not None:
            break
        found = parents.from_env(procs.environ(pid))
    agent = next((a for a in (parents.agent_of(procs.cmdline(pid), profiles) for pid in chain) if a), "")
    return (found.encode(), agent) if found is not None else ("", "")
