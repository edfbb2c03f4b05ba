"""What teleclaude knows of one agent CLI: how it is started and spoken to, how its screen reads. One value
per CLI, in this package's driver modules (one module a CLI); the registry is __init__.py.

The defaults run workers unattended (each CLI's "approve everything" flag), because a worker that stops to
ask for permission in a detached tmux pane is a stalled worker. A user overrides any of it per agent in
`teleclaude.toml` under `[runtime.agents.NAME]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from teleclaude.agents.tokens import TokenReport
from teleclaude.agents.usage import UNKNOWN_WINDOW as UNKNOWN_WINDOW
from teleclaude.agents.usage import UsageWindow as UsageWindow
from teleclaude.agents.usage import kept_usage as kept_usage


class Kind(Enum):
    DIALOG = "dialog"  # open on a live screen, waiting for an answer
    EXIT = "exit"  # a refusal printed as the CLI exits
    COMMAND = "command"  # the CLI's answer to a typed command it refuses; nothing reached the model
    NOTICE = "notice"  # a standing notice among the screen's last rows (no dialog footer): it waits by itself


class Capability(Enum):
    """What the real-CLI contract suite (tests/realcli/test_contract.py) proves of every driver's CLI. A
    driver whose CLI lacks one says so in `AgentProfile.lacks`, with the reason: that scenario skips with
    it."""

    UNATTENDED_START = "starts unattended, its role command expanded, the turn ended by its own hook"
    TURN_ENDS = "twenty turns, each ended by its own hook"
    LIMIT = "a limit makes it unavailable and the next step falls back"
    LIMIT_BY_HOOK = "its own hook or event alone tells a limit (no screen pattern)"
    TOOL_ACTIVITY = "its tool hook shows the worker's last tool uses"
    REFUSED_STOP = "its stop hook's refusal reaches the model, which goes on"
    OVER_SSH = "a worker on another computer over ssh, its turn ended by its hook there"
    TOKENS = "the tokens it used, read from its own record, equal what its provider reported"
    RESUME = "a worker killed mid-turn is resumed in its own conversation by the next one"


@dataclass(frozen=True)
class Blocker:
    name: str  # what the user sees on the screen, e.g. "the workspace trust dialog"
    pattern: str  # a regex matching one row of it
    fix: str  # the exact next step; {workdir} is the worker's folder
    rate_limit: bool = False  # the CLI's own rate-limit dialog: the agent is limited, not misconfigured
    kind: Kind = Kind.DIALOG


@dataclass(frozen=True)
class Hooks:
    """The CLI's hook dialect: what it runs them on and how their input reads (runtime/hooks/), and where
    `teleclaude install` puts them (setup/install.py)."""

    # (the CLI's hook event, the `teleclaude hook` verb it runs), in the order install writes them
    events: tuple[tuple[str, str], ...] = ()
    # keys only this CLI's stop input has (it shares its stop event's name with another CLI)
    stop_keys: tuple[str, ...] = ()
    refusal: str = "block"  # the `decision` of the JSON that refuses a stop
    # the stop input's `prompt` is what the model was sent (an unknown /command reaches it as typed)
    stop_prompt: bool = False

    @property
    def stop_event(self) -> str:
        return next((event for event, verb in self.events if verb == "stop"), "")

    def runs(self, verb: str) -> bool:
        return any(v == verb for _, v in self.events)


def as_is(name: str, markdown: str) -> str:
    return markdown


@dataclass(frozen=True)
class Install:
    """Where `teleclaude install` puts the role commands, the MCP server and the hooks (setup/install.py
    writes them). Paths are relative to the base (the home folder, or the project for project scope); a
    leading `{folder}/` is the CLI's own folder there."""

    folder: str
    folder_env: str = ""  # a variable that names the user-scope folder instead of `~/{folder}`
    project_folder: str = ""  # its folder in a project, when not `folder`
    command_file: str = "{folder}/commands/{name}.md"
    command_text: Callable[[str, str], str] = as_is  # (name, the command's markdown) -> the file's text
    mcp_file: tuple[str, str] = ("{folder}/settings.json", "{folder}/settings.json")  # user, project scope
    mcp_key: str = "mcpServers"  # the table of servers (JSON, or TOML for a .toml file)
    mcp_entry: Mapping[str, object] = field(default_factory=dict)  # more fields of the server's entry
    mcp_argv: bool = False  # the entry's `command` is the whole argv list (no `args`)
    hooks_file: str = "{folder}/settings.json"
    # the hooks as one file of the CLI's own (a plugin) instead of entries of a JSON `hooks` table: its
    # text from {verb: the argv that runs `teleclaude hook VERB`}
    hooks_text: Callable[[Mapping[str, Sequence[str]]], str] | None = None
    named_hooks: bool = False  # each hook entry carries "name": "teleclaude-VERB"
    # the keys of the hooks file that hold the CLI's one status-line command (it runs it with its session's
    # JSON on stdin, usage included): `teleclaude hook statusline` goes there at user scope, running the
    # user's own status line (if any) after it, which uninstall puts back
    status_line: tuple[str, ...] = ()
    # what the CLI writes into its project folder for itself (not the project's: e.g. the npm packages of its
    # plugins): project scope writes a `.gitignore` there listing them, so a checkout never shows them as
    # untracked and `git add -A` never commits them
    project_ignore: tuple[str, ...] = ()
    # keys the CLI adds by itself to its MCP file when it starts: written with the server, so that a file
    # committed at project scope does not change under each worker
    mcp_own_keys: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Setting:
    """A JSON value install sets in one of the CLI's files in the home folder; `{root}` in `keys` is a
    project's root."""

    file: str  # relative to the home folder
    keys: tuple[str, ...]
    value: object
    in_list: bool = False  # one item of the list at `keys`
    default: object = None  # what the CLI writes there by itself when nobody chose (None: nothing)


