"""Recognise what keeps an agent CLI from working on its own: a dialog waiting for an answer (workspace trust,
the bypass-permissions warning, project MCP approval, a custom API key, hooks review, login, the rate-limit
options), a refusal to start (claude as root), or a refusal of the command typed into it (codex's
`Unrecognized command '/x'`: the step never ran). Each is reported at once with the fix, never answered by
typing into it.

Pure: ONE table keyed by agent; the wordings are the pinned CLIs' own (tests/realcli/NOTES.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
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


CLAUDE_STATE = "~/.claude.json"
CLAUDE_SETTINGS = "~/.claude/settings.json"

BLOCKERS: dict[str, tuple[Blocker, ...]] = {
    "claude": (
        Blocker(
            "the workspace trust dialog",
            r"Yes, I trust this folder|Do you trust the files in this folder",
            f'Set projects["{{workdir}}"].hasTrustDialogAccepted = true in {CLAUDE_STATE} (a parent folder '
            "covers its subfolders; `teleclaude install` writes it for the project root), or start claude "
            "in {workdir} once and answer the question.",
        ),
        Blocker(
            "the Bypass Permissions mode warning",
            r"running in Bypass Permissions mode",
            f'Add "skipDangerousModePermissionPrompt": true to {CLAUDE_SETTINGS} (accepting the warning '
            "once in `claude --dangerously-skip-permissions` writes the same).",
        ),
        Blocker(
            "the project MCP server approval",
            r"(?i)new MCP servers? found in this project",
            f'Add "enableAllProjectMcpServers": true (or "enabledMcpjsonServers": ["teleclaude"]) to '
            f"{CLAUDE_SETTINGS}, or start claude in {{workdir}} once and approve the servers.",
        ),
        Blocker(
            "the custom API key question",
            r"Detected a custom API key in your environment",
            "Start claude once in a terminal with the same ANTHROPIC_API_KEY and answer Yes (it remembers "
            f"the key's last 20 characters in customApiKeyResponses.approved of {CLAUDE_STATE}).",
        ),
        Blocker(
            "the rate-limit options dialog",
            r"Stop and wait for limit to reset",
            "The subscription limit is reached: wait for its reset, or use another agent.",
            rate_limit=True,
        ),
        Blocker(
            "the onboarding questions",
            r"Choose the text style that looks best with your terminal|Select login method:",
            f'Start claude once in a terminal and finish its setup (or set "hasCompletedOnboarding": true '
            f"in {CLAUDE_STATE} and give it ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN).",
        ),
        Blocker(
            "its refusal to skip permissions as root",
            r"cannot be used with root/sudo privileges",
            "claude refuses --dangerously-skip-permissions as root unless IS_SANDBOX=1. On a sandbox "
            '(container, VM) set it in teleclaude.toml: [runtime.agents.claude] env = {IS_SANDBOX = "1"}; '
            "else run teleclaude as an ordinary user.",
            kind=Kind.EXIT,
        ),
    ),
    "gemini": (
        Blocker(
            "the folder trust dialog",
            r"Do you trust the files in this folder\?|Do you trust this folder\?",
            "teleclaude starts gemini workers with GEMINI_CLI_TRUST_WORKSPACE=true (the profile's env); if "
            "it was overridden, trust the project root in ~/.gemini/trustedFolders.json.",
        ),
        Blocker(
            "the authentication dialog",
            r"How would you like to authenticate",
            "Choose an auth method once by hand, or set security.auth.selectedType in "
            "~/.gemini/settings.json.",
        ),
        Blocker(
            "the usage limit dialog (Keep trying / Stop)",
            r"Usage limit reached for|Keep trying\b.*\bStop\b|^\W*\d\. Keep trying",
            "The quota is used up: wait for its reset, or use another agent.",
            rate_limit=True,
        ),
        Blocker(
            "the loop detection dialog",
            r"^\W*\d\. (Keep loop detection enabled|Disable loop detection for this session)",
            "The model repeated the same calls: look at the worker (`teleclaude sessions output`) and end "
            "it, or set model.disableLoopDetection = true in ~/.gemini/settings.json to let such a worker "
            "go on.",
        ),
        Blocker(
            "its refusal of the command",
            r"Unknown command: /\S+",
            "Run `teleclaude install` so that the role commands exist for gemini.",
            kind=Kind.COMMAND,
        ),
    ),
    "codex": (
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
}


# every dialog of the CLI ends with this row; a worker's output that quotes a dialog does not. Gemini's and
# codex's dialogs share no footer (NOTES.md): for them a dialog's own row anywhere on the screen counts.
DIALOG_FOOTERS: dict[str, str] = {"claude": r"Enter to confirm · Esc to (cancel|exit)"}


def find_blocker(agent: str, rows: Iterable[str], exited: bool = False) -> Blocker | None:
    """The agent's dialog open on the screen `rows` (its footer among the last rows), or, once the CLI
    `exited`, the refusal it printed."""
    rows = [row for row in rows if row.strip()]
    footer = DIALOG_FOOTERS.get(agent)
    dialog = footer is None or any(re.search(footer, row) for row in rows[-3:])
    for blocker in BLOCKERS.get(agent, ()):
        shown = {Kind.DIALOG: dialog, Kind.EXIT: exited, Kind.COMMAND: False}[blocker.kind]
        if shown and any(re.search(blocker.pattern, row) for row in rows):
            return blocker
    return None


def refused_command(agent: str, rows: Iterable[str]) -> str | None:
    """The CLI's own words when it refused the command typed into it (`Unrecognized command '/x'`)."""
    patterns = [b.pattern for b in BLOCKERS.get(agent, ()) if b.kind is Kind.COMMAND]
    for row in rows:
        if any(re.search(pattern, row) for pattern in patterns):
            return row.strip().lstrip("•✕■ ").strip()
    return None


SESSION_CONTEXT = re.compile(r"\A\s*<session_context>.*?</session_context>", re.DOTALL)


def refusal_text(agent: str, words: str) -> str:
    """A refused command explained: the CLI's words, that nothing reached the model, and the table's fix."""
    fix = next((b.fix for b in BLOCKERS.get(agent, ()) if b.kind is Kind.COMMAND), "")
    return f"{agent} refused the command: {words}\nNothing reached the model. {fix}".rstrip()


def unexpanded_command(prompt: str, typed: str) -> bool:
    """The prompt the CLI sent its model is the command line exactly as it was typed, with nothing but
    gemini's session context before it: the CLI did not know the command (gemini 0.61 sends an unknown
    `/x args` to the model as a plain prompt once its MCP servers are connected), so the role command never
    ran. A known command without `{{args}}` also ends with the typed line (gemini appends it to the
    command's text), so text before the line means the command was expanded."""
    return bool(typed.strip()) and SESSION_CONTEXT.sub("", prompt).strip() == typed.strip()


def blocked_text(agent: str, blocker: Blocker, workdir: str, rows: Iterable[str]) -> str:
    """The message under `ERROR: WORKER_BLOCKED`: what stops the worker, the fix, and the screen."""
    shown = "\n".join(row.rstrip() for row in last_rows(rows))
    fix = blocker.fix.replace("{workdir}", workdir)
    return (
        f"{agent} is stopped by {blocker.name} in {workdir}; teleclaude does not answer it.\n"
        f"{fix}\n"
        f"The screen:\n{shown}"
    )


def last_rows(rows: Iterable[str], count: int = 15) -> list[str]:
    """The last non-blank rows of a screen, without tmux's own "Pane is dead" line."""
    kept = [row for row in rows if row.strip() and not row.startswith("Pane is dead")]
    return kept[-count:]
