"""The news of a worker's hooks, as the observer records it: a turn's end, a StopFailure (and every limit,
recorded one way), a transcript named, usage and spend kept; told by a local hook directly, by a remote one's
pane marks, by a sandboxed one's channel folder. `HookNews` is the part of `Observer` that does it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from subprocess import Popen

from teleclaude.adapters import channel, procs, sandbox
from teleclaude.adapters.fleet import Fleet
from teleclaude.adapters.fs import read_tail
from teleclaude.adapters.ssh import RemoteTmux
from teleclaude.adapters.store import StoreError, marking_unavailable
from teleclaude.adapters.tmux import (
    COST_OPTION,
    SPEND_OPTION,
    STOP_FAILURE_OPTION,
    TURN_END_OPTION,
    USAGE_OPTION,
    TmuxError,
)
from teleclaude.agents.profile import UsageSource, UsageWindow
from teleclaude.runtime import trace
from teleclaude.runtime.context import Context
from teleclaude.runtime.core.blockers import unexpanded_command
from teleclaude.runtime.core.limits import LimitHit, decode_usage, failure_limit, parse_failure
from teleclaude.runtime.core.looks import moved_first
from teleclaude.runtime.core.marks import exit_channel, unseal
from teleclaude.runtime.core.sessions import Change, PaneView, Session, SessionState, transition
from teleclaude.runtime.core.supervision import progressed
from teleclaude.runtime.core.tool_uses import tool_use
from teleclaude.runtime.panes import Panes

log = logging.getLogger("teleclaude.runtime")

WORKING = (SessionState.RUNNING, SessionState.STALLED, SessionState.NEEDS_ATTENTION)
TRANSCRIPT_TAIL = 64 * 1024  # bytes of a session's transcript read for its last turn's end
FATAL_FAILURES = ("billing_error", "authentication_failed")  # no retry helps: a person must act


class HookNews:
    """What a worker's hooks tell, recorded; the observer's own attributes it works with are set by
    `Observer.__init__`."""

    context: Context
    # (agent, window) -> when the usage last kept was seen; session id -> its CLI's record when read again
    _usage_seen: dict[tuple[str, str], datetime]
    _spend_read: dict[str, tuple[str, int, int]]
    _listening: dict[str, int | None]
    _waiters: dict[str, Popen[bytes]]
    _pidfds: procs.Pidfds
    _channel_marks: dict[str, frozenset[str]]
    _unmarked: list[tuple[str, str]] | None  # (pane, option): remote marks recorded, taken away together
    panes: Panes
    report: Callable[[str, str, str | None, str], object] | None

    # --- a sandboxed worker's channel here, listened to ----------------------------------------------------

    def _listened(self, sessions: list[Session]) -> dict[int, str]:
        """The pipes of the local `sessions`' channels (their hooks poke them after leaving a mark: no tmux
        server reaches a sandbox, and its turn's end waited for a look), each opened once, those of other
        sessions closed: {pipe: id}."""
        self._unlisten(set(self._listening) - {s.id for s in sessions})
        pipes = {}
        for session in sessions:
            if session.id not in self._listening:
                self._listening[session.id] = sandbox.listen(self.context.store.path, session.id)
            pipe = self._listening[session.id]
            if pipe is not None:
                pipes[pipe] = session.id
        return pipes

    def _listening_to(self) -> list[int]:
        return [pipe for pipe in self._listening.values() if pipe is not None]

    def _poked(self, pipes: dict[int, str], ready: Iterable[int]) -> frozenset[str]:
        """The sessions whose pipes are `ready`, each pipe emptied."""
        poked = []
        for pipe in ready:
            if pipe in pipes:
                with suppress(OSError):  # emptied
                    while os.read(pipe, 512):
                        pass
                poked.append(pipes[pipe])
        return frozenset(poked)

    def _unlisten(self, session_ids: Iterable[str] | None = None) -> None:
        for session_id in list(self._listening) if session_ids is None else session_ids:
            pipe = self._listening.pop(session_id, None)
            if pipe is not None:
                os.close(pipe)

    # --- the workers' own wait-for clients, and one waiter for each other computer ----------------------

    def _rings(self, sessions: Iterable[Session]) -> dict[int, str]:
        """The pipes of the waiters of the other computers `sessions` work on (adapters/ssh.py `_Waker`: one
        a computer, readable when one of its workers moved), each with its computer's name; the waiters of
        the others ended (here, between two sleeps: never under a select on their pipes)."""
        wanted, found = {s.computer for s in sessions}, {}
        for computer in sorted(self.context.config.remotes):
            if not isinstance(there := self.context.tmux.on(computer), RemoteTmux):
                continue
            if computer not in wanted:
                there.stop_waking()
            elif (fd := there.wake_fd()) is not None:
                found[fd] = computer
        return found

    def _rung(
        self, sessions: list[Session], rings: dict[int, str], ready: Iterable[int]
    ) -> tuple[bool, frozenset[str], dict[str, PaneView] | None]:
        """Whether a computer's waiter rang among `ready`; then (its pipe read) the workers whose panes moved
        there (core/looks.py `moved_first`: looked at first), by the panes listed now, and those views."""
        computers = {rings[fd] for fd in ready if fd in rings}
        if not computers:
            return False, frozenset(), None
        for fd, computer in [(fd, c) for fd, c in rings.items() if c in computers]:
            there = self.context.tmux.on(computer)
            assert isinstance(there, RemoteTmux)  # (`_rings` gave it)
            there.rung()
            del rings[fd]  # a waker whose ssh ended is closed: its pipe is selected on no more
            if (now := there.wake_fd()) is not None:
                rings[now] = computer
        views = self.panes.views()
        first = moved_first(sessions, views, computers)
        for session_id in first:
            trace.mark("rung", session_id)
        return True, first, views

    def _waiter(self, session_id: str, tmux) -> Popen[bytes]:
        """The session's wait-for client. One that saw its signal between two waits is returned as it is: its
        end is the wake-up of the next sleep (tmux wakes one waiter per signal; a new one would sleep on)."""
        if session_id not in self._waiters:
            self._waiters[session_id] = tmux.wait_for(exit_channel(session_id))
        return self._waiters[session_id]

    def _forget_signalled(self, session_ids: Iterable[str]) -> bool:
        """Forget those of `session_ids`' waiters that saw their signal (the next wait starts new ones)."""
        ended = [i for i in session_ids if i in self._waiters and self._waiters[i].poll() is not None]
        for session_id in ended:
            self._pidfds.drop(self._waiters.pop(session_id))
        return bool(ended)

    def _stop_waiters(self, session_ids: Iterable[str] | None = None) -> None:
        ids = list(self._waiters) if session_ids is None else list(session_ids)
        for session_id in ids:
            waiter = self._waiters.pop(session_id, None)
            if waiter is not None:
                self._pidfds.drop(waiter)
                waiter.kill()
                waiter.wait()
        self._unlisten(None if session_ids is None else ids)

    def record_turn_end(self, session_id: str, source: str = "stop hook", prompt: str = "") -> bool:
        """An agent's Stop hook said its turn is over (called from `teleclaude hook stop`). True once the
        stored row shows it (or there is nothing to record); False when another writer saved first.

        `prompt` (from a stop hook whose input says, `Hooks.stop_prompt`): what the model was sent. When it
        is the session's command line as typed, the CLI did not know the command: the session errs, the step
        never ran."""
        session = self.context.store.get(session_id)
        if session is None or session.state.is_final:
            return True
        if session.state not in WORKING:
            # the turn of a line typed in may be over before the launcher saw the line taken (a loaded
            # machine): it ends the turn by this time, once it makes the session work; else a late stop
            stopped = replace(session, stopped_at=self.context.clock())
            return self.context.store.save(stopped, expect=session.state) is not None
        saved = self._stop_told(session, source, prompt, session.state)
        if saved.state in WORKING:
            return False
        self._wake(session)
        return True

    def _stop_told(self, session: Session, source: str, prompt: str, expect: SessionState) -> Session:
        """A working session's turn ended by its stop hook; errored when the `prompt` its CLI sent the model
        is its command line as typed (the CLI did not know the command)."""
        profile = self.context.config.profiles.get(session.agent)
        typed = profile.slash_command(session.command, session.args) if profile else ""
        if prompt and unexpanded_command(prompt, typed):
            why = (
                f"{session.agent} does not know the command: it sent `{typed}` to the model as a plain "
                f"prompt. Run `teleclaude install --{session.agent}` so that the role commands exist."
            )
            return self.context.change(session, Change.ERRORED, why, expect=expect, error=why)
        return self._turn_ended(session, source, expect)

    def _hook_ended(
        self, session: Session, now: datetime, expect: SessionState, prompt: str = ""
    ) -> Session | None:
        """A stop hook's news, told by a mark (a remote worker's pane, a sandboxed one's channel), with the
        prompt its CLI sent when the mark carries it, saved as `record_turn_end` saves a local hook's: a
        working session's turn ends (or errs); on one not working (a line typed in, the launcher not yet sure
        it was taken) `stopped_at` is kept for the launcher. None when another writer saved first."""
        if session.state in WORKING:
            ended = self._stop_told(session, "stop hook", prompt, expect)
            return None if ended.state in WORKING else ended
        return self.context.store.save(replace(session, stopped_at=now), expect=expect)

    def _wake(self, session: Session) -> None:
        """A hook's news is saved: whoever waits on the session (`wait`, in another process) looks at once,
        not at its next poll: the run listening on its pipe (`sandbox.listen`) through that, without a tmux
        client; else through the wait-for channel its pane's exit also signals (a signal that finds no waiter
        wakes the next). As record.py `end_turn_plainly` wakes them."""
        if channel.poke(channel.look_beside(str(self.context.store.path), session.id)):
            return
        try:
            self.context.tmux.signal(exit_channel(session.id))
        except TmuxError as error:
            log.info("session %s: could not wake its waiters (%s)", session.id, error)

    def _turn_ended(self, session: Session, source: str, expect: SessionState) -> Session:
        """A stop hook said the turn is over: a stalled or neglected worker runs again, then ends its turn."""
        working, _ = progressed(session, self.context.clock())  # the turn's end is what is stored
        return self.context.change(working, Change.TURN_ENDED, source, expect=expect)

    def record_transcript(self, session_id: str, path: str, conversation: str = "") -> bool:
        """The CLI's prompt hook named the session's transcript (`teleclaude hook prompt`; its stop hook, with
        the CLI's own id of the session, `conversation`, when that names what it used in a database). True
        once the stored row shows it (or nothing is to record); False when another writer saved first."""
        return self.context.store.name_transcript(session_id, path, conversation)

    def _transcript(self, session: Session) -> list[str]:
        """The tail of a working local session's transcript (the file its prompt hook named), when its driver
        reads one (for the error that ended its turn, or its usage); [] otherwise."""
        local = not self.context.config.elsewhere(session.computer)
        profile = self.context.config.profiles.get(session.agent)
        reads = profile is not None and (profile.turn_error or profile.usage.source is UsageSource.TRANSCRIPT)
        if not (reads and session.transcript and local and session.state in WORKING):
            return []
        return read_tail(Path(session.transcript), TRANSCRIPT_TAIL)

    def _transcript_usage(self, session: Session, lines: list[str]) -> None:
        """The usage of its agent's windows the transcript reports (the driver's `usage`), kept with the
        availability table when newer than what this observer kept last."""
        profile = self.context.config.profiles.get(session.agent)
        reader = profile.usage.read if profile and profile.usage.source is UsageSource.TRANSCRIPT else None
        if lines and reader is not None:
            self._keep_usage(reader("\n".join(lines), self.context.clock()))

    def _spend_again(self, session: Session) -> None:
        """What its CLI's record says now, after the turn's end (its last answer may have been written
        after its stop hook read the record: spend.read_again), when it changed since this observer last
        read it."""
        try:
            found = os.stat(session.transcript) if session.transcript else None
        except OSError:
            return
        seen = (session.transcript, found.st_size, found.st_mtime_ns) if found else None
        if seen is None or self._spend_read.get(session.id) == seen:
            return
        self._spend_read[session.id] = seen
        from teleclaude.runtime import spend  # (the stop hook's runtime goes without it)

        spend.read_again(self.context, session)

    def _marked_usage(self, session: Session, view: PaneView) -> None:
        """The usage hook of a worker on another computer marked its pane with its agent's usage: kept here as
        a local hook keeps it, then the mark is taken away."""
        sealed = self._sealed(session, USAGE_OPTION, view.usage)
        if sealed is None:
            return
        self._keep_usage(decode_usage(session.agent, sealed))
        self._clear_mark(session, USAGE_OPTION)

    def _marked_spend(self, session: Session, view: PaneView) -> None:
        """The stop hook of a worker on another computer marked its pane with what its session used so far
        (before its turn's end), its status line with what its CLI says it cost: kept here as a local hook
        keeps them, then the marks are taken away."""
        from teleclaude.runtime.core.spend import decode_cost, decode_tokens

        sealed = self._sealed(session, SPEND_OPTION, view.spend)
        try:
            if sealed is not None:
                self.context.store.add_spend(session.id, self.context.clock(), decode_tokens(sealed))
                self._clear_mark(session, SPEND_OPTION)
            # its status line's cost, on the reading just kept (none yet: the mark waits for one)
            sealed = self._sealed(session, COST_OPTION, view.cost)
            usd = decode_cost(sealed) if sealed is not None else None
            if usd is not None and self.context.store.spend_readings([session.id]):
                self.context.store.set_cost(session.id, usd)
                self._clear_mark(session, COST_OPTION)
            elif sealed is not None and usd is None:
                self._clear_mark(session, COST_OPTION)  # not a cost: nothing to keep
        except StoreError as error:  # the mark stays for the next look
            log.info("session %s: could not keep what it used: %s", session.id, error)

    def _keep_usage(self, windows: tuple[UsageWindow, ...]) -> None:
        fresh = [w for w in windows if self._usage_seen.get((w.agent, w.window)) != w.seen_at]
        if not fresh:
            return
        try:
            self.context.availability.record_usage(fresh)
        except StoreError as error:  # soft state: the next report brings it again
            log.info("could not keep the usage of %s: %s", fresh[0].agent, error)
            return
        self._usage_seen.update({(w.agent, w.window): w.seen_at for w in fresh})

    def _turn_error(self, session: Session, lines: list[str]) -> Session | None:
        """The API error that ended the turn, typed, from the session's transcript (the driver's `turn_error`:
        no hook runs for such a turn): recorded as a StopFailure hook's would be (a limit makes the agent
        unavailable until its reset)."""
        profile = self.context.config.profiles.get(session.agent)
        reader = profile.turn_error if profile else None
        if not (reader and lines and session.delivered_at):
            return None
        error = reader(lines)
        if error is None or error.completed_at < session.delivered_at.replace(microsecond=0):
            return None  # the turn goes on, completed, or is one from before the last message
        log.info(
            "session %s: its transcript ends the turn with %s: %s", session.id, error.kind, error.message
        )
        self.record_stop_failure(session.id, error.kind, error.message, error.source)
        return self.context.store.get(session.id) or session

    def _marked_failure(self, session: Session, view: PaneView) -> Session | None:
        """The StopFailure hook of a worker on another computer marked its pane with the failure (it cannot
        reach this database): recorded as a local StopFailure hook's is, then the mark is taken away."""
        sealed = self._sealed(session, STOP_FAILURE_OPTION, view.stop_failure)
        if sealed is None:
            return None
        failure = parse_failure(sealed)
        if failure is None:  # not a failure teleclaude's hook writes: nothing to record
            self._clear_mark(session, STOP_FAILURE_OPTION)
            return None
        log.info("session %s: its pane is marked with %s: %s", session.id, failure.error, failure.message)
        if self.record_stop_failure(session.id, failure.error, failure.message):
            self._clear_mark(session, STOP_FAILURE_OPTION)
        return self.context.store.get(session.id) or session  # not recorded: the mark stays for the next look

    def _with_channel(
        self, session: Session, view: PaneView, files: frozenset[str]
    ) -> tuple[PaneView, tuple[str, str]]:
        """A sandboxed worker's hooks mark its channel folder, not its pane (adapters/sandbox.py): read as
        the pane's marks are, with (its CLI's id of the session, its record) its tool uses named.
        `files`: what the folder holds (`sandbox.listing`)."""
        if session.computer in self.context.config.remotes or not files:
            self._channel_marks.pop(session.id, None)
            return view, ("", "")
        folder = sandbox.channel_folder(self.context.store.path, session.id)
        uses = sandbox.take_tool_uses(folder) if sandbox.TOOL_USES in files else []
        for use in uses:
            at = datetime.fromtimestamp(float(str(use["at"])), UTC)
            cwd = str(use.get("cwd") or "")
            self.context.store.add_tool_use(tool_use(session.id, str(use["tool"]), use.get("input"), at, cwd))
        named = sandbox.named_in(uses)
        marks = sandbox.read_marks(folder, files)
        self._channel_marks[session.id] = frozenset(marks)
        if not marks:
            return view, named
        return replace(
            view,
            turn_end=marks.get(TURN_END_OPTION) or view.turn_end,
            stop_failure=marks.get(STOP_FAILURE_OPTION) or view.stop_failure,
            usage=marks.get(USAGE_OPTION) or view.usage,
            spend=marks.get(SPEND_OPTION) or view.spend,
            cost=marks.get(COST_OPTION) or view.cost,
        ), named

    def _channel_transcript(
        self, session: Session, files: frozenset[str], named: tuple[str, str] = ("", "")
    ) -> Session:
        """The CLI's record of the session (its path) and its own id of the session that a sandboxed
        worker's hooks left in its channel (a prompt or stop hook's marks; `named`: its tool uses'), kept
        on its session as a local hook keeps them (runtime/hooks/tool.py, record.py): a record only in its
        CLI's state folders, and a tool use's only where the session has none yet."""
        profile = self.context.config.profiles.get(session.agent)
        marked = {sandbox.TRANSCRIPT, sandbox.CONVERSATION} & files
        if profile is None or session.computer in self.context.config.remotes or not (marked or any(named)):
            return session
        folder = sandbox.channel_folder(self.context.store.path, session.id)
        home = self.context.env.get("HOME", "")
        path = sandbox.read_transcript(folder, home, profile.sandbox) if marked else None
        conversation = (sandbox.read_conversation(folder) if marked else "") or named[0]
        path = path or session.transcript or sandbox.own_record(named[1], home, profile.sandbox) or ""
        if self.record_transcript(session.id, path, conversation):  # else the marks stay for the next look
            for mark in marked:
                sandbox.clear_mark(folder, mark)
        return self.context.store.get(session.id) or session

    def _channel_report(self, session: Session, files: frozenset[str]) -> Session:
        """A sandboxed worker's report_status, left in its channel: recorded as if it had called it here (its
        channel is its own: the observer vouches for its key). `files`: what the channel holds
        (`sandbox.listing`)."""
        if (
            self.report is None
            or session.computer in self.context.config.remotes
            or sandbox.REPORT not in files
        ):
            return session
        taken = sandbox.take_report(sandbox.channel_folder(self.context.store.path, session.id))
        if taken is None:
            return session
        answer = self.report(session.id, taken[0], taken[1], session.key)
        log.info(
            "session %s: its report from its sandbox: %s", session.id, getattr(answer, "code", "recorded")
        )
        return self.context.store.get(session.id) or session

    @contextmanager
    def _marks_together(self) -> Iterator[None]:
        """Within: the remote marks recorded are taken away at its end, one tmux client a computer."""
        self._unmarked = []
        try:
            yield
        finally:
            unmarked, self._unmarked, tmux = self._unmarked, None, self.context.tmux
            try:
                if unmarked and isinstance(tmux, Fleet):  # (only other computers' marks are gathered)
                    tmux.clear_marks(unmarked)
            except TmuxError as error:  # a pane gone meanwhile: a mark left is read again at the next look
                log.info("could not take away the marks read (%s)", error)

    def _clear_mark(self, session: Session, option: str, forged: bool = False) -> None:
        """A mark recorded (or `forged`: not sealed with its session's key) taken away: from a local worker's
        channel, and from its pane unless the mark read was its channel's (a sandboxed worker's hooks reach
        no pane: a tmux client fewer at each of its turn's ends); a remote pane's, while `_unmarked` gathers
        them, with the others read in the same look (one ssh client a computer)."""
        local = session.computer not in self.context.config.remotes
        if local:
            sandbox.clear_mark(sandbox.channel_folder(self.context.store.path, session.id), option)
        elif self._unmarked is not None:
            self._unmarked.append((session.pane_id, option))
            return
        if forged or not local or option not in self._channel_marks.get(session.id, ()):
            self.context.tmux.clear_mark(session.pane_id, option)

    def _sealed(self, session: Session, option: str, mark: str) -> str | None:
        """What the session's own hook marked its pane with; a mark not sealed with the session's key (set by
        another process, which any process of the user may) is taken away unread."""
        if not mark:
            return None
        payload = unseal(session.key, session.id, option, mark)
        if payload is None:
            log.warning("session %s: its pane's %s was not set by its own hook: ignored", session.id, option)
            self._clear_mark(session, option, forged=True)
        return payload

    def record_stop_failure(
        self, session_id: str, error: str, message: str, signal: str = "StopFailure hook"
    ) -> bool:
        """An agent's StopFailure hook said an API error ended its turn (`teleclaude hook stop-failure`):
        a limit makes the session rate-limited and the agent unavailable until the reset the message names;
        billing or authentication errors end it as errored; any other error ends the turn. True once the
        stored row shows it (or there is nothing to record); False when another writer saved first, or while
        the session is PENDING: its line typed, the launcher not yet sure it was taken (a loaded machine), the
        failure is told again once it works (a limit's agent is out at once)."""
        context = self.context
        session = context.store.get(session_id)
        if session is None:
            return True
        now, expect = context.clock(), session.state
        source = f"{signal}: {error}" + (f": {message.strip()[:300]}" if message.strip() else "")
        hit = failure_limit(error, message, now, local_zone(now))
        limitable = session.state in (*WORKING, SessionState.TURN_ENDED)
        if hit is not None:  # the hook's reset is the CLI's own: it wins over a guess from the screen
            saved = self._record_limit(session, hit, source, expect, wins=True, limitable=limitable)
            if saved.state is SessionState.PENDING:
                return False
            return not limitable or saved.state is SessionState.RATE_LIMITED or saved.state.is_final
        if session.state is SessionState.PENDING:
            return False
        if not limitable:
            return True
        if error in FATAL_FAILURES:
            detail, target, change = source, SessionState.ERRORED, Change.ERRORED
        elif session.state in WORKING:
            detail, target, change = source, SessionState.TURN_ENDED, Change.TURN_ENDED
            session, _ = progressed(
                session, now
            )  # a stalled or neglected worker runs again, then ends its turn
        else:
            return True  # the turn already ended
        saved = context.change(session, change, detail, expect=expect, error=detail)
        return saved.state is target or saved.state.is_final

    def _record_limit(
        self,
        session: Session,
        hit: LimitHit,
        source: str,
        expect: SessionState,
        error: str | None = None,
        *,
        wins: bool = False,
        limitable: bool = True,
    ) -> Session:
        """The one way a limit is recorded: the session's RATE_LIMITED change (when `limitable`) and its
        agent's mark until the reset, saved in one transaction, so whoever sees the event finds the agent out.
        When another writer saved first (say the StopFailure hook, which knew the CLI's own reset), its row
        and its time stay, unless this limit `wins` (it is the hook's)."""
        detail = f"{hit.reason} until {hit.until.isoformat(timespec='seconds')}: {source}"
        log.info("session %s: %s", session.id, detail)
        availability, store = self.context.availability, self.context.store
        if not limitable:
            if wins:
                availability.mark_unavailable(session.agent, hit.until, hit.reason)
            return store.get(session.id) or session
        now, mark = self.context.clock(), marking_unavailable(session.agent, hit.until, hit.reason)
        limited, events = transition(session, Change.RATE_LIMITED, now, detail, error=error or detail)
        saved = store.save(limited, expect=expect, events=events, also=mark)  # one file holds both (Runtime)
        if saved is None and wins:  # the session moved on, but the hook's reset is the CLI's own
            availability.mark_unavailable(session.agent, hit.until, hit.reason)
        return saved or store.get(session.id) or session


def local_zone(now: datetime) -> tzinfo:
    """The computer's time zone at `now` (the runtime's clock): the zone a CLI's local reset times are in."""
    return now.astimezone().tzinfo or UTC
