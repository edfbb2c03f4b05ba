"""Starting a worker (an agent CLI in a tmux session, its command typed in), typing into it, and ending it."""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters import fs, sandbox
from teleclaude.adapters import git as gitx
from teleclaude.adapters.ssh import RemoteError, Unreachable, qualify
from teleclaude.adapters.tmux import TURN_END_TO_PANE, TmuxError
from teleclaude.agents.formats import split_front_matter
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.matrix import THINKING_MODES
from teleclaude.config.profiles import Computer, SandboxMode
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import Step
from teleclaude.planner.core.terminal import printable
from teleclaude.runtime.context import Context, bad_argument, refused_text, unknown_session
from teleclaude.runtime.core.blockers import (
    blocked_text,
    find_blocker,
    last_rows,
    refusal_text,
    refused_command,
)
from teleclaude.runtime.core.continuation import past_replay
from teleclaude.runtime.core.marks import SESSION_KEY
from teleclaude.runtime.core.sandbox import blocked_text as sandbox_blocked
from teleclaude.runtime.core.sandbox import bwrap_argv, denied_path
from teleclaude.runtime.core.sessions import (
    Change,
    Cursor,
    Ended,
    Event,
    PaneView,
    Session,
    SessionState,
    Started,
    StartRequest,
    command_listed,
    command_taken,
    seen_of,
    shown_as_message,
    shows_part_of,
    transition,
    waiting_for_input,
)
from teleclaude.runtime.core.supervision import bare_command, resumed, step_of
from teleclaude.runtime.panes import NotSent, Panes, Untypable, WorkerBlocked
from teleclaude.runtime.remote import item_slug, send

log = logging.getLogger("teleclaude.runtime")
_COMMAND = re.compile(r"[a-z0-9][a-z0-9:._-]{0,80}")
SAVE_ATTEMPTS = 20  # saves of a typed line refused by other writers of the row before giving up
# seconds between looks at a starting worker's pane while its prompt is awaited, without output events: a
# start the run waits on, and one started ahead of its step (each look is a tmux client: ~2 ms of CPU)
PROMPT_POLL = 0.05
AHEAD_POLL = 0.25
COMMAND_ATTEMPTS = 3  # a command line the CLI took as plain text is typed again, at most this often in all


@dataclass(frozen=True)
class Warm:
    """A worker at its prompt, its command not typed (`Launcher.warm`): its PENDING session, and the start
    lock it holds until it is delivered or dropped."""

    session: Session
    profile: AgentProfile
    lock: ExitStack
    request: StartRequest | None = None  # what it was started for


