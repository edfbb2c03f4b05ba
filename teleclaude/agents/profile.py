"""What teleclaude knows of one agent CLI: how it is started and spoken to, how its screen reads. One value
per CLI, in this package's driver modules (claude.py, gemini.py, codex.py); the registry is __init__.py.

The defaults run workers unattended (each CLI's "approve everything" flag), because a worker that stops to
ask for permission in a detached tmux pane is a stalled worker. A user overrides any of it per agent in
`teleclaude.toml` under `[runtime.agents.NAME]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum


class Kind(Enum):
    DIALOG = "dialog"  # open on a live screen, waiting for an answer
    EXIT = "exit"  # a refusal printed as the CLI exits
    COMMAND = "command"  # the CLI's answer to a typed command it refuses; nothing reached the model


@dataclass(frozen=True)
class Blocker:
    name: str  # what the user sees on the screen, e.g. "the workspace trust dialog"
    pattern: str  # a regex matching one row of it
    fix: str  # the exact next step; {workdir} is the worker's folder
    rate_limit: bool = False  # the CLI's own rate-limit dialog: the agent is limited, not misconfigured
    kind: Kind = Kind.DIALOG


@dataclass(frozen=True)
class AgentProfile:
    name: str
    binaries: tuple[str, ...]  # tried in order on PATH (gemini: Gemini CLI, else Antigravity's agy)
    args: tuple[str, ...] = ()
    modes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # thinking mode -> extra flags
    # a regex for the CLI's input line while it waits for input: the prompt sign with nothing typed after it
    # (its echo of a sent message, "> /next-build x", must not count)
    prompt: str = r"^\s*[│|]?\s*[>❯›]\s*[│|]?\s*$"
    # rate-limit, quota and overload wordings (runtime/core/limits.py reads them): an error's own words, not
    # just "rate limit", because workers also print code and prose
    limit_patterns: tuple[str, ...] = ()
    # a regex for a row shown only while the CLI works (its prompt line may stay on screen meanwhile): such a
    # screen is never idle
    busy: str = ""
    # a regex for the CLI's countdown to retrying a failed API call: the worker waits on the API
    retry: str = ""
    # a regex for the row the CLI shows while it waits on its model's API (and also while a tool runs: then
    # `tool_running` matches too); shown with no output for `api_wait_limit`, the agent is limited
    api_wait: str = ""
    tool_running: str = ""
    command_prefix: str = ""  # put before every command name (a user's own namespace); none by default
    command_sign: str = "/"  # how the CLI invokes a role command: /next-build (claude, gemini), $next-build
    # variables given to each worker with `tmux new-session -e` (e.g. IS_SANDBOX=1 for claude as root,
    # GEMINI_CLI_TRUST_WORKSPACE=true); the rest of a worker's environment is the tmux server's
    env: Mapping[str, str] = field(default_factory=dict)
    trusts_projects_by_config: bool = False  # codex: `-c projects={"ROOT"={trust_level="trusted"}}`
    # a regex, `{name}` standing for the command's name, for the row the CLI lists under a typed `/name` once
    # it knows the command: the launcher types the name alone, waits for that row (at most `command_wait`),
    # then the arguments and Enter (gemini 0.61 loads its commands after its prompt shows, and takes a
    # `/name x` typed before as a plain prompt for the model)
    command_listed: str = ""
    # what keeps it from working on its own (dialogs, refusals: runtime/core/blockers.py reads them); when
    # every dialog of the CLI ends with one row, `dialog_footer` (a worker quoting a dialog shows none)
    blockers: tuple[Blocker, ...] = ()
    dialog_footer: str = ""

    def argv(self, binary: str, thinking_mode: str, trust: Sequence[str] = ()) -> list[str]:
        """`trust`: the flags that trust the worker's folders (adapters/agent_config.py `codex_trust`)."""
        return [binary, *self.args, *trust, *self.modes.get(thinking_mode, ())]

    def command_name(self, command: str) -> str:
        """The name the CLI knows the role command by (the user's `command_prefix` before it)."""
        if self.command_prefix and not command.startswith(self.command_prefix):
            return self.command_prefix + command
        return command

    def slash_command(self, command: str, args: str) -> str:
        text = f"{self.command_sign}{self.command_name(command)} {args}".rstrip()
        # codex opens a skill list under `$next-work` while it is typed, and Enter then picks from the list
        # instead of sending (nothing reaches the model); a space after the name closes the list
        return f"{text} " if self.command_sign == "$" and not args.strip() else text
