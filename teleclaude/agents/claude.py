"""Claude Code (`@anthropic-ai/claude-code`, pinned in tests/realcli/versions.txt)."""

from __future__ import annotations

from datetime import datetime

from teleclaude.agents.jsonin import loads
from teleclaude.agents.profile import (
    UUID,
    AgentProfile,
    Blocker,
    Hooks,
    Install,
    Kind,
    Resume,
    SandboxNeeds,
    Setting,
    UsageReport,
    UsageSource,
    UsageWindow,
    resume_option_argv,
)
from teleclaude.agents.statusline import rate_limits
from teleclaude.agents.tokens import Price, TokenReport, Tokens, of_reading
from teleclaude.agents.transcripts import Reading, assistant_usage

CLAUDE_STATE = "~/.claude.json"
CLAUDE_SETTINGS = "~/.claude/settings.json"

# "API error · Retrying in 26s · attempt 7/10" (2.1.197); "… · retrying in 19s · attempt 8/10" (2.1.332)
RETRYING = r"\b[Rr]etrying in \d+\w*.*\battempt \d+/\d+"


# Its status-line command gets the session's JSON on stdin, and (2.1.197) `rate_limits` in it once a response
# carried a subscriber's `anthropic-ratelimit-unified-{5h,7d}-utilization` (a fraction) and `-reset` (epoch
# seconds) headers: `{"five_hour": {"used_percentage": utilization * 100, "resets_at": SECONDS}, "seven_day":
# …}`, a window left out when its headers were not sent; no `rate_limits` at all with an API key (the CLI
# reads those headers only for an OAuth login: tests/realcli/NOTES.md)
def statusline_usage(text: str, now: datetime) -> tuple[UsageWindow, ...]:
    """The windows the status line's JSON reports (`rate_limits`, read by statusline.py), seen `now`; () for
    anything else."""
    try:
        data = loads(text)
    except ValueError:
        return ()
    return tuple(UsageWindow("claude", *limit, now) for limit in rate_limits(data, now))


# Its transcript (the Stop hook's `transcript_path`, JSON Lines) has a line per content block of each reply
# message, the lines of one message repeating its usage (transcripts.py `assistant_usage` reads one)
def transcript_tokens(text: str) -> Tokens | None:
    """What the session's responses used, each message counted once (its last line)."""
    return of_reading(Reading().fed(text, assistant_usage))


# its conversation id is the `session_id` of its hooks' input (a UUID), its transcript
# ~/.claude/projects/<cwd, / and . as ->/<id>.jsonl (`transcript_path`); `--resume ID` goes on in that file
# (not a copy: that is --fork-session). An id it does not know: "No conversation found with session ID: …"
# and it exits
RESUME = Resume(
    UUID,
    resume_option_argv,
    (r"No conversation found", r"(?i)already in use", r"Resume Session"),
)

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
    retry=RETRYING,
    # with its default 10 attempts it retries a refused request for minutes (NOTES.md): past api_wait_limit of
    # that countdown, with no output, it is limited as a CLI's silent retries are
    api_wait=RETRYING,
    # every dialog of the CLI ends with this row; a worker's output that quotes a dialog does not
    dialog_footer=r"Enter to confirm · Esc to (cancel|exit)",
    blockers=(
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
        Blocker(  # 2.1.332: no dialog; it waits for the reset and continues the turn by itself
            "its automatic continue at the limit's reset",
            r"Continuing automatically at .*Esc to cancel",
            "The subscription limit is reached: claude continues by itself at the reset shown; or use "
            "another agent.",
            rate_limit=True,
            kind=Kind.NOTICE,
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
    hooks=Hooks(
        (
            ("Stop", "stop"),  # the turn ended: refuse with uncommitted work, else record the turn end
            ("StopFailure", "stop-failure"),  # an API error ended the turn (rate_limit, billing_error, …)
            ("PreToolUse", "tool-use"),  # the worker's recent tool activity, for digests and `sessions list`
            (
                "UserPromptSubmit",
                "prompt",
            ),  # its conversation (`session_id`, `transcript_path`), from the start
        )
    ),
    # its MCP servers: ~/.claude.json (user scope), the project's .mcp.json (project scope)
    install=Install(
        ".claude",
        mcp_file=(".claude.json", ".mcp.json"),
        mcp_entry={"type": "stdio"},
        status_line=("statusLine",),
    ),
    usage=UsageReport(UsageSource.STATUSLINE, statusline_usage),
    tokens=TokenReport(
        transcript_tokens,
        prices={
            "opus-4-5": Price(5.0, 0.5, 25.0),
            "opus": Price(15.0, 1.5, 75.0),
            "sonnet": Price(3.0, 0.3, 15.0),
            "haiku": Price(1.0, 0.1, 5.0),
        },
    ),
    # - the "Bypass Permissions mode" warning: what accepting it writes (project settings are not read for it)
    # - project `.mcp.json` servers pending approval: where the CLI itself says to persist an approval
    #   (project settings cannot approve their own servers)
    unattended=(
        Setting(".claude/settings.json", ("skipDangerousModePermissionPrompt",), True),
        Setting(".claude/settings.json", ("enabledMcpjsonServers",), "teleclaude", in_list=True),
    ),
    # workspace trust for a project root covers its `trees/<slug>` worktrees; false is what it stores for
    # every folder it has seen: not a refusal (a refusal makes it exit)
    project_trust=Setting(
        ".claude.json", ("projects", "{root}", "hasTrustDialogAccepted"), True, default=False
    ),
    # its settings, sessions and login; as root it runs unattended only in a sandbox it knows of
    sandbox=SandboxNeeds(
        (".claude",), (".claude.json", ".claude.json.backup"), {"CLAUDE_CODE_BUBBLEWRAP": "1"}
    ),
    colour="#d97757",
    # 2.1.332 draws on the alternate screen ("fullscreen") for a fresh install: its retry countdown row then
    # reads as new output every second. The classic renderer keeps its rows in the pane's history, as 2.1.197
    # did (tests/realcli/NOTES.md)
    env={"CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN": "1"},
    resume=RESUME,
    # no dialog follows its prompt once the folder is trusted (`teleclaude init`)
    prompt_stable=0.3,
    settle=0.1,
)