class Launcher:
    def __init__(self, context: Context, panes: Panes) -> None:
        self.context = context
        self.panes = panes

    # --- starting ------------------------------------------------------------------------------------------

    def start(self, request: StartRequest) -> Started | Error:
        """`request.parent` (core/parents.py): who is woken with the worker's digests, "" for nobody."""
        prepared = self._prepare(request)
        if isinstance(prepared, Error):
            return prepared
        session, profile, binary, remote, workdir = prepared
        # held until the session has its command (or failed): a starter that dies meanwhile (kill -9) lets go
        # of it, and the next run restarts the step at once (`starter_gone`)
        with fs.holding(start_lock(self.context.store.path, session.id)):
            opened = self._hold_and_open(session, profile, binary, remote, workdir, request.thinking_mode)
            return opened if isinstance(opened, Error) else self._deliver(opened, profile, told=request.told)

    def warm(self, request: StartRequest) -> Warm | Error:
        """A worker started before its step is known (`teleclaude run` starts the agent most likely to take
        the next step while the current one works): started and waited for as `start` does, but left at its
        prompt, its command not typed. Its PENDING session holds the step and its start lock until
        `deliver_warm` types the command or `drop_warm` ends it; a starter killed meanwhile lets go of the
        lock, and the next run ends it (`starter_gone`). On this machine only."""
        if request.computer in self.context.config.remotes:
            return bad_argument("a warm worker is started on this machine only")
        prepared = self._prepare(request)
        if isinstance(prepared, Error):
            return prepared
        session, profile, binary, _, workdir = prepared
        lock = ExitStack()
        lock.enter_context(fs.holding(start_lock(self.context.store.path, session.id)))
        with ExitStack() as unless_warm:  # the lock goes unless a Warm holds it
            unless_warm.push(lock)
            opened = self._hold_and_open(session, profile, binary, None, workdir, request.thinking_mode)
            if isinstance(opened, Error):
                return opened
            try:  # looked at less often than a start someone waits on: its step is still at work
                screen = self._wait_for_prompt(opened, profile, pause=AHEAD_POLL)
            except TmuxError as error:
                screen = Error(ErrorCode.TMUX_FAILED, str(error))
            except BaseException:
                self.context.tmux.kill_session(opened.tmux_session)  # a Ctrl-C leaves no worker behind
                raise
            if isinstance(screen, Error):
                return self._fail(opened, screen)
            unless_warm.pop_all()
            return Warm(opened, profile, lock, request)

    def deliver_warm(self, warm: Warm) -> Started | Error:
        """Type the warm worker's command: no `prompt_stable` wait (it has stood at its prompt since `warm`),
        only its prompt looked at again (a dialog or its exit is reported as at a start). Its start lock
        goes once the command is typed."""
        with warm.lock:
            return self._deliver(warm.session, warm.profile, stable=0.0)

    def drop_warm(self, warm: Warm) -> None:
        """End a warm worker that was not needed (its session CANCELLED), and let go of its start lock."""
        with warm.lock:
            self.end(warm.session.id)

    def _prepare(
        self, request: StartRequest
    ) -> tuple[Session, AgentProfile, str, Computer | None, Path] | Error:
        """The checked request as a PENDING session not yet stored, with what starting it needs."""
        config = self.context.config
        config.check_trusted()  # nothing is started while the project file's settings for that are untrusted
        problem = self._check_request(request)
        if problem:
            return problem
        computer, agent, subfolder = request.computer, request.agent, request.subfolder
        workdir = _workdir(request.project, subfolder)
        if isinstance(workdir, Error):
            return workdir
        profile = config.profiles[agent]
        remote = config.remotes.get(computer)
        binary = remote.agents.get(agent) if remote else _find_binary(profile, self.context.env)
        if binary is None:
            return _not_installed(profile, remote)
        tmux = self.context.tmux.on(computer)
        now = self.context.clock()
        session_id = secrets.token_hex(4)
        session = Session(
            id=session_id,
            agent=agent,
            command=request.command,
            args=request.args,
            project=str(Path(request.project).resolve()),
            subfolder=subfolder or None,
            state=SessionState.PENDING,
            created_at=now,
            updated_at=now,
            computer=computer,
            tmux_session=qualify(tmux, f"tc-{session_id}"),
            key=secrets.token_hex(16),
            run_id=self.context.run_id,
            parent=request.parent if config.parent_digests else "",
            parent_agent=request.parent_agent,
            conversation=request.conversation if request.resumed_from else "",
            resumed_from=request.resumed_from,
            handed_over_from=request.handed_over_from,
        )
        if remote and item_slug(subfolder) is None:
            return _not_an_item_worktree(remote, subfolder)
        self.context.store.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return session, profile, binary, remote, workdir

    def _hold_and_open(
        self,
        session: Session,
        profile: AgentProfile,
        binary: str,
        remote: Computer | None,
        workdir: Path,
        thinking_mode: str,
    ) -> Session | Error:
        """The session stored (it holds its step) and its worker's tmux session opened; called holding the
        session's start lock."""
        with step_lock(session.project):  # one live session per step, one finalize at a time
            holder = step_holder(session, self.context.store.sessions())
            if holder is not None:
                return holder
            self.context.store.add(session)  # the PENDING row holds the step from here on
        # Outside the lock: a push over ssh can take seconds, and every planner call waits on that lock.
        opened = self._open(session, profile, binary, remote, workdir, thinking_mode)
        if isinstance(opened, Error):
            self.context.change(session, Change.ERRORED, opened.message, error=opened.message)
        return opened

    def _open(
        self,
        session: Session,
        profile: AgentProfile,
        binary: str,
        remote: Computer | None,
        workdir: Path,
        thinking_mode: str,
    ) -> Session | Error:
        """The worker's tmux session, in its folder here or in the remote clone the item branch went to."""
        config = self.context.config
        tmux = self.context.tmux.on(session.computer)
        try:
            folder = self._send(remote, session) if remote else str(workdir)
            root = remote.project if remote else session.project
            trust = profile.trust_flags((root, folder)) if profile.trust_flags else ()
            argv = profile.argv(binary, thinking_mode, trust)
            if session.resumed_from:  # checked by continuing.py; a form not the CLI's was refused there
                argv = profile.resume_argv(binary, thinking_mode, session.conversation, trust) or argv
            env = self._worker_env(session, profile, remote)
            if not remote:
                boxed = self._sandboxed(session, profile, binary, workdir, argv, env)
                if isinstance(boxed, Error):
                    return boxed
                argv, env = boxed
            started = tmux.start(
                f"tc-{session.id}",
                folder,
                argv,
                env,
                exit_channel(session.id),
                config.history_limit,
                (config.width, config.height),
            )
        except Unreachable as error:
            return Error(error.code, error.explain())
        except RemoteError as error:
            return Error(ErrorCode.TMUX_FAILED, f"{error}\nCheck that `ssh {remote and remote.host}` works.")
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, f"{error}\nIs tmux installed and working? Try: tmux -V")
        tmux.watch(f"tc-{session.id}", started.pane_id)  # its output as events, when the caller follows
        opened = replace(session, pane_id=qualify(tmux, started.pane_id), pane_pid=started.pane_pid)
        return self.context.store.save(opened, expect=SessionState.PENDING) or opened

    def _check_request(self, request: StartRequest) -> Error | None:
        config = self.context.config
        computer, command, args, agent, thinking_mode = (
            request.computer,
            request.command,
            request.args,
            request.agent,
            request.thinking_mode,
        )
        if computer not in config.computers and computer not in config.remotes:
            known = ", ".join([*config.computers, *config.remotes])
            return Error(
                ErrorCode.UNKNOWN_COMPUTER,
                f"{computer!r} is not a computer this runtime knows ({known}).\n"
                'Use computer="local", name this machine in teleclaude.toml ([runtime] computers = [...]), '
                "or describe the other one there: [computers.NAME].",
            )
        if agent not in config.profiles:
            known = ", ".join(config.profiles)
            return Error(
                ErrorCode.UNKNOWN_AGENT, f"{agent!r} is not an agent the runtime can start ({known})."
            )
        if thinking_mode not in THINKING_MODES:
            return bad_argument(
                f"thinking_mode must be one of {', '.join(THINKING_MODES)}, not {thinking_mode!r}"
            )
        if not _COMMAND.fullmatch(command):
            return bad_argument(f"{command!r} is not a command name such as next-build")
        if len(args) > 500:
            return bad_argument("args must be one short line (the slug)")
        return refused_text("args", args) or refused_text("told", request.told)

    def _worker_env(
        self, session: Session, profile: AgentProfile, remote: Computer | None = None
    ) -> dict[str, str]:
        """PATH and HOME of the runtime, `[runtime.agents.NAME] env`, and the session's own variables.

        A remote worker gets neither this machine's PATH and HOME nor its database (PATH: adapters/ssh.py).
        """
        names = () if remote else ("PATH", "HOME")
        env = {name: self.context.env[name] for name in names if self.context.env.get(name)}
        if not remote and "PATH" in env:
            env["PATH"] = _with_teleclaude(env["PATH"])
        if not remote:
            env.update(
                identity_config(gitx.identity(Path(session.project), env.get("HOME")), self.context.env)
            )
        env.update(profile.env)
        env["TELECLAUDE_SESSION_ID"] = session.id
        env[SESSION_KEY] = session.key
        if remote:  # its stop hook cannot reach this database: it marks its pane for the observer instead
            env[TURN_END_TO_PANE] = "1"
        else:
            env["TELECLAUDE_DB"] = str(self.context.store.path)
        return env

    def _sandboxed(
        self,
        session: Session,
        profile: AgentProfile,
        binary: str,
        workdir: Path,
        argv: list[str],
        env: dict[str, str],
    ) -> tuple[list[str], dict[str, str]] | Error:
        """The worker's command inside bubblewrap (`[runtime] sandbox`), its hooks told to write into the
        session's own channel folder instead of the sessions database; as it is when the sandbox is off, or
        under "auto" where bubblewrap does not work (the run says so once: `sandbox_status`)."""
        config = self.context.config
        if config.sandbox is SandboxMode.OFF:
            return argv, env
        found = sandbox.probe(self.context.env)
        if not found.usable:
            if config.sandbox is SandboxMode.AUTO:
                return argv, env
            return Error(
                ErrorCode.SANDBOX_UNAVAILABLE,
                f'{found.problem}, and [runtime] sandbox = "bwrap" starts no worker outside one.\n'
                + sandbox.FIX,
            )
        channel = sandbox.open_channel(self.context.store.path, session.id)
        sandbox.write_step(channel, session.command, session.args)
        box = sandbox.worker_layout(
            workdir=workdir,
            project=Path(session.project),
            home=env.get("HOME", ""),
            needs=profile.sandbox,
            binary=binary,
            path=env.get("PATH", ""),
            channel=channel,
            tmux_folder=_tmux_folder(self.context.tmux.socket, self.context.env),
            merges=step_of(session.command) is Step.FINALIZE,
            network=config.sandbox_network,
            env=self.context.env,
        )
        inside = {name: value for name, value in env.items() if name != "TELECLAUDE_DB"}
        inside.update({TURN_END_TO_PANE: "1", sandbox.CHANNEL: str(channel)})
        prefix = bwrap_argv(found.bwrap, box, [])  # its post-report cycle runs wait_cmd in the same sandbox
        sandbox.write_box(self.context.store.path, session.id, prefix)
        return [*prefix, *argv], inside

    def _send(self, remote: Computer, session: Session) -> str:
        """The item branch goes to the remote clone first: the worker there works in its trees/{slug}."""
        slug = item_slug(session.subfolder)
        assert slug is not None, "checked by start"
        send(remote, Path(session.project), slug, self.context.config.ssh_timeout)
        return f"{remote.project}/{layout.TREES}/{slug}"

    def _deliver(
        self, session: Session, profile: AgentProfile, stable: float | None = None, told: str = ""
    ) -> Started | Error:
        """Wait for the CLI's prompt, paste the command (or `told`, a resumed worker's one line), settle,
        press Enter, and check the screen moved."""
        text = told or profile.slash_command(session.command, session.args)
        try:
            screen = self._wait_for_prompt(session, profile, stable)
            if isinstance(screen, Error):
                return self._fail(session, screen)
            sent_at = self.context.clock()  # before typing: a turn that fails at once is still this one
            # a resumed worker's line is no command of the CLI's: nothing of its command to confirm
            confirm = profile.command_confirm and not told
            expansion = _expansion(session.command, session.args) if confirm else ()
            start: tuple[Cursor, tuple[str, ...]] = Cursor.start(session.pane_id, session.pane_pid), ()
            if session.resumed_from:  # the conversation its CLI replayed is not the new turn's output
                view, rows = self.context.tmux.glance(session.pane_id)
                start = past_replay(view, rows, profile.prompt) if view is not None else start
            for _ in range(COMMAND_ATTEMPTS):
                shown = shown_as_message(self._screen(session), text.strip())
                self._type_command(session, profile, text)
                entered = self.panes.press_enter(session, typed=text.strip())
                # a loaded CLI may redraw so late that the line seems not to move, yet shows it sent
                if not entered and expansion:
                    entered = command_taken(self._screen(session), text.strip(), expansion, shown) is not None
                if not entered:
                    refused = self._refused(session)
                    if refused is not None:
                        return self._fail(session, refused)
                    return self._fail(
                        session,
                        _delivery_failed(
                            session, text, "the screen did not change after Enter", self._screen(session)
                        ),
                    )
                if not expansion or self._expanded(session, text.strip(), expansion, shown):
                    break
                # sent to the model as typed: interrupted (its turn on a bare command line is no step), the
                # line typed again once the prompt is back
                log.warning(
                    "session %s: %s took %r as plain text; typing it again", session.id, session.agent, text
                )
                sent_at = self.context.clock()
                screen = self._interrupted(session, profile)
                if isinstance(screen, Error):
                    return self._fail(session, screen)
            else:
                return self._fail(
                    session,
                    _delivery_failed(
                        session,
                        text,
                        f"it took the line as plain text {COMMAND_ATTEMPTS} times, never as its command",
                        self._screen(session),
                    ),
                )
        except TmuxError as error:
            return self._fail(session, Error(ErrorCode.TMUX_FAILED, str(error)))

        def delivered(stored: Session, now: datetime) -> tuple[Session, tuple[Event, ...]]:
            running, events = transition(stored, Change.DELIVERED, now)
            running = replace(
                running,
                delivered_at=sent_at,
                scan_cursor=start[0].encode(),
                seen_rows=start[1],
                screen_hash="",  # so the first look after delivery counts as a change
                last_change_at=sent_at,
                last_progress_at=now,
            )
            return running, events

        return Started(self._save_typed(session, sent_at, delivered))

    def _type_command(self, session: Session, profile: AgentProfile, text: str) -> None:
        """Type the command line; with the profile's `command_listed`, the command's name first and the rest
        once the CLI lists the command (it knows it), or after `command_wait` (with `command_retype`, after
        `startup_timeout`: `_until_listed`): an unknown command then gets the CLI's own answer, as without
        the rule."""
        tmux, pane = self.context.tmux, session.pane_id
        name = profile.command_name(session.command)
        head = f"{profile.command_sign}{name}"
        if not profile.command_listed or not text.startswith(head):
            tmux.send_text(pane, text)
            return
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
            return
        self.panes.until_screen(session, listed, self.context.config.command_wait, pause=0.05)
        if text[len(head) :]:
            tmux.send_text(pane, text[len(head) :])
            # the arguments typed: Enter while the CLI still lists the command (gemini under load, its list
            # behind its input) takes the listed name in place of the last word, and sends nothing
            self.panes.until_screen(session, lambda rows: not listed(rows), self.context.config.command_wait)

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
        return self._wait_for_prompt(session, profile)

    def _wait_for_prompt(
        self, session: Session, profile: AgentProfile, stable: float | None = None, pause: float = PROMPT_POLL
    ) -> list[str] | Error:
        """The screen once the CLI's prompt has stayed on an unchanged screen for `stable` seconds (by
        default its `prompt_stable`): a CLI may paint its prompt and then replace it by a dialog (codex's
        hooks review ~0.7 s later), and whatever is typed into a dialog answers it. A dialog, a refusal or
        an early exit is reported at once (with the CLI's own last output), never waited out, never typed
        into."""
        config, tmux = self.context.config, self.context.tmux
        deadline = time.monotonic() + config.startup_timeout
        stable_since, last = None, None
        stable = config.prompt_stable_of(session.agent) if stable is None else stable
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
            if not waiting_for_input(screen, profile.prompt, profile.busy):
                stable_since = None
            elif screen != last or stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= stable:
                return screen
            last = screen
            if time.monotonic() > deadline:
                denied = self._denied(session, screen)
                if denied is not None:  # stuck on a path its sandbox hides, not silent
                    output = "\n".join(row.rstrip() for row in last_rows(screen))
                    return Error(ErrorCode.WORKER_BLOCKED, sandbox_blocked(session.agent, denied, output))
                return _delivery_failed(session, "", f"no prompt after {config.startup_timeout:g}s", screen)
            # the next look when the pane prints, or when the prompt has stood unchanged for `stable` (a pane
            # that died prints nothing: looked at every 0.25 s); without events every `pause`, and a prompt
            # that stands every quarter of its `stable`, not more often than `pause` nor less often than
            # every 0.25 s (a change seen later only waits longer)
            quiet = stable_since + stable - time.monotonic() if stable_since is not None else 0.25
            poll = pause if stable_since is None else max(pause, stable / 4)
            tmux.await_output(session.pane_id, mark, max(0.0, min(quiet, 0.25)), poll=poll)

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
        blocker = find_blocker(session.agent, rows, exited=True)
        if blocker is not None:
            return Error(
                ErrorCode.WORKER_BLOCKED, blocked_text(session.agent, blocker, session.workdir, rows)
            )
        status = f" (exit status {view.dead_status})" if view and view.dead_status is not None else ""
        output = "\n".join(row.rstrip() for row in last_rows(rows)) or "(nothing)"
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

    # --- typing and ending ---------------------------------------------------------------------------------

    def send(self, session_id: str, text: str, interrupt: bool = False) -> Session | Error:
        session = self.context.store.get(session_id)
        if session is None:
            return unknown_session(session_id)
        if session.state.is_final:
            return bad_argument(f"session {session_id} is {session.state.value}: start a new one instead")
        if not text.strip() or "\n" in text.strip():
            return bad_argument("text must be one non-empty line")
        sent_at = self.context.clock()
        try:
            view, screen = self.panes.type_line(session, text.strip(), interrupt)
        except (WorkerBlocked, NotSent, Untypable) as error:
            return Error(error.code, str(error))
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))

        def typed(stored: Session, now: datetime) -> tuple[Session, tuple[Event, ...]]:
            working, events = resumed(stored, now)
            if view is not None and view.alternate:
                # the alternate screen's rows before the message are not the new turn's output (an old limit
                # row still shown must not limit it), whether an observer read them or not
                working = replace(working, seen_rows=seen_of(screen))
            return working, events

        return self._save_typed(session, sent_at, typed)

    def _save_typed(
        self,
        session: Session,
        sent_at: datetime,
        change: Callable[[Session, datetime], tuple[Session, tuple[Event, ...]]],
    ) -> Session:
        """Save `change` (the session works: its line was taken) on the stored row, read again while other
        writers save first without changing its state. A stop hook that ran since `sent_at` found the session
        not working (`stopped_at`): the line's turn is over already, and ends here. A state another writer
        saved (the observer's limit, exit, a hook's turn end) stands."""
        for _ in range(SAVE_ATTEMPTS):
            stored = self.context.store.get(session.id)
            if stored is None or stored.state is not session.state:
                return stored or session
            now = self.context.clock()
            working, events = change(stored, now)
            if stored.stopped_at is not None and stored.stopped_at >= sent_at:
                self.context.before_turn_end(working)
                working, ended = transition(working, Change.TURN_ENDED, now, "stop hook")
                events = (*events, *ended)
            saved = self.context.store.save(working, expect=stored.state, events=events)
            if saved is not None:
                return saved
        return self.context.store.get(session.id) or session

    def end(self, session_id: str) -> Ended | Error:
        session = self.context.store.get(session_id)
        if session is None:
            return unknown_session(session_id)
        from teleclaude.runtime import spend  # (the stop hook's runtime goes without it)

        spend.read_again(self.context, session)  # its last answer may be on record only now
        try:
            self.context.tmux.kill_session(session.tmux_session)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        sandbox.close_channel(self.context.store.path, session.id)
        if session.state.is_final:
            return Ended(session)
        cancelled = "its post-report cycle was cancelled" if session.cycle_started_at else ""
        ended, events = transition(session, Change.ENDED, self.context.clock(), cancelled)
        # its parent ended it: no more digests; a cycle still running finds it ended and concludes nothing
        ended = replace(ended, parent_pending="", parent_told=True, cycle_started_at=None)
        return Ended(self.context.store.save(ended, events=events) or ended)


