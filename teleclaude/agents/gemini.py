"""Gemini CLI (`@google/gemini-cli`, pinned in tests/realcli/versions.txt); Antigravity's `agy` is started
with the same profile when no `gemini` is on PATH."""

from __future__ import annotations

from teleclaude.agents.formats import basic_string, multiline_string, split_front_matter
from teleclaude.agents.profile import (
    UUID,
    AgentProfile,
    Blocker,
    Capability,
    Hooks,
    Install,
    Kind,
    Resume,
    SandboxNeeds,
    UsageReport,
    resume_option_argv,
)
from teleclaude.agents.tokens import Price, TokenReport, Tokens, of_reading
from teleclaude.agents.transcripts import Reading, chat_tokens


def command_toml(name: str, markdown: str) -> str:
    """A Gemini CLI command file: `description`, and the prompt with `{{args}}` for `$ARGUMENTS`."""
    meta, body = split_front_matter(markdown)
    prompt = body.lstrip("\n").replace("$ARGUMENTS", "{{args}}")
    return (
        "# Installed by `teleclaude install`; `teleclaude install --uninstall` removes it.\n"
        f"description = {basic_string(meta.get('description', ''))}\n"
        f"prompt = {multiline_string(prompt)}\n"
    )


# Its session record (the AfterAgent hook's `transcript_path`; 0.61: JSON Lines, a line each time a message is
# written, the same `id` again as it grows): each model message, `{"id", "type": "gemini", "model", "tokens":
# {"input", "output", "cached", "thoughts", "tool", "total"}}`, the response's usageMetadata (`input` is
# promptTokenCount, the cached part included; `tool` the tool-use prompt, besides it; `output` leaves the
# thoughts out)
def session_tokens(text: str) -> Tokens | None:
    """What the session's model messages used, each counted once (its last line: transcripts.py
    `chat_tokens` reads one)."""
    return of_reading(Reading().fed(text, chat_tokens))


# its conversation id is the `session_id` of its hooks' input (a UUID), its record the chat file
# ~/.gemini/tmp/<project>/chats/session-<time>-<first 8 of the id>.jsonl (`transcript_path`), which
# `--resume ID` goes on writing. An id it has no chat of in the worker's project: "Error resuming session:
# Invalid session identifier …" and it exits; `--resume` alone or a number would pick another chat. It shows
# its prompt before it loads the chat (once its client is ready: "Resuming session...", its input hidden,
# the screen cleared and the conversation painted again); an Enter meanwhile is lost or its line queued
# and then dropped. The replay's user rows (` > /next-build greeting`, ` > [Function Response: …]`) say
# it is done; its input's placeholder has three spaces after its sign
RESUME = Resume(
    UUID,
    resume_option_argv,
    (r"(?i)error resuming session", r"(?i)invalid session identifier", r"(?i)no previous sessions found"),
    replayed=r"^ ?> \S",
)

