"""How each agent CLI is started and spoken to: binaries, flags per thinking mode, prompt, limit patterns.

The defaults run workers unattended (each CLI's "approve everything" flag), because a worker that stops to
ask for permission in a detached tmux pane is a stalled worker. Override any of it per agent in
`teleclaude.toml` under `[runtime.agents.NAME]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from teleclaude.runtime.core.limits import DEFAULT_LIMIT_PATTERNS


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


DEFAULT_PROFILES: Mapping[str, AgentProfile] = {
    "claude": AgentProfile(
        "claude",
        ("claude",),
        ("--dangerously-skip-permissions",),
        {"slow": ("--model", "opus"), "med": ("--model", "sonnet"), "fast": ("--model", "haiku")},
        limit_patterns=DEFAULT_LIMIT_PATTERNS["claude"],
        busy=r"\besc to interrupt\b",  # the footer while it works: "… · esc to interrupt · ← for agents"
        retry=r"\bRetrying in \d+\w*.*\battempt \d+/\d+",  # "API error · Retrying in 26s · attempt 7/10"
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
        # GEMINI_CLI_TRUST_WORKSPACE trusts the worker's folder (no trust dialog); with CI=true in its
        # environment (a CI job running `teleclaude run`) gemini 0.61 skips its interactive UI and exits 42
        env={"GEMINI_CLI_TRUST_WORKSPACE": "true", "CI": "false"},
        # it retries 429 and 503 silently for minutes under ` ⠦ Thinking... (esc to cancel, 8m 11s)`; a
        # running shell command shows the same row under its box `│ ⊶  Shell sleep 12` (⊶ and ⊷ alternate),
        # a running hook as ` ⠦ Executing Hook: teleclaude-stop (esc to cancel, 12s)`
        api_wait=r"\(esc to cancel, (\d+[hms] ?)+\)",
        # with `ui.errorVerbosity = "full"` its spinner says so while it retries (from the 0.61 bundle)
        retry=r"\bTrying to reach .+ \(Attempt \d+/\d+\)",
        tool_running=r"^\s*│\s*[⊶⊷]|\bExecuting Hook:",
        # its suggestion under a typed ` * /next-build`, once its commands are loaded:
        # ` next-build   Builder - do every open task …` (nothing is listed while they load)
        command_listed=r"^\s*{name}\s{2,}\S",
    ),
    "codex": AgentProfile(
        "codex",
        ("codex",),
        # --no-daemon: hooks run in this process, with its TELECLAUDE_SESSION_ID (a shared app-server daemon
        # would run them with the environment of whichever codex started it). allow_login_shell=false: its
        # shell tool (exec_command) runs a login shell by default, whose /etc/profile sets PATH anew on
        # Debian, and `teleclaude finalize` was "command not found"; without it the shell keeps the
        # worker's PATH
        (
            "--dangerously-bypass-approvals-and-sandbox",
            "--dangerously-bypass-hook-trust",
            "--no-daemon",
            *("-c", "allow_login_shell=false"),
        ),
        {
            "slow": ("-c", "model_reasoning_effort=high"),
            "med": ("-c", "model_reasoning_effort=medium"),
            "fast": ("-c", "model_reasoning_effort=low"),
        },
        prompt=r"^\s*[│|]?\s*[›>]\s*(Ask Codex.*|Implement \{feature\}.*)?[│|]?\s*$",
        limit_patterns=DEFAULT_LIMIT_PATTERNS["codex"],
        # its input line `› Ask Codex to do anything` stays while it works; the row above it tells:
        # `• Working (3s • esc to interrupt)`, `• Server is busy, reconnecting 2/5 (4s • esc to interrupt)`
        busy=r"\besc to interrupt\b",
        retry=r"\b(Server is busy, reconnecting|Reconnecting\.\.\.) \d+/\d+",
        command_sign="$",  # codex 0.169 has no custom prompts; role commands are skills: `$next-build x`
        trusts_projects_by_config=True,
    ),
}


@dataclass(frozen=True)
class Computer:
    """`[computers.NAME]` in teleclaude.toml: another machine reached with OpenSSH, where workers run in tmux.

    `project` is a clone of this project there; the item branch travels to it before a worker starts and
    back after each turn. `agents` maps an agent name to its binary there (a name found on `path`, or a path).
    """

    name: str
    host: str
    project: str
    agents: Mapping[str, str]
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    path: str | None = None  # PATH for the workers there; else the login's default
    ssh_options: tuple[str, ...] = ()  # extra `-o KEY=VALUE` options, e.g. UserKnownHostsFile=...
    lanes: int = 0  # how many items of `teleclaude run` may have their worktree steps done there at once


@dataclass(frozen=True)
class RuntimeConfig:
    """`[runtime]` in teleclaude.toml. Times are seconds."""

    socket: str = "teleclaude"  # the private tmux server: `tmux -L teleclaude ls`
    computers: tuple[str, ...] = ("local",)  # names that mean this machine
    remotes: Mapping[str, Computer] = field(default_factory=dict)  # [computers.NAME]: other machines
    profiles: Mapping[str, AgentProfile] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    history_limit: int = 50_000
    width: int = 200
    height: int = 50
    startup_timeout: float = 60.0  # for the CLI's prompt to appear
    prompt_stable: float = 1.0  # the prompt must stay on an unchanged screen this long before typing
    settle: float = 0.3  # between pasting the command and pressing Enter
    command_wait: float = 30.0  # for the CLI to list a typed command (profile's `command_listed`); then sent
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
    # no output while the CLI shows it waits on its API (the profile's `api_wait`) this long: rate_limited
    api_wait_limit: float = 300.0

    @property
    def ssh_timeout(self) -> float:
        """For one git push, fetch or clean-up in another computer's clone over ssh."""
        return self.tmux_timeout * 6

    def elsewhere(self, computer: str) -> bool:
        """Whether a session's `computer` is another machine; the names in `computers` mean this one."""
        return computer not in self.computers