# --- one worker per step ------------------------------------------------------------------------------------


@contextmanager
def step_lock(project: str) -> Iterator[None]:
    """The planner's project lock (git common dir), so a check and the start it allows are one step; a
    project outside git has no planner to race with."""
    try:
        repo = gitx.find_repo(project)
    except (gitx.NotAGitRepo, OSError):
        yield
        return
    with fs.project_lock(repo.common_dir):
        yield


def step_holder(session: Session, sessions: list[Session]) -> Error | None:
    """Refuse a start of a planner step while a live session of the project holds it (same command, slug).
    Finalizes of different items may run at once: `teleclaude finalize` merges under the project lock."""
    step = step_of(session.command)
    if step is None:  # not a step of the planner (a user's own command): no step to hold
        return None
    command = step.command
    for other in sessions:
        if other.state.is_final or other.project != session.project or other.id == session.id:
            continue
        if bare_command(other.command) == command and other.slug == session.slug:
            return Error(
                ErrorCode.ALREADY_RUNNING,
                f"session {other.id} ({other.agent}, {other.state.value}) is already doing {command} "
                f"{session.slug or '(no slug)'} in this project.\nWait for it instead of starting a second "
                "worker for the same step.",
                session.slug or None,
                call("wait_for_sessions", session_ids=(other.id,)),
            )
    return None


