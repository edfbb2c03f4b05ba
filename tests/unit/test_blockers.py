"""Dialogs and refusals that keep an agent CLI from working on its own, as Claude Code 2.1 shows them."""

from __future__ import annotations

import pytest

from teleclaude.runtime.core.blockers import blocked_text, find_blocker

FOOTER = "  Enter to confirm · Esc to cancel"
TRUST = [
    " Accessing workspace:",
    " /tmp/project",
    " Quick safety check: Is this a project you created or one you trust? (Like your own code, …)",
    " ❯ 1. Yes, I trust this folder",
    "   2. No, exit",
    FOOTER,
]
BYPASS = [
    "  WARNING: Claude Code running in Bypass Permissions mode",
    "  ❯ 1. No, exit",
    "    2. Yes, I accept",
    FOOTER,
]
API_KEY = [
    "  Detected a custom API key in your environment",
    "  Do you want to use this API key?",
    "    1. Yes",
    "  ❯ 2. No (recommended)",
    FOOTER,
]
MCP = ["  New MCP server found in this project: teleclaude", "  ❯ 1. Use this MCP server", FOOTER]
RATE_LIMIT = [
    "  ⎿  You've hit your session limit · resets 3:48pm (UTC)",
    "❯ /rate-limit-options",
    "  What do you want to do?",
    "  ❯ 1. Stop and wait for limit to reset",
    "    2. Upgrade your plan",
    "  Enter to confirm · Esc to cancel",
]


@pytest.mark.parametrize(
    ("screen", "name", "fix"),
    [
        (TRUST, "the workspace trust dialog", "hasTrustDialogAccepted"),
        (BYPASS, "the Bypass Permissions mode warning", "skipDangerousModePermissionPrompt"),
        (API_KEY, "the custom API key question", "customApiKeyResponses"),
        (MCP, "the project MCP server approval", "enableAllProjectMcpServers"),
        (RATE_LIMIT, "the rate-limit options dialog", "wait for its reset"),
    ],
)
def test_each_dialog_is_named_with_its_fix(screen, name, fix):
    blocker = find_blocker("claude", ["", *screen, "", ""])
    assert blocker is not None and blocker.name == name
    assert blocker.rate_limit is (screen is RATE_LIMIT)
    assert fix in blocked_text("claude", blocker, "/tmp/project", screen)


def test_a_worker_quoting_a_dialog_is_not_blocked():
    quoted = [
        "● Read(blockers.py)",
        '  r"Yes, I trust this folder|Stop and wait for limit to reset",',
        "",
        "❯ ",
    ]
    assert find_blocker("claude", quoted) is None
    assert find_blocker("claude", [*quoted, "  ⏵⏵ bypass permissions on · esc to interrupt"]) is None


def test_the_root_refusal_counts_only_once_the_cli_exited():
    rows = ["--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"]
    assert find_blocker("claude", rows) is None
    blocker = find_blocker(
        "claude", [*rows, "Pane is dead (status 1, Mon Nov 23 14:06:17 2026)"], exited=True
    )
    assert blocker is not None
    text = blocked_text("claude", blocker, "/tmp/project", rows)
    assert 'env = {IS_SANDBOX = "1"}' in text and "Pane is dead" not in text


# 2.1.332: no dialog after a subscriber's limit; a notice above the footer until it continues by itself
AUTO_CONTINUE = [
    "❯ /next-build greeting",
    "  ⎿  You've hit your 5-hour limit · resets 7:23pm (UTC)",
    "● Usage limit reached · set to continue automatically at 7:23pm",
    "────────",
    "❯ ",
    "────────",
    "  ⚠ Usage limit reached · limit resets 7:23pm",
    "    Continuing automatically at 7:23pm · Esc to cancel",
    "  Sonnet 5.5",
    "  ⏵⏵ bypass permissions on (shift+tab to cycle)",
]


def test_its_automatic_continue_at_the_reset_is_the_rate_limit_nothing_types_into():
    blocker = find_blocker("claude", ["", *AUTO_CONTINUE, "", ""])
    assert blocker is not None and blocker.rate_limit
    # the same words in a worker's output, above its prompt, are not the notice
    quoted = ["● Read(NOTES.md)", "  Continuing automatically at 7:23pm · Esc to cancel", "● Bash(ls)"]
    assert find_blocker("claude", [*quoted, *AUTO_CONTINUE[3:6], *AUTO_CONTINUE[8:]]) is None
