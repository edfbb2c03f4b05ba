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