PROFILE = AgentProfile(
    "gemini",
    ("gemini", "agy"),
    ("--yolo",),
    # aliases the pinned CLI resolves itself; med keeps its own model router ("Auto") and fallback
    {"slow": ("--model", "pro"), "med": (), "fast": ("--model", "flash")},
    # ` *   Type your message or @path/to/file` between two rules (`!` in shell mode; `>` before 0.61)
    prompt=r"^\s*[│|]?\s*[>❯*!]\s*(Type your message.*)?[│|]?\s*$",
    # Gemini CLI 0.61 (tests/realcli/NOTES.md): it retries 429 and 503 silently; what it prints is final
    limit_patterns=(
        r"\bRESOURCE_EXHAUSTED\b",
        r"(?i)\b(status|code|error)\W{0,3}429\b",
        r"(?i)\b429 Too Many Requests\b",
        r"(?i)model is overloaded",
        r"(?i)quota (exceeded|exhausted)",
        r"(?i)rate limit(ed)? exceeded",
        r"(?i)usage limit reached for",  # the "Keep trying / Stop" dialog's title
        r"(?i)exhausted your (daily )?quota",
        r"(?i)experiencing high demand",
    ),
    # GEMINI_CLI_TRUST_WORKSPACE trusts the worker's folder (no trust dialog); with CI=true in its
    # environment (a CI job running `teleclaude run`) gemini 0.61 skips its interactive UI and exits 42;
    # GEMINI_CLI_NO_RELAUNCH: one node process a worker, not two. Without it gemini 0.61 loads its 17 MB
    # bundle, starts itself again in a child with this variable set (for a larger heap limit, and to start
    # again after a dialog's "press r to restart", which no worker presses) and waits for it: the child's
    # run is the same, the parent's ~1.2 s of CPU and its memory are saved (NOTES.md)
    env={"GEMINI_CLI_TRUST_WORKSPACE": "true", "CI": "false", "GEMINI_CLI_NO_RELAUNCH": "true"},
    # it retries 429 and 503 silently for minutes under ` ⠦ Thinking... (esc to cancel, 8m 11s)`; a
    # running shell command shows the same row under its box `│ ⊶  Shell sleep 12` (⊶ and ⊷ alternate),
    # a running hook as ` ⠦ Executing Hook: teleclaude-stop (esc to cancel, 12s)`
    api_wait=r"\(esc to cancel, (\d+[hms] ?)+\)",
    # with `ui.errorVerbosity = "full"` its spinner says so while it retries (from the 0.61 bundle)
    retry=r"\bTrying to reach .+ \(Attempt \d+/\d+\)",
    # a tool's box while it runs (⊷), or while it waits to (o: scheduled, its BeforeTool hook first)
    tool_running=r"^\s*│\s*(?:[⊶⊷]|o\s)|\bExecuting Hook:",
    # its suggestion under a typed ` * /next-build`, once its commands are loaded:
    # ` next-build   Builder - do every open task …` (nothing is listed while they load)
    command_listed=r"^\s*{name}\s{2,}\S",
    blockers=(
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
    hooks=Hooks(
        (
            ("AfterAgent", "stop"),
            # before every tool call (no matcher: every tool), with PreToolUse's fields (NOTES.md)
            ("BeforeTool", "tool-use"),
            # before its model is asked for a message: its conversation (`session_id`, `transcript_path`)
            ("BeforeAgent", "prompt"),
        ),
        refusal="deny",  # the reason becomes the agent's next prompt
        stop_prompt=True,  # its AfterAgent input's `prompt` is what the model was sent
    ),
    install=Install(
        ".gemini", command_file="{folder}/commands/{name}.toml", command_text=command_toml, named_hooks=True
    ),
    # 0.61 reads quota only for a Google login (Code Assist's `retrieveUserQuota`: per model a
    # `remainingFraction` and `resetTime`), and shows it on screen only (`/stats model`); no hook input, file
    # or response header carries it, and with an API key there is none (tests/realcli/NOTES.md)
    usage=UsageReport(
        lacking="gemini 0.61 reports no usage before a limit to anything outside its screen: only a Google "
        "login's quota in /stats model; its limits are read from its errors and dialogs"
    ),
    sandbox=SandboxNeeds((".gemini",)),  # its settings, login and chats
    colour="#4285f4",
    resume=RESUME,
    # "Trust this folder?" replaces its prompt ~0.25 s after it shows
    prompt_stable=0.5,
    settle=0.1,
    tokens=TokenReport(
        session_tokens,
        prices={
            "gemini-2.5-pro": Price(1.25, 0.31, 10.0),
            "gemini-2.5-flash": Price(0.3, 0.075, 2.5),
            "gemini-2.5-flash-lite": Price(0.1, 0.025, 0.4),
            "gemini-3-pro": Price(2.0, 0.2, 12.0),
        },
    ),
    lacks={
        Capability.LIMIT_BY_HOOK: "none of its hooks reports a turn its API refused (AfterAgent runs for a "
        "turn that ended, BeforeTool before a tool), and it keeps no typed error teleclaude reads: its "
        "limits are read from its screen (its quota dialog) and by the api_wait rule",
    },
)
