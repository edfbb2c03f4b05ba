"""Gemini CLI 0.61 and Codex CLI 0.169 as seen for real (tests/realcli/NOTES.md): their limit wordings and
reset times, their prompts, dialogs and refusals."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.agents import PROFILES
from teleclaude.agents.codex import failure_kind, last_turn_error
from teleclaude.runtime.core.blockers import find_blocker, refused_command, unexpanded_command
from teleclaude.runtime.core.limits import find_limit
from teleclaude.runtime.core.screens import (
    command_listed,
    command_taken,
    prompt_visible,
    shown_as_message,
    shows_part_of,
    shows_typed,
    waiting_for_input,
)

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
HOUR = NOW + timedelta(hours=1)


def test_a_limit_in_a_dialog_is_reported_without_the_dialogs_borders():
    row = "│ Usage limit reached for gemini-3.8-flash." + " " * 60 + "│"
    hit = find_limit("gemini", ["╭" + "─" * 70 + "╮", row, "│ ● 1. Keep trying" + " " * 50 + "│"], NOW, UTC)
    assert hit is not None and hit.reason == "quota_exhausted"
    assert hit.line == row[1:-1].strip()


@pytest.mark.parametrize(
    ("agent", "rows", "until", "reason"),
    [
        (
            "codex",
            [
                "■ You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit",
                "https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Nov 26th,",
                "2026 2:21 AM.",
            ],
            datetime(2026, 11, 26, 2, 22, tzinfo=UTC),  # the end of the minute printed
            "quota_exhausted",
        ),
        (
            "codex",
            ["■ You've hit your usage limit. Try again at Nov 23rd 2:04 PM."],
            datetime(NOW.year, 11, 23, 14, 5, tzinfo=UTC),
            "quota_exhausted",
        ),
        ("codex", ["■ You’re out of credits. Add credits to continue."], HOUR, "quota_exhausted"),
        ("codex", ["■ You’ve reached your workspace credit limit."], HOUR, "quota_exhausted"),
        (
            "codex",
            ["■ exceeded retry limit, last status: 429 Too Many Requests, request id: req_1"],
            HOUR,
            "rate_limited",
        ),
        (
            "codex",
            ["■ We’re currently experiencing high demand, which may cause temporary errors."],
            HOUR,
            "overloaded",
        ),
        ("codex", ["■ unexpected status 503 Service Unavailable: overloaded"], HOUR, "overloaded"),
        ("gemini", ["Usage limit reached for all Pro models."], HOUR, "quota_exhausted"),
        (
            "gemini",
            ["✕ [API Error: You have exhausted your daily quota on this model.]"],
            HOUR,
            "quota_exhausted",
        ),
        (
            "gemini",
            ["We are experiencing high demand right now. Please try again later."],
            HOUR,
            "overloaded",
        ),
        (
            "gemini",
            ['✕ [API Error: {"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}]'],
            HOUR,
            "quota_exhausted",
        ),
    ],
)
def test_real_limit_wordings_and_their_resets(agent, rows, until, reason):
    hit = find_limit(agent, ["some output", *rows, "› "], NOW, UTC)
    assert hit is not None
    assert (hit.until, hit.reason) == (until, reason)


@pytest.mark.parametrize(
    "row",
    [
        "• Server is busy, reconnecting 1/5 (in 20s)…",  # codex is still retrying: not yet a limit
        "⠦ Thinking... (esc to cancel, 8m 11s)",  # gemini's silent retries
        "Fixed the 429 handling in client.py",
    ],
)
def test_retries_and_ordinary_output_are_not_limits(row):
    assert find_limit("codex", [row], NOW, UTC) is None
    assert find_limit("gemini", [row], NOW, UTC) is None


# what codex 0.169 shows while it retries (the last error under its spinner), and when it gives up
CODEX_RETRYING = [
    (
        "• Server is busy, reconnecting 2/5 (4s • esc to interrupt)",
        "  └ Exceeded retry limit, last status: 429 Too Many Requests, request id: req_1",
    ),
    (
        "◦ Reconnecting... 1/5 (4s • esc to interrupt)",
        "  └ We’re currently experiencing high demand, which may cause temporary errors.",
    ),
    (
        "◦ Reconnecting... 1/5 (16s • esc to interrupt)",
        "  └ Selected model is at capacity. Please try a different model.",
    ),
]


@pytest.mark.parametrize("rows", CODEX_RETRYING)
def test_what_codex_shows_while_it_retries_is_busy_waiting_on_the_api_not_a_limit(rows):
    profile = PROFILES["codex"]
    screen = ["› $next-build x", *rows, "› Ask Codex to do anything", "  gpt-5.1-codex medium · /p"]
    assert find_limit("codex", screen, NOW, UTC) is None
    assert not waiting_for_input(screen, profile.prompt, profile.busy)  # its prompt line stays meanwhile
    assert re.search(profile.retry, rows[0])


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("■ exceeded retry limit, last status: 500 Internal Server Error, request id: req_1", "server_error"),
        ("■ Selected model is at capacity. Please try a different model.", "overloaded"),
    ],
)
def test_the_error_codex_gives_up_with_is_a_limit(row, reason):
    hit = find_limit("codex", ["› $next-build x", row, "› Ask Codex to do anything"], NOW, UTC)
    assert hit is not None and hit.reason == reason


def test_the_idle_codex_screen_waits_for_input():
    profile = PROFILES["codex"]
    idle = ["• Done.", "  Worked for 1s • 16:25", "› Ask Codex to do anything", "  gpt-5.1-codex medium · /p"]
    assert waiting_for_input(idle, profile.prompt, profile.busy)


GEMINI_IDLE = [
    "╰─────╯",
    "─" * 60,
    " YOLO Ctrl+Y                                          1 MCP server",
    " *   Type your message or @path/to/file",
    " workspace (/directory)             sandbox            /model",
    " /tmp/project                       no sandbox          Auto",
]


def test_gemini_prompt_matches_its_idle_screen_not_a_typed_line():
    prompt = PROFILES["gemini"].prompt
    assert prompt_visible(GEMINI_IDLE, prompt)
    typed = [row.replace("*   Type your message or @path/to/file", "* /next-build x") for row in GEMINI_IDLE]
    assert not prompt_visible(typed, prompt)


def test_gemini_lists_a_typed_command_only_once_it_knows_it():
    """Under ` * /next-build` gemini 0.61 suggests ` next-build   Builder - …` once its commands are loaded;
    while they load (or for an unknown command) the typed line stands alone."""
    pattern = PROFILES["gemini"].command_listed
    typed = [row.replace("*   Type your message or @path/to/file", "* /next-build") for row in GEMINI_IDLE]
    assert not command_listed(typed, pattern, "next-build")
    at = next(i for i, row in enumerate(typed) if "* /next-build" in row) + 1
    listed = [*typed[:at], " next-build   Builder - do every open task in Groups 1-4 of a plan", *typed[at:]]
    assert command_listed(listed, pattern, "next-build")
    assert not command_listed(listed, pattern, "next")  # another command's name is no proof
    prefixed = [row.replace("next-build", "my.next-build") for row in listed]
    assert command_listed(prefixed, pattern, "my.next-build")
    assert not command_listed(prefixed, pattern, "myXnext-build")  # the name is literal, not a regex


# opencode 1.18's input box, its commands popup open over it, as a loaded machine showed it between the
# launcher's Backspaces: nine of the ten typed after `/next-build` taken, the last on its way
OPENCODE_ERASING = [
    "  ┃ /agents              Switch agent                                       ┃",
    "  ┃ /mcps                Toggle MCPs                                        ┃",
    "  ┃",
    "  ┃  /",
    "  ┃",
    "  ┃  Build · Scripted Model Scripted",
    "  ╹▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀▀",
    "                                                   tab agents  ctrl+p commands",
]


def test_an_opencode_input_still_holding_the_commands_slash_is_not_yet_empty():
    """Its prompt pattern matches the box's bare border rows, so only the typed remnant tells that the line is
    not erased yet: the command typed whole into the open popup would be lost (its space empties the line)."""
    profile = PROFILES["opencode"]
    assert waiting_for_input(OPENCODE_ERASING, profile.prompt, profile.busy)
    assert shows_part_of(OPENCODE_ERASING, "/next-build")
    erased = [row for row in OPENCODE_ERASING if "/" not in row]
    empty = [*erased[:1], '  ┃  Ask anything… "What is the tech stack of this project?"', *erased[1:]]
    assert not shows_part_of(empty, "/next-build")
    assert shows_part_of(["  ┃  /next-bu"], "/next-build")
    assert not shows_part_of(["  ┃  /next-build greeting"], "/next-build")  # the whole line is not a remnant


def test_a_typed_line_shows_in_one_row_or_wrapped_over_several():
    """Enter waits until the CLI has drawn the typed line (it has read its keys): gemini wraps a long one."""
    line = "* Turn 14: say done."
    typed = [row.replace("*   Type your message or @path/to/file", line) for row in GEMINI_IDLE]
    assert shows_typed(typed, "Turn 14: say done.")
    assert not shows_typed(GEMINI_IDLE, "Turn 14: say done.")
    assert not shows_typed([" * Turn 14: say"], "Turn 14: say done.")  # its last keys not read yet
    wrapped = ["  ┃  Read the plan again and tick the", "  ┃  boxes you finished ┃", "  ┃"]
    assert shows_typed(wrapped, "Read the plan again and tick the boxes you finished")
    assert not shows_typed(wrapped, "Read the plan again and tick the boxes you finished now")


def test_the_dialogs_are_recognised():
    trust = find_blocker("gemini", ["│ Do you trust the files in this folder?  │"])
    assert trust is not None and trust.name == "the folder trust dialog"
    quota = ["Usage limit reached for all Pro models.", "● 1. Keep trying", "  2. Stop"]
    limit = find_blocker("gemini", quota)
    assert limit is not None and limit.rate_limit
    trust = find_blocker("codex", ["  Trust this folder? Codex can read, edit …"])
    assert trust is not None and trust.name == "the folder trust dialog"
    hooks = find_blocker("codex", ["  Hooks need review", "  1 hook is new or changed."])
    assert hooks is not None and hooks.name == "the hooks review dialog"
    assert find_blocker("gemini", GEMINI_IDLE) is None
    assert find_blocker("codex", ["› Ask Codex to do anything"]) is None


def test_a_refused_command_is_found_with_the_clis_words_and_is_no_dialog():
    said = "• Unrecognized command '/prompts:next-build'. Type \"/\" for a list of supported commands."
    refusal = refused_command("codex", ["› /prompts:next-build x", said])
    assert refusal is not None and refusal.startswith("Unrecognized command '/prompts:next-build'")
    assert refused_command("codex", ["› $next-build x", "• Done."]) is None
    assert find_blocker("codex", ["› /prompts:next-build x", said]) is None


def test_a_command_line_the_model_got_as_typed_was_not_expanded():
    """gemini 0.61's AfterAgent `prompt` after an unknown /command: the session context, then the line."""
    typed = PROFILES["gemini"].slash_command("no-such-command", "greeting")
    assert unexpanded_command("<session_context>…</session_context>\n/no-such-command greeting\n", typed)
    expanded = "<session_context>…</session_context>\nYou are the **builder** for the work item `greeting`."
    assert not unexpanded_command(expanded, PROFILES["gemini"].slash_command("next-build", "greeting"))
    assert not unexpanded_command("Turn 2: say done.", typed)
    # a command without {{args}}: gemini appends the typed line to the command's own text
    assert not unexpanded_command("Check the build.\n\n/no-such-command greeting", typed)