def resume_refused(profile: AgentProfile, rows: list[str]) -> str | None:
    """The row in which the CLI says it cannot resume the conversation (missing, in use, a picker shown
    instead): the profile's `resume.refused`."""
    patterns = profile.resume.refused if profile.resume else ()
    return next((row.strip() for row in rows if any(re.search(p, row) for p in patterns)), None)


def _not_an_item_worktree(remote: Computer, subfolder: str | None) -> Error:
    return Error(
        ErrorCode.INVALID_SUBFOLDER,
        f"a worker on {remote.name} works in an item's worktree: subfolder must be trees/{{slug}}, "
        f'not {subfolder!r}.\nRun steps on the main checkout with computer="local".',
    )


def start_lock(store: Path, session_id: str) -> Path:
    """The file a session's starter holds while it starts the worker (beside the sessions database)."""
    return Path(f"{store}.start-{session_id}")


def starter_gone(store: Path, session: Session) -> bool:
    """A PENDING session whose starter died before the worker had its command (its lock is free)."""
    lock = start_lock(store, session.id)
    if session.state is not SessionState.PENDING or fs.held(lock) is not False:
        return False
    lock.unlink(missing_ok=True)  # left by the starter that died
    return True


def exit_channel(session_id: str) -> str:
    """The tmux wait-for channel a worker's pane signals when its CLI exits."""
    return f"tc-exit-{session_id}"


