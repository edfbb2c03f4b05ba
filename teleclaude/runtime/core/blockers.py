"""Recognise what keeps an agent CLI from working on its own: a dialog waiting for an answer (workspace trust,
the bypass-permissions warning, project MCP approval, a custom API key, the rate-limit options) or a refusal
to start (claude as root). Each is reported at once with the fix, never answered by typing into it.

Pure: the wordings are Claude Code 2.1's own (tests/realcli/NOTES.md), data keyed by agent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Blocker:
    name: str  # what the user sees on the screen, e.g. "the workspace trust dialog"
    pattern: str  # a regex matching one row of it
    fix: str  # the exact next step; {workdir} is the worker's folder
    rate_limit: bool = False  # the CLI's own rate-limit dialog: the agent is limited, not misconfigured
    refusal: bool = False  # printed as the CLI exits, not a dialog on a live screen


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
            refusal=True,
        ),
    ),
}


# every dialog of the CLI ends with this row; a worker's output that quotes a dialog does not
DIALOG_FOOTERS: dict[str, str] = {"claude": r"Enter to confirm · Esc to (cancel|exit)"}


def find_blocker(agent: str, rows: Iterable[str], exited: bool = False) -> Blocker | None:
    """The agent's dialog open on the screen `rows` (its footer among the last rows), or, once the CLI
    `exited`, the refusal it printed."""
    rows = [row for row in rows if row.strip()]
    footer = DIALOG_FOOTERS.get(agent)
    dialog = footer is not None and any(re.search(footer, row) for row in rows[-3:])
    for blocker in BLOCKERS.get(agent, ()):
        if (exited if blocker.refusal else dialog) and any(re.search(blocker.pattern, row) for row in rows):
            return blocker
    return None


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
