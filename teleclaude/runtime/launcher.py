"""Starting a worker (an agent CLI in a tmux session, its command typed in), typing into it, and ending it."""

from __future__ import annotations

import re
import secrets
import shutil
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from teleclaude.adapters.tmux import TmuxError
from teleclaude.config.matrix import THINKING_MODES
from teleclaude.config.profiles import AgentProfile
from teleclaude.errors import Error, ErrorCode
from teleclaude.runtime.context import Context, bad_argument, unknown_session
from teleclaude.runtime.core.dialogs import blocked_message, find_dialog, rejected_command
from teleclaude.runtime.core.sessions import (
    Change,
    Cursor,
    Ended,
    Session,
    SessionState,
    Started,
    prompt_visible,
    transition,
)
from teleclaude.runtime.core.supervision import resumed
from teleclaude.runtime.panes import Panes

_COMMAND = re.compile(r"[a-z0-9][a-z0-9:._-]{0,80}")


class Launcher:
    def __init__(self, context: Context, panes: Panes) -> None:
        self.context = context
        self.panes = panes

    # --- starting ------------------------------------------------------------------------------------------

    def start(
        self,
        computer: str,
        command: str,
        args: str,
        project: str,
        agent: str,
        thinking_mode: str,
        subfolder: str | None = None,
    ) -> Started | Error:
        config = self.context.config
        problem = self._check_request(computer, command, args, agent, thinking_mode)
        if problem:
            return problem
        workdir = _workdir(project, subfolder)
        if isinstance(workdir, Error):
            return workdir
        profile = config.profiles[agent]
        binary = _find_binary(profile, self.context.env)
        if binary is None:
            names = " or ".join(profile.binaries)
            return Error(
                ErrorCode.AGENT_NOT_INSTALLED,
                f"{names} is not on PATH.\nInstall the {agent} CLI, set [runtime.agents.{agent}] binary in "
                "teleclaude.toml, or mark it unavailable: "
                f"teleclaude__mark_agent_unavailable(agent={agent!r}).",
            )
        now = self.context.clock()
        session_id = secrets.token_hex(4)
        session = Session(
            id=session_id,
            agent=agent,
            command=command,
            args=args,
            project=str(Path(project).resolve()),
            subfolder=subfolder or None,
            state=SessionState.PENDING,
            created_at=now,
            updated_at=now,
            computer=computer,
            tmux_session=f"tc-{session_id}",
        )
        try:
            started = self.context.tmux.start(
                session.tmux_session,
                str(workdir),
                profile.argv(binary, thinking_mode, (session.project, str(workdir))),
                self._worker_env(session, profile),
                exit_channel(session.id),
                config.history_limit,
                (config.width, config.height),
            )
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, f"{error}\nIs tmux installed and working? Try: tmux -V")
        session = replace(session, pane_id=started.pane_id, pane_pid=started.pane_pid)
        self.context.store.add(session)
        return self._deliver(session, profile)

    def _check_request(
        self, computer: str, command: str, args: str, agent: str, thinking_mode: str
    ) -> Error | None:
        config = self.context.config
        if computer not in config.computers:
            known = ", ".join(config.computers)
            return Error(
                ErrorCode.UNKNOWN_COMPUTER,
                f"{computer!r} is not a computer this runtime knows ({known}).\n"
                'Use computer="local", or name this machine in teleclaude.toml: [runtime] computers = [...].',
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
        if any(ord(char) < 32 for char in args) or len(args) > 500:
            return bad_argument("args must be one short line (the slug), without control characters")
        return None

    def _worker_env(self, session: Session, profile: AgentProfile) -> dict[str, str]:
        env = {"TELECLAUDE_SESSION_ID": session.id, "TELECLAUDE_DB": str(self.context.store.path)}
        env.update(profile.trust_env)  # gemini: GEMINI_CLI_TRUST_WORKSPACE, or no hooks, MCP or --yolo
        for name in ("PATH", "HOME"):
            if self.context.env.get(name):
                env[name] = self.context.env[name]
        return env

    def _deliver(self, session: Session, profile: AgentProfile) -> Started | Error:
        """Wait for the CLI's prompt, paste the command, settle, press Enter, and check the screen moved."""
        tmux = self.context.tmux
        text = profile.slash_command(session.command, session.args)
        try:
            screen = self._wait_for_prompt(session, profile)
            if isinstance(screen, Error):
                return self._fail(session, screen)
            tmux.send_text(session.pane_id, text)
            time.sleep(self.context.config.settle)
            if not self.panes.press_enter(session, typed=text):
                refused = self._refused(session, profile)
                if refused is not None:
                    return self._fail(session, refused)
                return self._fail(
                    session, _delivery_failed(session, text, "the screen did not change after Enter")
                )
        except TmuxError as error:
            return self._fail(session, Error(ErrorCode.TMUX_FAILED, str(error)))
        view = tmux.views()[session.pane_id]
        now = self.context.clock()
        running, _ = transition(session, Change.DELIVERED, now)
        running = replace(
            running,
            delivered_at=now,
            scan_cursor=Cursor.start(view).encode(),
            screen_hash="",  # so the first look after delivery counts as a change
            last_change_at=now,
            last_progress_at=now,
        )
        return Started(self.context.store.save(running, expect=SessionState.PENDING) or running)

    def _wait_for_prompt(self, session: Session, profile: AgentProfile) -> list[str] | Error:
        """The prompt, once it has stayed on an unchanged screen for `prompt_stable` seconds: a CLI may paint
        its prompt and then replace it by a dialog (codex ~0.8 s, gemini ~0.25 s before "Trust this
        folder?"), and whatever is typed into a dialog answers it. A dialog is reported, never typed into."""
        config, tmux = self.context.config, self.context.tmux
        deadline = time.monotonic() + config.startup_timeout
        stable_since, last = None, None
        while True:
            view = tmux.views().get(session.pane_id)
            if view is None or view.dead:
                screen = tmux.screen(session.pane_id, view) if view else []
                return _delivery_failed(session, "", "the CLI exited before showing its prompt", screen)
            screen = tmux.screen(session.pane_id, view)
            dialog = find_dialog(screen, profile.dialogs)
            if dialog is not None:
                return Error(ErrorCode.WORKER_BLOCKED, blocked_message(session.agent, dialog, screen))
            if not prompt_visible(screen, profile.prompt):
                stable_since = None
            elif screen != last or stable_since is None:
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= config.prompt_stable:
                return screen
            last = screen
            if time.monotonic() > deadline:
                return _delivery_failed(session, "", f"no prompt after {config.startup_timeout:g}s", screen)
            time.sleep(0.05)

    def _refused(self, session: Session, profile: AgentProfile) -> Error | None:
        """The CLI answered the command with its "unknown command" (codex keeps the text in its input box)."""
        view = self.context.tmux.views().get(session.pane_id)
        screen = self.context.tmux.screen(session.pane_id, view) if view else []
        refusal = rejected_command(screen, profile.rejected)
        if refusal is None:
            return None
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"{session.agent} refused the command: {refusal}\nNothing reached the model. Install the role "
            f"commands (teleclaude install --{session.agent}), or check [runtime.agents.{session.agent}].",
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
        try:
            self.panes.type_line(session, text.strip(), interrupt)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        # refused only if an observer saved meanwhile; the worker's new output tells the next look anyway
        typed, _ = resumed(session, self.context.clock())
        return self.context.store.save(typed, expect=session.state) or typed

    def end(self, session_id: str) -> Ended | Error:
        session = self.context.store.get(session_id)
        if session is None:
            return unknown_session(session_id)
        try:
            self.context.tmux.kill_session(session.tmux_session)
        except TmuxError as error:
            return Error(ErrorCode.TMUX_FAILED, str(error))
        if session.state.is_final:
            return Ended(session)
        ended, _ = transition(session, Change.ENDED, self.context.clock())
        return Ended(self.context.store.save(ended) or ended)


def exit_channel(session_id: str) -> str:
    """The tmux wait-for channel a worker's pane signals when its CLI exits."""
    return f"tc-exit-{session_id}"


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


def _find_binary(profile: AgentProfile, env: Mapping[str, str]) -> str | None:
    for name in profile.binaries:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return found
    return None


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