def _expansion(command: str, args: str) -> tuple[str, ...]:
    """Lines of the role command's text as the CLI expands it (`$ARGUMENTS` replaced), each short enough to
    show whole in one row; none for a command teleclaude does not ship."""
    try:
        markdown = assets.read_text("commands", f"{command}.md")
    except OSError:
        return ()
    lines = (
        line.replace("$ARGUMENTS", args).strip() for line in split_front_matter(markdown)[1].splitlines()
    )
    return tuple(line for line in lines if 24 <= len(line) <= 100)


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
            f"{target} does not exist.\nAsk for the next step again: next_work creates the worktree first.",
            next_step=call("next_work"),
        )
    return target


def _tmux_folder(socket: str, env: Mapping[str, str]) -> str:
    """The folder of the workers' tmux socket: hidden from a sandboxed worker."""
    if "/" in socket:
        return str(Path(socket).parent)
    return f"{env.get('TMUX_TMPDIR') or '/tmp'}/tmux-{os.getuid()}"


def _with_teleclaude(path: str) -> str:
    """PATH with this teleclaude's folder at its end when `teleclaude` is not on it: role commands run it by
    name (the finalizer's `teleclaude finalize`), also when the runtime was started from a venv's bin."""
    folder = Path(sys.executable).parent
    if shutil.which("teleclaude", path=path) or not os.access(folder / "teleclaude", os.X_OK):
        return path
    return f"{path}{os.pathsep}{folder}" if path else str(folder)


