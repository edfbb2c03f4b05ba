"""Codex CLI (`@openai/codex`, pinned in tests/realcli/versions.txt)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from teleclaude.agents.formats import basic_string, split_front_matter
from teleclaude.agents.profile import (
    AgentProfile,
    Blocker,
    Hooks,
    Install,
    Kind,
    Resume,
    SandboxNeeds,
    TurnError,
    UsageReport,
    UsageSource,
    UsageWindow,
)
from teleclaude.agents.rollout import rollout_limits
from teleclaude.agents.tokens import Price, TokenReport, Tokens, of_reading
from teleclaude.agents.transcripts import Reading, rollout_totals


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


# Its rollout file (`CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-THREAD.jsonl`, one JSON event a line; its
# UserPromptSubmit hook names it): where codex 0.169 records, typed, the API error that ended a turn. The
# interactive CLI shows only the error's words (a `■` row), and runs no hook for such a turn; the file ends
# the turn with `{"type": "event_msg", "payload": {"type": "task_complete", "completed_at": SECONDS,
# "error": {"message": …, "codex_error_info": "usage_limit_exceeded"}}}` (tests/realcli/NOTES.md).


def last_turn_error(lines: list[str]) -> TurnError | None:
    """The error that ended the last turn of these rollout lines (the file's tail), if its last turn event is
    a `task_complete` with an error; None when that turn completed, or a newer one started."""
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by the tail, or one being written
        payload = event.get("payload") if isinstance(event, dict) else None
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind in ("task_started", "turn_aborted"):  # a newer turn, or one interrupted (Escape)
            return None
        if kind != "task_complete" or not isinstance(payload, dict):
            continue
        error, when = payload.get("error"), payload.get("completed_at")
        if not isinstance(error, dict) or not isinstance(when, int | float):
            return None
        message = error.get("message")
        info = error.get("codex_error_info")
        return TurnError(
            failure_kind(info),
            message if isinstance(message, str) else "",
            datetime.fromtimestamp(int(when), UTC),
            "codex_error_info",
            info,
        )
    return None


def failure_kind(info: object) -> str:
    """Its typed error (`codex_error_info` of the turn's `task_complete` in its rollout file) as the kind
    runtime/core/limits.py `failure_limit` knows: `usage_limit_exceeded` and a given-up 429 are
    `rate_limit`, `server_overloaded` `overloaded`, 5xx `server_error`; any other error is itself (not a
    limit: the turn ended)."""
    if isinstance(info, dict) and len(info) == 1:  # {"response_too_many_failed_attempts": {…}}
        ((name, details),) = info.items()
        status = details.get("http_status_code") if isinstance(details, dict) else None
        if status == 429:
            return "rate_limit"
        if isinstance(status, int) and status >= 500:
            return "overloaded" if status == 503 else "server_error"
        return str(name)
    kinds = {
        "usage_limit_exceeded": "rate_limit",
        "server_overloaded": "overloaded",
        "internal_server_error": "server_error",
        "unauthorized": "authentication_failed",
    }
    return kinds.get(str(info), str(info))


# The same file records what the provider's `x-codex-primary-used-percent`, `-primary-window-minutes`,
# `-primary-reset-at` (epoch seconds) and their `secondary` twins said, on each response: a `token_count`
# event, `{"timestamp": ISO, "type": "event_msg", "payload": {"type": "token_count", "info": …,
# "rate_limits": {"primary": {"used_percent": 42.0, "window_minutes": 300, "resets_at": SECONDS},
# "secondary": …, "plan_type": …, …}}}`; `rate_limits` is null when the response carried none of them.
def rollout_usage(text: str, now: datetime) -> tuple[UsageWindow, ...]:
    """The windows of the last `token_count` event of these rollout lines that reports any, seen when that
    event was written (else `now`); () when none does (agents/rollout.py reads them)."""
    return tuple(UsageWindow("codex", *limit) for limit in rollout_limits(text, now))


# Each `token_count` event's `info.total_token_usage` is the session's use so far: `{"input_tokens",
# "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens"}` (input counts the
# cached, output the reasoning); a `turn_context` event names the model of each turn
def rollout_tokens(text: str) -> Tokens | None:
    """The session's use as the last `token_count` event with its totals says (transcripts.py
    `rollout_totals` reads a line)."""
    return of_reading(Reading().fed(text, rollout_totals))


def resume_argv(binary: str, flags: Sequence[str], conversation: str) -> list[str]:
    return [binary, "resume", *flags, conversation]


# its conversation is a thread (a UUID: its hooks' `session_id`, the tail of its rollout file's name, which
# its UserPromptSubmit hook names); `codex resume ID` takes every flag of a start. An id it has no rollout of:
# "No saved session found with ID …" and it exits; without an id it would open its picker
RESUME = Resume(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    resume_argv,
    (r"(?i)no saved session found", r"(?i)no conversation found", r"(?i)resume a previous session"),
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
    # resumed, it shows its prompt under `Resuming session…` and paints the conversation after
    busy=r"\besc to interrupt\b|^\s*Resuming session\b",
    retry=r"\b(Server is busy, reconnecting|Reconnecting\.\.\.) \d+/\d+",
    command_sign="$",  # codex 0.169 has no custom prompts; role commands are skills: `$next-build x`
    trust_flags=trust_flags,
    turn_error=last_turn_error,
    usage=UsageReport(UsageSource.TRANSCRIPT, rollout_usage),
    tokens=TokenReport(
        rollout_tokens,
        prices={
            "gpt-5": Price(1.25, 0.125, 10.0),
            "gpt-5-mini": Price(0.25, 0.025, 2.0),
            "gpt-5-nano": Price(0.05, 0.005, 0.4),
        },
    ),
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
            # before every tool call (no matcher: every tool), with PreToolUse's usual fields (NOTES.md)
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
        # codex 0.169 sends a turn without the tools of a server still starting, and waits for a required
        # one before its first turn (exiting with the server's error should it fail to start)
        # and gives a stdio server only a few variables of its own environment (HOME, PATH, …) unless named
        # here: report_status needs the worker's session and its key (runtime/core/marks.py), and its database
        # (a sandboxed worker: its session's channel folder instead, adapters/sandbox.py)
        mcp_entry={
            "required": True,
            "env_vars": [
                "TELECLAUDE_SESSION_ID",
                "TELECLAUDE_SESSION_KEY",
                "TELECLAUDE_DB",
                "TELECLAUDE_CHANNEL",
            ],
        },
        hooks_file="{folder}/hooks.json",
    ),
    sandbox=SandboxNeeds((".codex",)),  # its config, login, sessions and rollout files (CODEX_HOME)
    colour="#10a37f",
    # a dialog can replace its prompt ~0.8 s after it shows
    prompt_stable=1.0,
    settle=0.1,
    resume=RESUME,
)
