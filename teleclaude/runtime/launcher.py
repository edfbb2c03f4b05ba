"""Starting a worker (an agent CLI in a tmux session, its command typed in), typing into it, and ending it."""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from teleclaude.adapters import fs, sandbox
from teleclaude.adapters import git as gitx
from teleclaude.adapters.ssh import RemoteError, Unreachable, qualify
from teleclaude.adapters.tmux import TURN_END_TO_PANE, TmuxError
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.matrix import THINKING_MODES
from teleclaude.config.profiles import Computer, SandboxMode
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import Step
from teleclaude.runtime import trace
from teleclaude.runtime.context import Context, bad_argument, refused_text, unknown_session
from teleclaude.runtime.core.continuation import past_replay
from teleclaude.runtime.core.marks import SESSION_KEY, exit_channel
from teleclaude.runtime.core.sandbox import Boxing, boxing, bwrap_argv
from teleclaude.runtime.core.screens import command_taken, shown_as_message
from teleclaude.runtime.core.sessions import (
    Change,
    Cursor,
    Ended,
    Event,
    Session,
    SessionState,
    Started,
    StartRequest,
    seen_of,
    transition,
)
from teleclaude.runtime.core.supervision import resumed, step_of
from teleclaude.runtime.panes import NotSent, Panes, Untypable, WorkerBlocked
from teleclaude.runtime.prompt_wait import PromptWait
from teleclaude.runtime.remote import item_slug, send
from teleclaude.runtime.remote_box import sandboxed_there
from teleclaude.runtime.worker_setup import (
    command_expansion,
    delivery_failed,
    find_binary,
    identity_config,
    not_an_item_worktree,
    not_installed,
    resolve_workdir,
    start_lock,
    step_holder,
    step_lock,
    tmux_folder,
    with_teleclaude,
)

log = logging.getLogger("teleclaude.runtime")
_COMMAND = re.compile(r"[a-z0-9][a-z0-9:._-]{0,80}")
SAVE_ATTEMPTS = 20  # saves of a typed line refused by other writers of the row before giving up
# seconds between looks at a worker started ahead of its step while its prompt is awaited, without output
# events (each look is a tmux client: ~2.5 ms of CPU), growing up to AHEAD_LONGEST: its step is still at work
AHEAD_POLL = 0.25
AHEAD_LONGEST = 1.0
COMMAND_ATTEMPTS = 3  # a command line the CLI took as plain text is typed again, at most this often in all


@dataclass(frozen=True)
class Warm:
    """A worker at its prompt, its command not typed (`Launcher.warm`): its PENDING session, and the start
    lock it holds until it is delivered or dropped."""

    session: Session
    profile: AgentProfile
    lock: ExitStack
    request: StartRequest | None = None  # what it was started for


class Launcher(PromptWait):
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
            trace.mark("opened", session.id)
            return opened if isinstance(opened, Error) else self._deliver(opened, profile, told=request.told)

    def warm(self, request: StartRequest) -> Warm | Error:
        """A worker started before its step is known (`teleclaude run` starts the agent most likely to take
        the next step while the current one works): started and waited for as `start` does, but left at its
        prompt, its command not typed. Its PENDING session holds the step and its start lock until
        `deliver_warm` types the command or `drop_warm` ends it; a starter killed meanwhile lets go of the
        lock, and the next run ends it (`starter_gone`). On another computer its item's worktree there is
        brought up to the branch here first, as for a start (a step working there leaves it as it is)."""
        prepared = self._prepare(request)
        if isinstance(prepared, Error):
            return prepared
        session, profile, binary, remote, workdir = prepared
        lock = ExitStack()
        lock.enter_context(fs.holding(start_lock(self.context.store.path, session.id)))
        with ExitStack() as unless_warm:  # the lock goes unless a Warm holds it
            unless_warm.push(lock)
            opened = self._hold_and_open(session, profile, binary, remote, workdir, request.thinking_mode)
            if isinstance(opened, Error):
                return opened
            try:  # looked at less often than a start someone waits on: its step is still at work
                screen = self._wait_for_prompt(
                    opened, profile, pause=AHEAD_POLL, longest=AHEAD_LONGEST, first=AHEAD_POLL
                )
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
        workdir = resolve_workdir(request.project, subfolder)
        if isinstance(workdir, Error):
            return workdir
        profile = config.profiles[agent]
        remote = config.remotes.get(computer)
        binary = remote.agents.get(agent) if remote else find_binary(profile, self.context.env)
        if binary is None:
            return not_installed(profile, remote)
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
            return not_an_item_worktree(remote, subfolder)
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
            if remote:
                slug = item_slug(session.subfolder) or ""
                boxed = sandboxed_there(config, remote, session.id, slug, profile, argv, env)
            else:
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
        except (Unreachable, gitx.WorktreeError) as error:  # the latter: a worktree's HEAD a worker changed
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
            env["PATH"] = with_teleclaude(env["PATH"])
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
        if config.sandbox is SandboxMode.OFF:  # nothing to probe
            return argv, env
        found = sandbox.probe(self.context.env)
        chosen = boxing(config.sandbox, found.usable)
        if chosen is Boxing.REFUSED:
            return Error(
                ErrorCode.SANDBOX_UNAVAILABLE,
                f'{found.problem}, and [runtime] sandbox = "bwrap" starts no worker outside one.\n'
                + sandbox.FIX,
            )
        if chosen is not Boxing.INSIDE:
            return argv, env
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
            tmux_folder=tmux_folder(self.context.tmux.socket, self.context.env),
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
            trace.mark("deliver", session.id)
            screen = self._wait_for_prompt(session, profile, stable)
            if isinstance(screen, Error):
                return self._fail(session, screen)
            trace.mark("prompt", session.id)
            sent_at = self.context.clock()  # before typing: a turn that fails at once is still this one
            # a resumed worker's line is no command of the CLI's: nothing of its command to confirm
            confirm = profile.command_confirm and not told
            expansion = command_expansion(session.command, session.args) if confirm else ()
            start: tuple[Cursor, tuple[str, ...]] = Cursor.start(session.pane_id, session.pane_pid), ()
            if session.resumed_from:  # the conversation its CLI replayed is not the new turn's output
                view, rows = self.context.tmux.glance(session.pane_id)
                resumed = self.context.store.get(session.resumed_from)
                before = resumed.seen_rows if resumed is not None else ()
                start = past_replay(view, rows, profile.prompt, before) if view is not None else start
            for _ in range(COMMAND_ATTEMPTS):
                shown = shown_as_message(screen, text.strip())  # the prompt's screen: a tmux client fewer
                seen = self._type_command(session, profile, text)
                entered = self.panes.press_enter(session, typed=text.strip(), seen=seen)
                # a loaded CLI may redraw so late that the line seems not to move, yet shows it sent
                if not entered and expansion:
                    entered = command_taken(self._screen(session), text.strip(), expansion, shown) is not None
                if not entered:
                    refused = self._refused(session)
                    if refused is not None:
                        return self._fail(session, refused)
                    return self._fail(
                        session,
                        delivery_failed(
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
                    delivery_failed(
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
