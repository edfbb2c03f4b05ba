"""Self-reports and the post-report cycle: a worker says how it is doing; with a wait command, a detached
process runs it, waits for a quiet pane, asks the planner, and ends the session or types one directive."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.tmux import TmuxError
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.runtime.context import Context, bad_argument, refused_text, unknown_session
from teleclaude.runtime.core.marks import SESSION_KEY, same_key
from teleclaude.runtime.core.sessions import Change, Reported, Session, SessionState, transition
from teleclaude.runtime.core.supervision import Directive, Finished, WaitOutcome, assess, progressed, resumed
from teleclaude.runtime.panes import Panes

log = logging.getLogger("teleclaude.runtime")

Verdict = Finished | Directive | Error


class Cycle:
    def __init__(self, context: Context, panes: Panes) -> None:
        self.context = context
        self.panes = panes

    def report(
        self, session_id: str, text: str, wait_cmd: str | None = None, key: str | None = None
    ) -> Reported | Error:
        """A worker says how it is doing. With `wait_cmd`, a post-report cycle starts in the background. Only
        with the session's key in the caller's environment (its worker's, runtime/core/marks.py): one worker
        cannot speak for another. `key`: a sandboxed worker's report, taken from its own channel by the
        observer, which vouches for it."""
        store = self.context.store
        key = self.context.env.get(SESSION_KEY, "") if key is None else key
        session_id = session_id or self.context.env.get("TELECLAUDE_SESSION_ID", "")
        checked = _checked_report(text, wait_cmd)
        if isinstance(checked, Error):
            return checked
        text, argv = checked
        for _ in range(5):  # compare-and-set against observers saving meanwhile
            session = store.get(session_id)
            if session is None:
                return unknown_session(session_id)
            if not same_key(session.key, key):
                return bad_argument(
                    f"session {session_id} is not yours: a worker reports its own session, the one whose "
                    f"key its ${SESSION_KEY} is"
                )
            if session.state.is_final:
                return bad_argument(
                    f"session {session_id} is {session.state.value}: there is no one to report to"
                )
            now = self.context.clock()
            cycle = _millis(now) if argv else session.cycle_started_at  # a new cycle replaces a running one
            moved, events = progressed(session, now)
            changed = replace(moved, status_text=text, status_at=now, cycle_started_at=cycle)
            saved = store.save(changed, expect=session.state, events=events)
            if saved:
                break
        else:
            return Error(ErrorCode.LOCK_TIMEOUT, f"session {session_id} kept changing; report again.")
        if argv:
            try:
                self.spawn(saved, argv)
            except OSError as error:
                self._forget(saved.id, saved.cycle_started_at)
                return Error(ErrorCode.FILE_ERROR, f"could not start the post-report cycle: {error}")
        return Reported(saved, cycle=argv is not None)

    def spawn(self, session: Session, argv: list[str]) -> None:
        """Run the post-report cycle in a process of its own, so neither the MCP call nor the CLI waits.

        `-P`: the worker's folder may hold a copy of teleclaude (when teleclaude builds itself); the cycle
        must run the installed one.
        """
        assert session.cycle_started_at is not None
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
            env={**self.context.env, "TELECLAUDE_DB": str(self.context.store.path)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        threading.Thread(target=child.wait, daemon=True).start()  # reap it when it ends

    def run(self, session_id: str, argv: list[str], started: datetime) -> Verdict:
        """After a report: run `argv`, wait for a quiet pane, then end the session or type one directive.

        `started` names the cycle: when a newer report replaced it, this one concludes nothing.
        """
        store = self.context.store
        try:
            session = store.get(session_id)
            if session is None:
                return unknown_session(session_id)
            waited = self._run_wait_command(session, argv)
            self._spin_until_quiet(session)
            verdict = _assess(session, waited, self.context.config.max_nudges)
            for _ in range(5):
                current = store.get(session_id)
                if current is None or current.state.is_final or current.cycle_started_at != started:
                    return verdict
                if self._conclude(current, verdict, waited):
                    return verdict
            return verdict
        finally:
            self._forget(session_id, started)

    def _conclude(self, session: Session, verdict: Verdict, wait: WaitOutcome) -> bool:
        """Carry the verdict out; False when an observer saved meanwhile (read again, try again)."""
        store, now = self.context.store, self.context.clock()
        waited = wait.summary()
        if isinstance(verdict, Error):
            # the planner cannot say (a broken worktree, a bad file): nothing is typed and nothing ended; a
            # worker back at its prompt is announced again, so its orchestrator asks next_work and sees why
            detail = f"post-report cycle: the planner answers ERROR: {verdict.code.value} ({waited})"
            log.warning("session %s: %s", session.id, detail)
            cleared = replace(session, cycle_started_at=None, updated_at=now)
            if session.state is not SessionState.TURN_ENDED:
                return store.save(cleared, expect=session.state) is not None
            again, events = transition(cleared, Change.TURN_ENDED, now, detail)
            return store.save(again, expect=session.state, events=events) is not None
        if isinstance(verdict, Directive):
            directed, events = resumed(session, now, Change.DIRECTED, f"{verdict.text} ({waited})")
            sent_back = session.sent_back + 1 if verdict.failed_wait else 0
            saved = store.save(replace(directed, sent_back=sent_back), expect=session.state, events=events)
            if saved is None:
                return False
            self.panes.type_or_log(saved, verdict.text)
            return True
        finished, events = transition(session, Change.FINISHED, now, f"{verdict.reason} ({waited})")
        if store.save(replace(finished, cycle_started_at=None), expect=session.state, events=events) is None:
            return False
        from teleclaude.runtime import spend  # (the stop hook's runtime goes without it)

        spend.read_again(self.context, session)  # its last answer may be on record only now
        try:
            self.context.tmux.kill_session(session.tmux_session)
        except TmuxError as error:
            log.warning("session %s: could not end its tmux session: %s", session.id, error)
        return True

    def _forget(self, session_id: str, started: datetime | None) -> None:
        """Forget a cycle that ended without concluding (a crash, a refused save), unless a newer one runs."""
        store = self.context.store
        for _ in range(5):
            session = store.get(session_id)
            if session is None or session.cycle_started_at is None or session.cycle_started_at != started:
                return
            if store.save(replace(session, cycle_started_at=None), expect=session.state):
                return

    def _run_wait_command(self, session: Session, argv: list[str]) -> WaitOutcome:
        """Run the worker's wait command in its folder, in a process group of its own (killed whole on
        timeout); its output goes to a file, so a background child keeping it open cannot hold us."""
        timeout = self.context.config.wait_timeout
        from teleclaude.adapters import sandbox  # here: hooks import this module, and need none of it

        box = sandbox.read_box(self.context.store.path, session.id)
        if box == []:
            return WaitOutcome(argv[0], None, why="its sandbox's record is gone: it is not run outside it")
        env = {name: value for name, value in self.context.env.items() if name != "TELECLAUDE_DB"}
        with tempfile.TemporaryFile("w+") as output:
            try:
                child = subprocess.Popen(
                    [*box, *argv] if box else argv,  # a sandboxed worker's: inside its sandbox
                    cwd=session.workdir,
                    env=env if box else None,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                )
            except OSError as error:
                return WaitOutcome(argv[0], None, why=f"could not run: {error.strerror or error}")
            try:
                code = child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return WaitOutcome(argv[0], None, why=f"still ran after {timeout:g}s and was stopped")
            output.seek(0)
            last = [line for line in output.read()[-4000:].splitlines() if line.strip()][-5:]
        return WaitOutcome(argv[0], code, tuple(last))

    def _spin_until_quiet(self, session: Session) -> None:
        """Until the screen has not changed for idle_threshold, the session's turn has ended (its Stop hook
        said so: no need to wait for the quiet), or spin_max has passed."""
        config, tmux = self.context.config, self.context.tmux
        deadline = time.monotonic() + config.spin_max
        last, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline:
            try:
                view, screen = tmux.glance(session.pane_id)
            except TmuxError as error:
                log.warning("cannot look at tmux pane %s: %s", session.pane_id, error)
                return
            if view is None or view.dead:
                return
            stored = self.context.store.get(session.id)
            if stored is None or stored.state is SessionState.TURN_ENDED or stored.state.is_final:
                return
            if screen != last:
                last, quiet_since = screen, time.monotonic()
            elif time.monotonic() - quiet_since >= config.idle_threshold:
                return
            time.sleep(config.poll_interval)


def _assess(session: Session, wait: WaitOutcome, max_sent_back: int) -> Verdict:
    """Ask the planner, read-only, whether the files still call for this session's step (and whether the
    worker's own check passed)."""

    def ask() -> Finished | Directive:
        # here, not at the top: every hook's process imports this module, and only a cycle asks the planner
        from teleclaude.planner.api import RepoFacts
        from teleclaude.planner.core.decide import decide_work

        repo = gitx.find_repo(session.project)
        facts = RepoFacts(repo, load_config(repo.root))
        decision = decide_work(facts, session.slug)
        plan = facts.plan(session.slug) if session.subfolder else None
        ahead = gitx.commits_ahead(repo, session.slug) if session.subfolder else 0
        open_tasks = plan.open_build_tasks if plan else 0
        return assess(
            session.command, session.slug, decision, open_tasks, ahead, wait, session.sent_back, max_sent_back
        )

    verdict = guard(ask)()
    assert isinstance(verdict, Finished | Directive | Error)
    return verdict