def test_geminis_loop_detection_dialog_is_a_blocker():
    rows = [
        " │ ?  A potential loop was detected",
        " │ ● 1. Keep loop detection enabled (esc)",
        " │   2. Disable loop detection for this session",
    ]
    found = find_blocker("gemini", rows)
    assert found is not None and found.name == "the loop detection dialog" and not found.rate_limit
    assert find_blocker("gemini", ["✦ I kept loop detection enabled."]) is None


def test_a_codex_skill_without_arguments_ends_in_a_space_that_closes_its_skill_list():
    codex = PROFILES["codex"]
    assert codex.slash_command("next-work", "") == "$next-work "  # Enter would pick from the list instead
    assert codex.slash_command("next-build", "x") == "$next-build x"
    assert PROFILES["claude"].slash_command("next-work", "") == "/next-work"


def rollout(*payloads: dict) -> list[str]:
    return [json.dumps({"timestamp": "…", "type": "event_msg", "payload": p}) for p in payloads]


STARTED = {"type": "task_started", "turn_id": "t1"}


@pytest.mark.parametrize(
    ("info", "kind"),
    [
        ("usage_limit_exceeded", "rate_limit"),
        ({"response_too_many_failed_attempts": {"http_status_code": 429}}, "rate_limit"),
        ({"response_too_many_failed_attempts": {"http_status_code": 500}}, "server_error"),
        ("server_overloaded", "overloaded"),
        ("internal_server_error", "server_error"),
        ("unauthorized", "authentication_failed"),
        ("context_window_exceeded", "context_window_exceeded"),  # not a limit: the turn ended
    ],
)
def test_codexs_typed_error_from_its_rollout_file(info, kind):
    error = {"message": "■ words", "codex_error_info": info}
    lines = rollout(STARTED, {"type": "task_complete", "completed_at": 1795451360, "error": error})
    found = last_turn_error(["{cut line", *lines])
    assert found is not None and found.info == info and found.message == "■ words"
    assert found.completed_at == datetime.fromtimestamp(1795451360, UTC)
    assert failure_kind(found.info) == kind == found.kind