@dataclass(frozen=True)
class Resume:
    """How the CLI takes up a conversation of its own again (runtime/core/continuation.py decides when).

    `id_pattern` is the form of the CLI's conversation id (anything else is never put on its command line);
    `argv(binary, flags, conversation)` is the command line that resumes it (`flags`: the args, trust
    flags and mode, as for a fresh start); `refused` are the CLI's answers that it could not (a missing or
    busy conversation, a picker opened instead): the worker is then started fresh."""

    id_pattern: str
    argv: Callable[[str, Sequence[str], str], list[str]]
    refused: tuple[str, ...] = ()
    # where the CLI keeps its conversations when not a file each (the session's `transcript`, which must
    # still be there): a SQLite file under the home folder whose `session` table has a row per conversation
    database: str = ""
    # a row the CLI's screen shows once it has painted the conversation again, for a CLI that shows its
    # prompt before it loads the conversation and drops or queues a line typed meanwhile: the resumed
    # worker's line waits for it ("" for a CLI whose prompt comes after its replay)
    replayed: str = ""


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # a UUID conversation id


def resume_option_argv(binary: str, flags: Sequence[str], conversation: str) -> list[str]:
    """`BINARY FLAGS… --resume ID`, as CLIs whose ids are UUIDs take a conversation up again."""
    return [binary, *flags, "--resume", conversation]


@dataclass(frozen=True)
class TurnError:
    """The API error that ended the CLI's last turn, typed, as its own record of the session says."""

    kind: str  # in the StopFailure hook's words: rate_limit, overloaded, server_error, billing_error, …
    message: str  # the words the screen shows
    completed_at: datetime  # aware UTC, to the second
    source: str  # where it was read, for the session's event (codex_error_info)
    info: object = None  # the CLI's own value


class UsageSource(Enum):
    NONE = "none"
    STATUSLINE = "statusline"  # the JSON its status-line command gets on stdin: `teleclaude hook statusline`
    TRANSCRIPT = "transcript"  # its session file, which its prompt and stop hooks name


@dataclass(frozen=True)
class UsageReport:
    """Where the CLI reports how much of its rate-limit windows is used, before it hits one, and its reader.

    `read(text, now)` gives the windows that text reports (`now`: when it was read, for a report that carries
    no time of its own); pure, never raises. A CLI with no structured report has `read=None`, and `lacking`
    says what it offers instead.
    """

    source: UsageSource = UsageSource.NONE
    read: Callable[[str, datetime], tuple[UsageWindow, ...]] | None = None
    lacking: str = "its usage before a limit was not looked for"


