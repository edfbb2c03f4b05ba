"""Typing a worker's command line and waiting on its CLI: the command's name until the CLI lists it, the line
taken as its command, an interrupt, the prompt that stands, and what an early exit left on the screen.
`PromptWait` is the part of `Launcher` that does it."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from functools import partial

from teleclaude.adapters import procs, sandbox
from teleclaude.agents.profile import AgentProfile
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core.terminal import printable
from teleclaude.runtime.context import Context
from teleclaude.runtime.core.blockers import (
    blocked_text,
    find_blocker,
    last_rows,
    refusal_text,
    refused_command,
)
from teleclaude.runtime.core.continuation import replay_shown
from teleclaude.runtime.core.sandbox import blocked_text as sandbox_blocked
from teleclaude.runtime.core.sandbox import denied_path, raced
from teleclaude.runtime.core.screens import (
    command_listed,
    command_taken,
    shown_as_message,
    shows_part_of,
    waiting_for_input,
)
from teleclaude.runtime.core.sessions import Change, PaneView, Session
from teleclaude.runtime.panes import LOOK_EVERY, Glanced, Panes, backed_off
from teleclaude.runtime.worker_setup import EXIT_OUTPUT_WAIT, delivery_failed, resume_refused

log = logging.getLogger("teleclaude.runtime")

PROMPT_POLL = 0.05  # seconds between looks at a starting pane without output events (see AHEAD_POLL)
STARVED_LIMIT = 5  # a CLI starved of CPU gets its prompt wait prolonged up to this many startup_timeouts


class PromptWait:
    """Typing into a starting worker and waiting on its CLI; `Launcher.__init__` sets what it works with."""

    context: Context
    panes: Panes

    def _type_command(self, session: Session, profile: AgentProfile, text: str) -> Glanced | None:
        """Type the command line; with the profile's `command_listed`, the command's name first and the rest
        once the CLI lists the command (it knows it), or after `command_wait` (with `command_retype`, after
        `startup_timeout`: `_until_listed`): an unknown command then gets the CLI's own answer, as without
        the rule. The line typed at once is glanced at in the same tmux client: that glance."""
        tmux, pane = self.context.tmux, session.pane_id
        name = profile.command_name(session.command)
        head = f"{profile.command_sign}{name}"
        if not profile.command_listed or not text.startswith(head):
            return tmux.glance(pane, typed=text)
        tmux.send_text(pane, head)
        listed = partial(command_listed, listed_pattern=profile.command_listed, name=name)
        emptied = partial(waiting_for_input, prompt_pattern=profile.prompt, busy_pattern=profile.busy)

        def empty(rows: list[str]) -> bool:
            """The input empty again: a bare border row matches opencode's prompt while `/` is still typed."""
            return emptied(rows) and not listed(rows) and not shows_part_of(rows, head)

        if profile.command_retype:  # the name erased, and once the list is gone the line typed whole
            self._until_listed(session, head, listed, empty)
            for _ in head:
                tmux.send_key(pane, "BSpace")
            self.panes.until_screen(session, empty, self.context.config.command_wait)
            tmux.send_text(pane, text)
            return None
        self.panes.until_screen(session, listed, self.context.config.command_wait, pause=0.05)
        if text[len(head) :]:
            tmux.send_text(pane, text[len(head) :])
            # the arguments typed: Enter while the CLI still lists the command (gemini under load, its list
            # behind its input) takes the listed name in place of the last word, and sends nothing
            self.panes.until_screen(session, lambda rows: not listed(rows), self.context.config.command_wait)
        return None

    def _until_listed(
        self,
        session: Session,
        head: str,
        listed: Callable[[list[str]], bool],
        empty: Callable[[list[str]], bool],
    ) -> None:
        """Until the CLI lists the typed command name `head`, for up to `startup_timeout` (a loaded opencode
        loads its commands long after its prompt shows, and takes a line typed before as plain text). Its
        list follows its commands as they load; keys typed before it is ready are lost: once the typed name
        is gone from the input, or `command_wait` passed without the list, the name is erased and typed
        again. Never listed: the line is typed all the same (an unknown command gets the CLI's answer)."""
        config, tmux, pane = self.context.config, self.context.tmux, session.pane_id
        deadline = time.monotonic() + config.startup_timeout
        while True:
            seen = [False]

            def listed_or_lost(rows: list[str], seen: list[bool] = seen) -> bool:
                typed = shown_as_message(rows, head) > 0
                seen[0] = seen[0] or typed
                return listed(rows) or (seen[0] and not typed)

            left = deadline - time.monotonic()
            self.panes.until_screen(session, listed_or_lost, min(config.command_wait, left), pause=0.05)
            if listed(self._screen(session)) or time.monotonic() >= deadline:
                return
            log.info("session %s: %s lists no %s yet; typing it again", session.id, session.agent, head)
            for _ in head:
                tmux.send_key(pane, "BSpace")
            self.panes.until_screen(session, empty, min(config.command_wait, deadline - time.monotonic()))
            tmux.send_text(pane, head)

    def _expanded(self, session: Session, text: str, expansion: Sequence[str], shown: int) -> bool:
        """After Enter on the command line: whether the CLI took it as its command (a line of the command's
        text shows), not as a message to the model (the line itself shows once more than before it was
        typed). Neither within `command_wait`: taken (what was typed is on its way either way)."""
        taken = partial(command_taken, typed=text, expansion=expansion, shown_before=shown)
        self.panes.until_screen(
            session, lambda rows: taken(rows) is not None, self.context.config.command_wait
        )
        return taken(self._screen(session)) is not False

    def _interrupted(self, session: Session, profile: AgentProfile) -> list[str] | Error:
        """Escape until the CLI is no longer busy (a CLI may stop only at the second), then its prompt."""
        for _ in range(3):
            screen = self._screen(session)
            if not (profile.busy and any(re.search(profile.busy, row) for row in screen)):
                break
            self.context.tmux.send_key(session.pane_id, "Escape")
            changed = partial(lambda before, rows: rows != before, screen)
            self.panes.until_screen(session, changed, self.context.config.command_wait)
        return self._wait_for_prompt(session, profile, opened=False)

    def _wait_for_prompt(
        self,
        session: Session,
        profile: AgentProfile,
        stable: float | None = None,
        pause: float = PROMPT_POLL,
        opened: bool = True,
        longest: float = LOOK_EVERY,
        first: float = 0.0,
    ) -> list[str] | Error:
        """The screen once the CLI's prompt has stayed on an unchanged screen for `stable` seconds (by
        default its `prompt_stable`): a CLI may paint its prompt and then replace it by a dialog (codex's
        hooks review ~0.7 s later), and whatever is typed into a dialog answers it. A dialog, a refusal or
        an early exit is reported at once (with the CLI's own last output), never waited out, never typed
        into. A resumed worker's prompt counts once its CLI has painted the conversation again
        (`Resume.replayed`): one that shows its prompt before it loads it loses a line typed meanwhile.
        `opened`: its pane was just opened (else its CLI's wait for a CPU is counted from now). Without output
        events it is looked at after `pause`, then after longer pauses, up to `longest` seconds; the first
        time after `first` (a worker started ahead: its CLI has drawn nothing yet, and nobody waits on it)."""
        config, tmux = self.context.config, self.context.tmux
        began = time.monotonic()
        # a worker started ahead (`stable` 0) has stood at its prompt since: one look tells, and its CPU wait
        # is not counted. Another's is counted from its CLI's start, in its pane just opened: a scan of every
        # process, only once its time is up (thirty starts at once each paid for one at their beginning)
        if stable == 0:
            starved = None
        elif opened:
            starved = (
                0.0 if session.computer not in self.context.config.remotes and session.pane_pid else None
            )
        else:
            starved = self._waited_for_cpu(session)
        deadline = began + config.startup_timeout
        stable_since, last = None, None
        replayed = profile.resume.replayed if session.resumed_from and profile.resume else ""
        stable = config.prompt_stable_of(session.agent) if stable is None else stable
        if first > 0:
            tmux.await_output(session.pane_id, tmux.output_mark(session.pane_id), first, poll=first)
        while True:
            mark = tmux.output_mark(session.pane_id)  # before the screen is read: output after it wakes us
            view, screen = tmux.glance(session.pane_id)
            if view is None or view.dead:
                return self._exited(session, view)
            blocker = find_blocker(session.agent, screen)
            if blocker is not None:
                return Error(
                    ErrorCode.WORKER_BLOCKED, blocked_text(session.agent, blocker, session.workdir, screen)
                )
            refusal = resume_refused(profile, screen) if session.resumed_from else None
            if refusal is not None:  # Runtime.start starts it fresh
                return Error(
                    ErrorCode.WORKER_BLOCKED, f"{session.agent} did not resume: {printable(refusal)}"
                )
            at_prompt = waiting_for_input(screen, profile.prompt, profile.busy)
            if not (at_prompt and replay_shown(screen, replayed)):
                stable_since = None
            elif stable <= 0:
                return screen
            elif screen != last or stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= stable:
                return screen
            last = screen
            if time.monotonic() > deadline and starved is not None:
                # the time its CLI was ready to run while others had the CPU (a loaded machine) is not
                # counted against it (for at most STARVED_LIMIT timeouts in all; each reprieve at least 1 s)
                late = max((self._waited_for_cpu(session) or 0.0) - starved, 0.0)
                later = began + min(config.startup_timeout + late, STARVED_LIMIT * config.startup_timeout)
                if later - time.monotonic() >= 1.0:
                    deadline = later
            if time.monotonic() > deadline:
                if at_prompt and not replay_shown(screen, replayed):  # scrolled away, say: typed anyway
                    log.warning("session %s: %s's replayed conversation not seen", session.id, session.agent)
                    return screen
                denied = self._denied(session, screen)
                if denied is not None:  # stuck on a path its sandbox hides, not silent
                    output = "\n".join(row.rstrip() for row in last_rows(screen))
                    return Error(ErrorCode.WORKER_BLOCKED, sandbox_blocked(session.agent, denied, output))
                return delivery_failed(session, "", f"no prompt after {config.startup_timeout:g}s", screen)
            # the next look when the pane prints, or when the prompt has stood unchanged for `stable` (a pane
            # that died prints nothing: looked at every 0.25 s); without events every `pause`, and a prompt
            # that stands every quarter of its `stable`, not more often than `pause` nor less often than
            # every 0.25 s (a change seen later only waits longer)
            quiet = stable_since + stable - time.monotonic() if stable_since is not None else longest
            poll = pause if stable_since is None else max(pause, stable / 4)
            tmux.await_output(session.pane_id, mark, max(0.0, min(quiet, longest)), poll=poll)
            pause = backed_off(pause, longest)  # a CLI slow to start is not looked at 20 times a second

    def _waited_for_cpu(self, session: Session) -> float | None:
        """Seconds the worker's CLI has waited for a CPU so far (`procs.waited_for_cpu` of its pane's
        process group); None for a worker on another computer, or where /proc does not tell."""
        if session.computer in self.context.config.remotes or not session.pane_pid:
            return None
        return procs.waited_for_cpu(session.pane_pid)

    def _denied(self, session: Session, rows: list[str]) -> str | None:
        """The path a sandboxed worker's CLI says it could not open, if it is one."""
        if not sandbox.channel_folder(self.context.store.path, session.id).is_dir():
            return None
        return denied_path(rows)

    def _screen(self, session: Session) -> list[str]:
        return self.context.tmux.glance(session.pane_id)[1]

    def _refused(self, session: Session) -> Error | None:
        """The CLI answered the command with its "unknown command" (it may keep the text in its input box)."""
        refusal = refused_command(session.agent, self._screen(session))
        if refusal is None:
            return None
        return Error(ErrorCode.INVALID_ARGUMENT, refusal_text(session.agent, refusal))

    def _exited(self, session: Session, view: PaneView | None) -> Error:
        """The CLI exited before its prompt: its last output (kept by remain-on-exit, history included)."""
        tmux = self.context.tmux
        rows = tmux.capture(session.pane_id, -view.history_size, view.height - 1) if view else []
        deadline = time.monotonic() + EXIT_OUTPUT_WAIT
        while view and not last_rows(rows) and time.monotonic() < deadline:
            # its wrapper recorded the exit before tmux read the CLI's last bytes from the pane (a CLI that
            # prints its refusal and exits at once): look again until they show
            time.sleep(0.05)
            view = tmux.glance(session.pane_id)[0] or view
            rows = tmux.capture(session.pane_id, -view.history_size, view.height - 1)
        output = "\n".join(row.rstrip() for row in last_rows(rows)) or "(nothing)"
        if raced(last_rows(rows)):
            return Error(
                ErrorCode.SANDBOX_RACED,
                f"{session.agent}'s sandbox was not made: a path it shows went away as it was made (another "
                f"item's branch removed meanwhile). Its output:\n{output}",
            )
        blocker = find_blocker(session.agent, rows, exited=True)
        if blocker is not None:
            return Error(
                ErrorCode.WORKER_BLOCKED, blocked_text(session.agent, blocker, session.workdir, rows)
            )
        status = f" (exit status {view.dead_status})" if view and view.dead_status is not None else ""
        denied = self._denied(session, rows)
        if denied is not None:
            return Error(ErrorCode.WORKER_BLOCKED, sandbox_blocked(session.agent, denied, output))
        return Error(
            ErrorCode.WORKER_BLOCKED,
            f"{session.agent} exited before showing its prompt{status}. Its last output:\n{output}\n"
            f"Run it by hand in {session.workdir} to see what it needs, or mark it unavailable.",
            next_step=call("mark_agent_unavailable", agent=session.agent),
        )

    def _fail(self, session: Session, error: Error) -> Error:
        """Delivery failed: no session is left behind, and the row says why."""
        self.context.tmux.kill_session(session.tmux_session)
        self.context.change(session, Change.ERRORED, error.message, error=error.message)
        return error
