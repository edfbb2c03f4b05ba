"""What starting a worker needs around the launcher: its step's locks, its folder, its binary and environment,
the channel its exit signals, and the errors a start reports."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.agents.formats import split_front_matter
from teleclaude.agents.profile import AgentProfile
from teleclaude.config.profiles import Computer
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.core.supervision import bare_command, step_of


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


def not_an_item_worktree(remote: Computer, subfolder: str | None) -> Error:
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


def command_expansion(command: str, args: str) -> tuple[str, ...]:
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


def resolve_workdir(project: str, subfolder: str | None) -> Path | Error:
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


def tmux_folder(socket: str, env: Mapping[str, str]) -> str:
    """The folder of the workers' tmux socket: hidden from a sandboxed worker."""
    if "/" in socket:
        return str(Path(socket).parent)
    return f"{env.get('TMUX_TMPDIR') or '/tmp'}/tmux-{os.getuid()}"


def with_teleclaude(path: str) -> str:
    """PATH with this teleclaude's folder at its end when `teleclaude` is not on it: role commands run it by
    name (the finalizer's `teleclaude finalize`), also when the runtime was started from a venv's bin."""
    folder = Path(sys.executable).parent
    if shutil.which("teleclaude", path=path) or not os.access(folder / "teleclaude", os.X_OK):
        return path
    return f"{path}{os.pathsep}{folder}" if path else str(folder)


def identity_config(identity: Sequence[tuple[str, str]], env: Mapping[str, str]) -> dict[str, str]:
    """The user's git identity as configuration in the environment (`GIT_CONFIG_COUNT`, `_KEY_n`,
    `_VALUE_n`, after any `env` has), which git reads over every config file: a CLI whose shell tool hides
    the user's ~/.gitconfig (one runs its commands with GIT_CONFIG_GLOBAL=/dev/null, and drops GIT_AUTHOR_*
    as secrets) still commits as the user."""
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


def find_binary(profile: AgentProfile, env: Mapping[str, str]) -> str | None:
    for name in profile.binaries:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            return found
    return None


def not_installed(profile: AgentProfile, remote: Computer | None) -> Error:
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


def delivery_failed(session: Session, text: str, why: str, screen: list[str] | None = None) -> Error:
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