def test_a_completed_or_newer_turn_in_the_rollout_file_is_no_error():
    failed = {"type": "task_complete", "completed_at": 1, "error": {"message": "x", "codex_error_info": "y"}}
    assert last_turn_error(rollout(STARTED, {"type": "task_complete", "completed_at": 1})) is None
    assert last_turn_error(rollout(STARTED, failed, STARTED, {"type": "token_count"})) is None
    assert last_turn_error(rollout(STARTED, failed, {"type": "turn_aborted"})) is None
    assert last_turn_error([]) is None


def test_a_refused_command_says_the_fix_of_the_clis_own_table_row():
    from teleclaude.agents import PROFILES
    from teleclaude.agents.profile import Kind
    from teleclaude.runtime.core.blockers import refusal_text

    for agent in ("codex", "gemini"):
        (row,) = [b for b in PROFILES[agent].blockers if b.kind is Kind.COMMAND]
        text = refusal_text(agent, "the CLI's words")
        assert "the CLI's words" in text.splitlines()[0] and row.fix in text


def test_an_opencode_command_line_is_taken_when_its_text_shows_and_sent_as_typed_when_the_line_does():
    """After Enter: a line of the command's text on the screen says opencode expanded it; the typed line
    shown as a message once more than before typing says it went to the model as typed; else not yet."""
    expansion = ("You are the **builder** for the work item `greeting`.",)
    expanded = [
        "  ┃  - Never merge, rebase, push.",
        "  ┃  You are the **builder** for the work item `greeting`.",
    ]
    as_typed = ["  ┃  /next-build greeting                                    Context", "  ┃", "  ┃  Build"]
    assert command_taken(expanded, "/next-build greeting", expansion, 0) is True
    assert command_taken(as_typed, "/next-build greeting", expansion, 0) is False
    assert command_taken(as_typed, "/next-build greeting", expansion, 1) is None  # shown before: no news
    assert command_taken(["  ┃", "  ┃  Build"], "/next-build greeting", expansion, 0) is None
    assert shown_as_message(["  ┃  /next-build greetings"], "/next-build greeting") == 0