def _millis(moment: datetime) -> datetime:
    """The precision the store keeps, so a stamp read back compares equal to the one written."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _command_line(text: str) -> list[str] | Error:
    """A wait_cmd as an argument list: split like a shell would, but never run by one. An argument holding
    a control character (NUL, which no argument can carry, ESC, Ctrl-C) is refused before any cycle is
    recorded: the rule for text typed into a pane."""
    try:
        argv = shlex.split(text)
    except ValueError as error:
        return bad_argument(f"wait_cmd {text!r} cannot be split into arguments: {error}")
    if not argv:
        return bad_argument("wait_cmd is empty")
    refused = next(filter(None, (refused_text("wait_cmd", arg) for arg in argv)), None)
    return argv if refused is None else refused


def _checked_report(text: str, wait_cmd: str | None) -> tuple[str, list[str] | None] | Error:
    """A report's text on one line (at most 500 characters) and its wait_cmd's argv (None without one)."""
    text = " ".join(text.split())[:500]
    if not text:
        return bad_argument("text must say something: what you did, what you are doing next")
    argv = _command_line(wait_cmd) if wait_cmd and wait_cmd.strip() else None
    return argv if isinstance(argv, Error) else (text, argv)


def report_to_channel(
    channel: str, session_id: str, own: str, text: str, wait_cmd: str | None
) -> str | Error:
    """A sandboxed worker's report (`own`: its session, `channel`: that session's folder; it cannot reach
    the sessions database), checked as `Cycle.report` checks it and left in the channel for the observer,
    which records it and starts the post-report cycle at its next look."""
    if session_id and session_id != own:
        return bad_argument(f"session {session_id} is not yours: a worker reports its own session, {own}")
    checked = _checked_report(text, wait_cmd)
    if isinstance(checked, Error):
        return checked
    text, argv = checked
    from teleclaude.adapters.sandbox import relayed, write_report

    if relayed(Path(channel)):  # on another computer: only its hooks' marks reach teleclaude (its pane)
        return bad_argument(
            "report_status does not reach teleclaude from a worker on another computer; do your step, "
            "commit, and end your turn: your stop hook tells teleclaude"
        )

    try:
        write_report(Path(channel), text, wait_cmd if argv else None)
    except OSError as error:
        return Error(ErrorCode.FILE_ERROR, f"could not leave the report in {channel}: {error}")
    then = (
        "The supervisor runs wait_cmd (in your sandbox), waits for your pane to be quiet, then ends your "
        "session or types one directive."
        if argv
        else "Carry on."
    )
    return f"OK: status sent for session {own} (through its sandbox's channel).\n{then}"
