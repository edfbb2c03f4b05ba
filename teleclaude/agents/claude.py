"""Claude Code (`@anthropic-ai/claude-code`, pinned in tests/realcli/versions.txt)."""

from __future__ import annotations

from teleclaude.agents.profile import AgentProfile

PROFILE = AgentProfile(
    "claude",
    ("claude",),
    ("--dangerously-skip-permissions",),
    {"slow": ("--model", "opus"), "med": ("--model", "sonnet"), "fast": ("--model", "haiku")},
    limit_patterns=(  # Claude Code 2.1's own wordings: tests/realcli/NOTES.md
        r"(?i)usage limit reached",
        r"(?i)\b\d+-hour limit reached",
        # session, weekly, Opus, Sonnet, usage, fast, monthly spend: "You've hit your weekly limit · resets …"
        r"(?i)you[’']ve hit your ([\w-]+ ){0,2}limit\b",
        r"(?i)you[’']re out of usage credits",
        r"(?i)server is temporarily limiting requests",
        r"(?i)API Error: Request rejected \(429\)",
        r"(?i)API Error: (429|500|502|503|529)\b",
        r"\b(overloaded_error|rate_limit_error)\b",
    ),
    busy=r"\besc to interrupt\b",  # the footer while it works: "… · esc to interrupt · ← for agents"
    retry=r"\bRetrying in \d+\w*.*\battempt \d+/\d+",  # "API error · Retrying in 26s · attempt 7/10"
)