@dataclass(frozen=True)
class SandboxNeeds:
    """What the CLI needs inside a worker's sandbox (runtime/core/sandbox.py): its own state in the home
    folder, read-write (relative to it; a folder that is missing is made first, a file only bound when it
    is there), and variables set only inside the sandbox."""

    state: tuple[str, ...] = ()
    state_files: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentProfile:
    name: str
    binaries: tuple[str, ...]  # tried in order on PATH (a CLI, else a successor of the same dialect)
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
    command_sign: str = "/"  # how the CLI invokes a role command: /next-build, or a skill's $next-build
    # variables given to each worker with `tmux new-session -e` (e.g. IS_SANDBOX=1 to be let run as root,
    # GEMINI_CLI_TRUST_WORKSPACE=true); the rest of a worker's environment is the tmux server's
    env: Mapping[str, str] = field(default_factory=dict)
    # the flags that trust the worker's folders for this process (when the CLI asks about a new folder and
    # can be told on its command line)
    trust_flags: Callable[[Iterable[str]], list[str]] | None = None
    # a regex, `{name}` standing for the command's name, for the row the CLI lists under a typed `/name` once
    # it knows the command: the launcher types the name alone, waits for that row (at most `command_wait`),
    # then the arguments and Enter (a CLI may load its commands after its prompt shows, and take a
    # `/name x` typed before as a plain prompt for the model)
    command_listed: str = ""
    # once it is listed, erase the typed name and type the whole line (a CLI whose list takes the space
    # after a listed name, and drops the line); the list waited for up to `startup_timeout`, the name typed
    # again each `command_wait` or once its keys were lost
    command_retype: bool = False
    # after Enter, wait until the CLI shows the command's text (it expanded it) or the line itself as a
    # message (it sent it to the model as typed, on a loaded machine), and type it again after an interrupt
    command_confirm: bool = False
    # what keeps it from working on its own (dialogs, refusals: runtime/core/blockers.py reads them); when
    # every dialog of the CLI ends with one row, `dialog_footer` (a worker quoting a dialog shows none)
    blockers: tuple[Blocker, ...] = ()
    dialog_footer: str = ""
    hooks: Hooks = Hooks()
    # the error that ended the last turn, typed, from the tail of the session's transcript (the file its
    # `prompt` hook named); for a CLI that runs no hook for such a turn
    turn_error: Callable[[list[str]], TurnError | None] | None = None
    # how much of its rate-limit windows the CLI says is used, before a limit: where it says so, and how
    # that reads (`UsageReport.read` None: it says nothing structured, only the limit's error)
    usage: UsageReport = UsageReport()
    # what a session used (tokens, and dollars where the CLI says): read from the file its stop hook names
    tokens: TokenReport = TokenReport()
    install: Install | None = None  # None: `teleclaude install` does not know the CLI
    # what install answers in the user's files so that the CLI's first-run dialogs never ask a detached
    # worker; `project_trust`: the value that trusts a project root (`teleclaude init`, project scope)
    unattended: tuple[Setting, ...] = ()
    project_trust: Setting | None = None
    colour: str = ""  # its bars on a run's timeline (`teleclaude report`, the board): the vendor's own hue
    # the launcher's waits (`[runtime] prompt_stable` / `settle` set one for every agent): the prompt on an
    # unchanged screen this long before typing (a CLI that paints a dialog over its prompt needs longer), and
    # between the CLI showing a typed line and Enter (an Enter read with the text is taken as a newline;
    # one dropped anyway is pressed again)
    prompt_stable: float = 1.0
    settle: float = 0.3
    # how it resumes one of its conversations (None: it cannot; `lacks` says why)
    resume: Resume | None = None
    # what of the contract its CLI cannot do, and why (none: it does all of it)
    lacks: Mapping[Capability, str] = field(default_factory=dict)
    sandbox: SandboxNeeds = SandboxNeeds()  # the paths its CLI writes outside the worktree

    def argv(self, binary: str, thinking_mode: str, trust: Sequence[str] = ()) -> list[str]:
        """`trust`: the flags that trust the worker's folders (`trust_flags`)."""
        return [binary, *self.args, *trust, *self.modes.get(thinking_mode, ())]

    def resume_argv(
        self, binary: str, thinking_mode: str, conversation: str, trust: Sequence[str] = ()
    ) -> list[str] | None:
        """The command line that resumes `conversation`; None when the CLI cannot, or the id is not in its
        form (it is never put on a command line then)."""
        resume = self.resume
        if resume is None or not re.fullmatch(resume.id_pattern, conversation):
            return None
        return resume.argv(binary, [*self.args, *trust, *self.modes.get(thinking_mode, ())], conversation)

    def command_name(self, command: str) -> str:
        """The name the CLI knows the role command by (the user's `command_prefix` before it)."""
        if self.command_prefix and not command.startswith(self.command_prefix):
            return self.command_prefix + command
        return command

    def slash_command(self, command: str, args: str) -> str:
        text = f"{self.command_sign}{self.command_name(command)} {args}".rstrip()
        # a CLI of `$` skills opens a skill list under `$next-work` while it is typed, and Enter then picks
        # from the list instead of sending (nothing reaches the model); a space after the name closes the list
        return f"{text} " if self.command_sign == "$" and not args.strip() else text
