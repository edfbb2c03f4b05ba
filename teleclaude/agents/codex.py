"""Codex CLI (`@openai/codex`, pinned in tests/realcli/versions.txt)."""

from __future__ import annotations

from collections.abc import Iterable

from teleclaude.agents.formats import basic_string, split_front_matter
from teleclaude.agents.profile import AgentProfile, Blocker, Hooks, Install, Kind


def trust_flags(folders: Iterable[str]) -> list[str]:
    """Codex asks "Trust this folder?" for every project it has no `[projects."PATH"] trust_level` for. A
    `-c` override trusts the worker's own folders for that process only (a dotted key cannot hold a path
    with dots, an inline table can); nothing is written to ~/.codex/config.toml."""
    trusted = '{ trust_level = "trusted" }'
    tables = ", ".join(f"{basic_string(folder)} = {trusted}" for folder in dict.fromkeys(folders))
    return ["-c", f"projects = {{ {tables} }}"] if tables else []


def skill(name: str, markdown: str) -> str:
    """A Codex skill (`~/.codex/skills/NAME/SKILL.md`, or the project's `.codex/skills/`), invoked as
    `$NAME args`: Codex 0.169 has no custom prompts any more and does not substitute `$ARGUMENTS` in a skill,
    so the skill says where they are."""
    meta, body = split_front_matter(markdown)
    description = meta.get("description", "") or f"teleclaude role command {name}"
    return (
        "---\n"
        f"name: {name}\n"
        f"description: {description}\n"
        "---\n\n"
        f"<!-- Installed by `teleclaude install`; `teleclaude install --uninstall` removes it. -->\n"
        f"Arguments: this skill is invoked as `${name} ARGUMENTS`. Everywhere below, `$ARGUMENTS` stands for "
        f"the text after `${name}` in the user's message (empty when there is none).\n\n" + body.lstrip("\n")
    )


PROFILE = AgentProfile(
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
    # Codex 0.169: `’` (U+2019) in its wordings. While it retries it shows the last error under its spinner
    # (`• Server is busy, reconnecting 2/5 …` / `  └ Exceeded retry limit, last status: 429 …`, or
    # `Reconnecting... 1/5` / `└ We’re currently experiencing high demand, …`): not a limit yet. It has given
    # up when the error ends the turn, in a `■ ` row: only those rows count for 429 and 5xx
    limit_patterns=(
        r"(?i)you['’]ve hit your usage limit",
        r"(?i)you['’]re out of credits",
        r"(?i)you['’]ve reached your workspace credit limit",
        r"(?i)usage limit (reached|exceeded)",
        r"(?i)^\s*■\s*exceeded retry limit, last status: (429|5\d\d)",
        r"(?i)^\s*■\s*we['’]re currently experiencing high demand",
        r"(?i)^\s*■\s*unexpected status (429|5\d\d)\b",
        r"(?i)^\s*■\s*selected model is at capacity",
        r"(?i)quota exceeded",
    ),
    # its input line `› Ask Codex to do anything` stays while it works; the row above it tells:
    # `• Working (3s • esc to interrupt)`, `• Server is busy, reconnecting 2/5 (4s • esc to interrupt)`
    busy=r"\besc to interrupt\b",
    retry=r"\b(Server is busy, reconnecting|Reconnecting\.\.\.) \d+/\d+",
    command_sign="$",  # codex 0.169 has no custom prompts; role commands are skills: `$next-build x`
    trust_flags=trust_flags,
    blockers=(
        Blocker(
            "the folder trust dialog",
            r"Trust this folder\?|Do you trust the contents of this directory",
            'Trust the project root in ~/.codex/config.toml: [projects."ROOT"] trust_level = "trusted" '
            "(teleclaude trusts {workdir} with `-c projects=…` unless the profile was overridden).",
        ),
        Blocker(
            "the hooks review dialog",
            r"Hooks need review",
            "Start codex with --dangerously-bypass-hook-trust (teleclaude's default), or trust the hooks "
            "once by hand.",
        ),
        Blocker(
            "the login screen",
            r"Sign in with ChatGPT|Choose how you want to use Codex",
            "Log in once by hand (codex login), or configure a model provider with an API key.",
        ),
        Blocker(
            "the rate limit model switch dialog",
            r"Approaching rate limits|Switch to .*\?$",
            "Set [notice] hide_rate_limit_model_nudge = true in ~/.codex/config.toml.",
            rate_limit=True,
        ),
        Blocker(
            "its refusal of the command",
            r"Unrecognized command '[^']*'",
            'Codex 0.169 runs role commands as skills ($next-build); drop command_sign = "/" and '
            "command_prefix from [runtime.agents.codex], and run `teleclaude install`.",
            kind=Kind.COMMAND,
        ),
    ),
    hooks=Hooks(
        (
            ("Stop", "stop"),
            # where codex records the API error that ends a turn (no hook runs for such a turn)
            ("UserPromptSubmit", "prompt"),
            # before every tool call (no matcher: every tool), with claude's fields (NOTES.md)
            ("PreToolUse", "tool-use"),
        ),
        stop_keys=("turn_id",),
    ),
    # codex 0.169 lists a project's .codex/skills (and .agents/skills) beside ~/.codex/skills (NOTES.md)
    install=Install(
        ".codex",
        folder_env="CODEX_HOME",
        command_file="{folder}/skills/{name}/SKILL.md",
        command_text=skill,
        mcp_file=("{folder}/config.toml", "{folder}/config.toml"),
        mcp_key="mcp_servers",
        hooks_file="{folder}/hooks.json",
    ),
)
