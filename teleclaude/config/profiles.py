"""How each agent CLI is started and spoken to: binaries, flags per thinking mode, prompt, limit patterns.

The defaults run workers unattended (each CLI's "approve everything" flag), because a worker that stops to
ask for permission in a detached tmux pane is a stalled worker. Override any of it per agent in
`teleclaude.toml` under `[runtime.agents.NAME]`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from teleclaude.adapters.agent_config import basic_string as toml_string
from teleclaude.runtime.core.limits import DEFAULT_LIMIT_PATTERNS


@dataclass(frozen=True)
class Dialog:
    """A screen that replaces a CLI's prompt and waits for an answer a detached worker cannot give.

    `limit`: the dialog means the agent hit a usage limit (gemini's "Usage limit reached … Keep trying /
    Stop"), so the session is rate limited rather than blocked."""

    pattern: str  # a regex for one row of the dialog
    name: str  # what to call it in the error
    fix: str  # what the user does so that it does not appear
    limit: bool = False


@dataclass(frozen=True)
class AgentProfile:
    name: str
    binaries: tuple[str, ...]  # tried in order on PATH (gemini: Gemini CLI, else Antigravity's agy)
    args: tuple[str, ...] = ()
    modes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # thinking mode -> extra flags
    # a regex for the CLI's input line while it waits for input: the prompt sign with nothing typed after it
    # (its echo of a sent message, "> /next-build x", must not count)
    prompt: str = r"^\s*[│|]?\s*[>❯›]\s*[│|]?\s*$"
    limit_patterns: tuple[str, ...] = ()
    command_prefix: str = ""  # put before every command name (a user's own namespace); none by default
    command_sign: str = "/"  # how the CLI invokes a role command: /next-build (claude, gemini), $next-build
    dialogs: tuple[Dialog, ...] = ()  # screens that block the CLI (see Dialog)
    rejected: str = ""  # a regex for the CLI's answer to a command it does not know
    trust_env: Mapping[str, str] = field(default_factory=dict)  # variables that trust the worker's folder
    trusts_projects_by_config: bool = False  # codex: `-c projects={"ROOT"={trust_level="trusted"}}`

    def argv(self, binary: str, thinking_mode: str, folders: Iterable[str] = ()) -> list[str]:
        trust = _codex_trust(folders) if self.trusts_projects_by_config else []
        return [binary, *self.args, *trust, *self.modes.get(thinking_mode, ())]

    def slash_command(self, command: str, args: str) -> str:
        if self.command_prefix and not command.startswith(self.command_prefix):
            command = self.command_prefix + command
        return f"{self.command_sign}{command} {args}".rstrip()


def _codex_trust(folders: Iterable[str]) -> list[str]:
    """Codex asks "Trust this folder?" for every project it has no `[projects."PATH"] trust_level` for. A
    `-c` override trusts the worker's own folders for that process only (a dotted key cannot hold a path
    with dots, an inline table can); nothing is written to ~/.codex/config.toml."""
    trusted = '{ trust_level = "trusted" }'
    tables = ", ".join(f"{toml_string(folder)} = {trusted}" for folder in dict.fromkeys(folders))
    return ["-c", f"projects = {{ {tables} }}"] if tables else []


# --- each CLI's dialogs, seen on the real CLIs (tests/realcli/NOTES.md) ---------------------------------

GEMINI_DIALOGS = (
    Dialog(
        r"Do you trust the files in this folder\?|Do you trust this folder\?",
        "folder trust",
        "teleclaude starts gemini workers with GEMINI_CLI_TRUST_WORKSPACE=true; if it was overridden, trust "
        "the project root in ~/.gemini/trustedFolders.json",
    ),
    Dialog(
        r"How would you like to authenticate",
        "authentication",
        "choose an auth method once by hand, or set security.auth.selectedType in ~/.gemini/settings.json",
    ),
    Dialog(
        r"Usage limit reached for|Keep trying\b.*\bStop\b|^\W*\d\. Keep trying",
        "usage limit (Keep trying / Stop)",
        "wait for the quota to reset or use another agent",
        limit=True,
    ),
)
CODEX_DIALOGS = (
    Dialog(
        r"Trust this folder\?|Do you trust the contents of this directory",
        "folder trust",
        'trust the project root in ~/.codex/config.toml: [projects."ROOT"] trust_level = "trusted"',
    ),
    Dialog(
        r"Hooks need review",
        "hooks review",
        "start codex with --dangerously-bypass-hook-trust (teleclaude's default), or trust the hooks once by "
        "hand",
    ),
    Dialog(
        r"Sign in with ChatGPT|Choose how you want to use Codex",
        "login",
        "log in once by hand (codex login), or configure a model provider with an API key",
    ),
    Dialog(
        r"Approaching rate limits|Switch to .*\?$",
        "rate limit model switch",
        "set [notice] hide_rate_limit_model_nudge = true in ~/.codex/config.toml",
        limit=True,
    ),
)


DEFAULT_PROFILES: Mapping[str, AgentProfile] = {
    "claude": AgentProfile(
        "claude",
        ("claude",),
        ("--dangerously-skip-permissions",),
        {"slow": ("--model", "opus"), "med": ("--model", "sonnet"), "fast": ("--model", "haiku")},
        limit_patterns=DEFAULT_LIMIT_PATTERNS["claude"],
    ),
    "gemini": AgentProfile(
        "gemini",
        ("gemini", "agy"),
        ("--yolo",),
        # aliases the pinned CLI resolves itself; med keeps its own model router ("Auto") and fallback
        {"slow": ("--model", "pro"), "med": (), "fast": ("--model", "flash")},
        # ` *   Type your message or @path/to/file` between two rules (`!` in shell mode; `>` before 0.61)
        prompt=r"^\s*[│|]?\s*[>❯*!]\s*(Type your message.*)?[│|]?\s*$",
        limit_patterns=DEFAULT_LIMIT_PATTERNS["gemini"],
        dialogs=GEMINI_DIALOGS,
        rejected=r"Unknown command: /\S+",
        trust_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
    ),
    "codex": AgentProfile(
        "codex",
        ("codex",),
        # --no-daemon: hooks run in this process, with its TELECLAUDE_SESSION_ID (a shared app-server daemon
        # would run them with the environment of whichever codex started it)
        ("--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust", "--no-daemon"),
        {
            "slow": ("-c", "model_reasoning_effort=high"),
            "med": ("-c", "model_reasoning_effort=medium"),
            "fast": ("-c", "model_reasoning_effort=low"),
        },
        prompt=r"^\s*[│|]?\s*[›>]\s*(Ask Codex.*|Implement \{feature\}.*)?[│|]?\s*$",
        limit_patterns=DEFAULT_LIMIT_PATTERNS["codex"],
        command_sign="$",  # codex 0.169 has no custom prompts; role commands are skills: `$next-build x`
        dialogs=CODEX_DIALOGS,
        rejected=r"Unrecognized command '[^']*'",
        trusts_projects_by_config=True,
    ),
}


@dataclass(frozen=True)
class RuntimeConfig:
    """`[runtime]` in teleclaude.toml. Times are seconds."""

    socket: str = "teleclaude"  # the private tmux server: `tmux -L teleclaude ls`
    computers: tuple[str, ...] = ("local",)  # names that mean this machine
    profiles: Mapping[str, AgentProfile] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    history_limit: int = 50_000
    width: int = 200
    height: int = 50
    startup_timeout: float = 60.0  # for the CLI's prompt to appear
    prompt_stable: float = 1.0  # the prompt must stay on an unchanged screen this long before typing
    settle: float = 0.3  # between pasting the command and pressing Enter
    idle_threshold: float = 5.0
    poll_interval: float = 0.5
    tmux_timeout: float = 10.0
    # supervision (seconds without progress, counted from the last progress)
    soft_remind: float = 210.0  # a reminder typed at the worker's next idle
    hard_remind: float = 420.0  # an interrupting reminder (Escape first); again every (hard - soft) after
    max_nudges: int = 3  # unanswered reminders before the session needs attention
    digest_period: float = 600.0  # a digest per worker for the orchestrator's wait_for_sessions
    digest_period_quiet: float = 300.0  # once a worker showed no progress between two digests
    spin_max: float = 45.0  # post-report cycle: the longest wait for the pane to be quiet
    wait_timeout: float = 600.0  # post-report cycle: the longest a wait_cmd may run
