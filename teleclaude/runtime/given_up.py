"""`teleclaude run`'s watch over computers that stay unreachable (the rules: runtime/core/given_up.py).

Each round of the lanes' wait, `GivenUp.check` notes since when each computer ssh cannot reach has been
away, and ends the sessions of those away longer than `[runtime] unreachable_wait` (CANCELLED, saying why):
their lanes ask for their step again and start it elsewhere. Those sessions are swept on a thread of their
own: once their computer answers (tried every `SWEEP_EVERY` seconds; the run no longer looks at a computer
none of its workers uses) the old worker's tmux session there is ended, and the commits it made since the
last bring-back are fetched to a ref that is kept and never merged (`remote.keep_given_up`). `kept_lines`
lists those refs for `teleclaude status`.
"""

from __future__ import annotations

import logging
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters import ssh
from teleclaude.adapters.tmux import TmuxError
from teleclaude.runtime import remote
from teleclaude.runtime.api import Runtime
from teleclaude.runtime.core import given_up as rules
from teleclaude.runtime.core.given_up import Kept
from teleclaude.runtime.core.sessions import Change, Session, SessionState

log = logging.getLogger("teleclaude.runtime")


@dataclass
class GivenUp:
    """The run's computers that are away, its given-up workers not yet ended there, and what was kept."""

    runtime: Runtime
    root: Path  # the run's project (resolved, as the session store holds it)
    since: dict[str, datetime] = field(default_factory=dict)  # computer -> first seen away (run's clock)
    pending: list[Session] = field(default_factory=list)  # given up; their computer not reached since
    kept: list[Kept] = field(default_factory=list)
    sweeper: ThreadPoolExecutor | None = None
    sweeping: Future[list[Kept]] | None = None
    last_try: float = float("-inf")  # monotonic
    unlisted: list[Session] = field(default_factory=list)  # given up on a computer no longer listed

    def resume(self) -> None:
        """At the run's start: the project's workers given up by an earlier run and never ended on their
        computer (it came back only after that run ended) are swept from now on; those of a computer no
        longer in teleclaude.toml are only reported (a run with it listed again sweeps them)."""
        store = self.runtime.store
        given_up = [s for s in store.sessions() if s.project == str(self.root) and rules.is_given_up(s)]
        unswept = rules.unswept(given_up, store.events([s.id for s in given_up]))
        listed = self.runtime.config.remotes
        self.pending = [s for s in unswept if s.computer in listed]
        self.unlisted = [s for s in unswept if s.computer not in listed]
        self.sweep()

    def check(self, sessions: list[Session]) -> list[Session]:
        """Give up the live `sessions` whose computer has been away longer than `unreachable_wait`: each
        ended (CANCELLED) in the store, without touching its computer; the sessions given up."""
        runtime = self.runtime
        now = runtime.clock()
        self.since = rules.down_since(self.since, runtime.tmux.unreachable(), now)
        given, wait = [], runtime.config.unreachable_wait
        for session in sessions:
            if not rules.gives_up(session, self.since, now, wait):  # no read of the store for the rest
                continue
            fresh = runtime.store.get(session.id) or session
            if not rules.gives_up(fresh, self.since, now, wait):
                continue
            text = rules.why(fresh.computer, self.since[fresh.computer], now)
            ended = runtime.context.change(fresh, Change.ENDED, text, error=text)
            if ended.state is SessionState.CANCELLED:
                log.warning("session %s: %s", ended.id, text)
                given.append(ended)
                self.pending.append(ended)
        return given

    def holding(self, slug: str) -> frozenset[str]:
        """The computers a step of item `slug` does not go to yet (`rules.holding`)."""
        return rules.holding(self.pending, slug)

    def sweep(self) -> list[Kept]:
        """The given-up workers ended on their computers since the last call (on the sweeper's thread), and
        the next sweep started when one is due."""
        done = self._swept()
        now = time.monotonic()
        due = rules.sweeps(self.pending, self.runtime.tmux.unreachable(), self.last_try, now)
        if self.sweeping is None and due:
            self.last_try = now
            if self.sweeper is None:
                self.sweeper = ThreadPoolExecutor(1, thread_name_prefix="given-up")
            self.sweeping = self.sweeper.submit(self._sweep, due)
        return done

    def close(self) -> None:
        """At the run's end: a sweep under way finishes (at most an ssh timeout)."""
        if self.sweeper is not None:
            self.sweeper.shutdown(wait=True)
            self._swept()

    def _swept(self) -> list[Kept]:
        """What the sweep under way found, once it is over: each recorded in its session's history (a later
        run does not try it again)."""
        if self.sweeping is None or not self.sweeping.done():
            return []
        done, self.sweeping = self.sweeping.result(), None
        for kept in done:
            session = self.runtime.store.get(kept.session)
            if session is not None:
                event = rules.swept(kept, self.runtime.clock())
                self.runtime.store.save(session, expect=session.state, events=(event,))
        ended = {kept.session for kept in done}
        self.pending = [s for s in self.pending if s.id not in ended]
        self.kept.extend(done)
        return done

    def report(self) -> list[str]:
        """The run report's lines: what was kept, and the given-up workers their computer never let end."""
        left = [
            f"{s.id} on {s.computer} (given up): not ended there, {s.computer} still cannot be reached"
            for s in self.pending
        ]
        unlisted = [
            f"{s.id} on {s.computer} (given up): not ended there, {s.computer} is no longer in "
            "teleclaude.toml (list it again and run: its worker there is ended, its later commits kept)"
            for s in self.unlisted
        ]
        return [kept.text() for kept in self.kept] + left + unlisted

    def _sweep(self, sessions: list[Session]) -> list[Kept]:
        """Each session's old worker ended on its computer; a computer found still away is not tried again
        for its other sessions in this sweep (each try could wait out an ssh timeout)."""
        swept: list[Kept] = []
        away: set[str] = set()
        for session in sessions:
            if session.computer in away:
                continue
            kept = self._end_there(session)
            if kept is not None:
                swept.append(kept)
            elif session.computer in self.runtime.tmux.unreachable():
                away.add(session.computer)
        return swept

    def _end_there(self, session: Session) -> Kept | None:
        """End the given-up worker's tmux session on its computer and keep its commits; None while that
        computer cannot be reached."""
        tmux, config = self.runtime.tmux, self.runtime.config
        computer = config.remotes.get(session.computer)
        slug = remote.item_slug(session.subfolder)
        if computer is None:  # (not in teleclaude.toml: `resume` keeps such sessions out of `pending`)
            return None
        with suppress(TmuxError):  # gone already (its server too), or its computer is still away
            tmux.kill_session(session.tmux_session)
        if session.computer in tmux.unreachable():
            return None
        if slug is None:
            return Kept(session.id, session.computer, session.slug)
        ref = rules.kept_ref(slug, session.id)
        try:
            kept = remote.keep_given_up(computer, Path(session.project), slug, ref, config.ssh_timeout)
            if not kept and not gitx.commit_of(Path(session.project), ref):  # (kept by a try cut short)
                ref = ""
        except (ssh.RemoteError, subprocess.CalledProcessError) as error:
            log.warning(
                "session %s: could not keep its commits from %s: %s", session.id, computer.name, error
            )
            return None  # tried again at the next sweep
        return Kept(session.id, session.computer, slug, ref)


def kept_lines(root: str | Path) -> list[str]:
    """`teleclaude status`: one line per kept ref of a given-up worker, with the command to look at it."""
    try:
        refs = gitx.run_git(["for-each-ref", "--format=%(refname)", f"{rules.KEPT}/"], Path(root))
    except (subprocess.CalledProcessError, OSError):
        return []
    return [f"given up: a worker's later commits kept at {ref}: git log HEAD..{ref}" for ref in refs.split()]