def identity_config(identity: Sequence[tuple[str, str]], env: Mapping[str, str]) -> dict[str, str]:
    """The user's git identity as configuration in the environment (`GIT_CONFIG_COUNT`, `_KEY_n`,
    `_VALUE_n`, after any `env` has), which git reads over every config file: a CLI whose shell tool hides
    the user's ~/.gitconfig (gemini 0.61 runs its commands with GIT_CONFIG_GLOBAL=/dev/null, and drops
    GIT_AUTHOR_* as secrets) still commits as the user."""
    if not identity:
        return {}
    given = env.get("GIT_CONFIG_COUNT", "0")
    start = int(given) if given.isdigit() else 0
    config = {"GIT_CONFIG_COUNT": str(start + len(identity))}
    for index, (key, value) in enumerate(identity, start):
        config[f"GIT_CONFIG_KEY_{index}"] = key
        config[f"GIT_CONFIG_VALUE_{index}"] = value
    return config


EXIT_OUTPUT_WAIT = 2.0  # seconds an exited CLI with nothing on its screen is looked at for its last output


def _find_binary(profile: AgentProfile, env: Mapping[str, str]) -> str | None:
    for name in profile.binaries:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return found
    return None


def _not_installed(profile: AgentProfile, remote: Computer | None) -> Error:
    agent = profile.name
    if remote:
        return Error(
            ErrorCode.AGENT_NOT_INSTALLED,
            f"{agent} is not among the agents of computer {remote.name}.\n"
            f'Add it in teleclaude.toml: [computers.{remote.name}] agents = {{{agent} = "{agent}"}}.',
        )
    names = " or ".join(profile.binaries)
    return Error(
        ErrorCode.AGENT_NOT_INSTALLED,
        f"{names} is not on PATH.\nInstall the {agent} CLI, set [runtime.agents.{agent}] binary in "
        "teleclaude.toml, or mark it unavailable.",
        next_step=call("mark_agent_unavailable", agent=agent),
    )


def _delivery_failed(session: Session, text: str, why: str, screen: list[str] | None = None) -> Error:
    last = "\n".join(row for row in (screen or []) if row.strip())[-800:]
    what = f"could not deliver {text!r}" if text else "could not start the worker"
    return Error(
        ErrorCode.TMUX_FAILED,
        f"{session.agent}: {what}: {why}.\n"
        + (f"Last screen:\n{last}\n" if last else "")
        + f"Run the agent by hand in {session.workdir} to see what it needs (a login, a trust prompt), or "
        "mark it unavailable.",
        next_step=call("mark_agent_unavailable", agent=session.agent),
    )
