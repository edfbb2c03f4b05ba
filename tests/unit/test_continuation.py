"""How a worker takes up a step its item's last worker left (runtime/core/continuation.py), and the note it is
handed when it is another agent's (runtime/core/handover.py)."""

from __future__ import annotations

from datetime import UTC, timedelta
from functools import partial

from teleclaude.agents import PROFILES
from teleclaude.agents.claude import PROFILE as CLAUDE
from teleclaude.planner.core.terminal import untypable
from teleclaude.runtime.core.continuation import (
    How,
    decide,
    left_step,
    not_replayed,
    past_replay,
    replay_shown,
    resume_line,
    step_began,
)
from teleclaude.runtime.core.handover import Facts, note, ticked_since
from teleclaude.runtime.core.limits import find_limit
from teleclaude.runtime.core.screens import waiting_for_input
from teleclaude.runtime.core.sessions import PaneView, SessionState, seen_of, unseen_rows

from .factories import T0, running_session

CONVERSATION = "0871d1b2-364d-489f-9d38-90152fe2f384"
UUID = CLAUDE.resume.id_pattern if CLAUDE.resume else None
killed = partial(running_session, state=SessionState.ERRORED, conversation=CONVERSATION)


def test_the_item_s_last_worker_of_the_same_step_is_taken_up():
    build = killed(id="b1")
    assert left_step([build], "next-build", "greeting") == build
    assert left_step([build], "/next-build", "greeting") == build  # however the command is spelled


def test_a_new_round_of_the_step_or_a_live_worker_is_not_taken_up():
    build = killed(id="b1")
    review = running_session(
        id="r1", command="next-review", state=SessionState.DONE, created_at=T0 + timedelta(1)
    )
    assert left_step([build, review], "next-build", "greeting") is None  # a review came between
    assert left_step([running_session()], "next-build", "greeting") is None  # still working
    assert left_step([build], "next-build", "other-item") is None
    never_delivered = killed(delivered_at=None)
    assert left_step([never_delivered], "next-build", "greeting") is None


def test_the_step_began_with_the_first_of_its_workers_in_a_row():
    review = running_session(id="r0", command="next-review", state=SessionState.DONE, created_at=T0)
    first = killed(id="b1", created_at=T0 + timedelta(minutes=1))
    second = killed(id="b2", created_at=T0 + timedelta(minutes=2))
    assert step_began([second, review, first], second) == first


def test_the_same_agent_resumes_its_conversation():
    decision = decide(killed(), "claude", UUID, recorded=True, open_elsewhere=False)
    assert decision.how is How.RESUME and decision.previous is not None


def test_another_agent_takes_it_over_with_a_note():
    assert decide(killed(), "codex", None, recorded=False, open_elsewhere=False).how is How.HAND_OVER


def test_what_keeps_a_resume_from_happening_is_a_fresh_start_with_its_reason():
    cases = {
        "cannot": decide(killed(), "claude", None, True, False),
        "never said": decide(killed(conversation=""), "claude", UUID, True, False),
        "form": decide(killed(conversation="--help; rm -rf /"), "claude", UUID, True, False),
        "gone": decide(killed(), "claude", UUID, False, False),
        "another worker": decide(killed(), "claude", UUID, True, True),
        "another computer": decide(killed(), "claude", UUID, True, False, here=False),
    }
    for words, decision in cases.items():
        assert decision.how is How.FRESH and words in decision.why, (words, decision)
    assert decide(None, "claude", UUID, True, False).why == ""  # nothing was left: nothing to say


def test_a_conversation_not_in_the_cli_s_form_never_reaches_its_command_line():
    assert CLAUDE.resume_argv("claude", "med", CONVERSATION) == [
        "claude",
        "--dangerously-skip-permissions",
        "--model",
        "sonnet",
        "--resume",
        CONVERSATION,
    ]
    assert CLAUDE.resume_argv("claude", "med", "--print") is None
    assert CLAUDE.resume_argv("claude", "med", "") is None


def test_each_cli_that_resumes_takes_only_an_id_of_its_own_form():
    ids = {
        "claude": CONVERSATION,
        "codex": CONVERSATION,
        "gemini": CONVERSATION,
        "opencode": "ses_3a3fb1c42ffeAbCdEfGhIjKlMn",
    }
    for name, profile in PROFILES.items():
        argv = profile.resume_argv(name, "med", ids[name])
        assert argv is not None and argv[0] == name and argv[-1] == ids[name], (name, argv)
        for bad in ("--print", "", "ses_../../x", f"{ids[name]} --yolo"):
            assert profile.resume_argv(name, "med", bad) is None, (name, bad)


LIMIT = "● API Error: Request rejected (429) · This request would exceed the rate limit"
# claude resumed: the conversation replayed above its input box, its old limit error in it
REPLAYED = [
    "╭─── Claude Code ───╮",
    "",
    "❯ /next-build greeting",
    "● Bash(printf 'first')",
    LIMIT,
    "",
    "─" * 20,
]
AT_PROMPT = [*REPLAYED, "❯ ", "─" * 20, "  ⏵⏵ bypass permissions on", "", ""]


def view(alternate: bool = False, history: int = 0, cursor_y: int = 7) -> PaneView:
    return PaneView("%1", 42, history, 50000, cursor_y, len(AT_PROMPT), alternate, False)


def test_a_resumed_worker_is_read_from_its_input_on_and_its_replayed_rows_are_no_new_output():
    cursor, replayed = past_replay(view(history=30), AT_PROMPT, CLAUDE.prompt)
    assert (cursor.line, cursor.base, cursor.anchor) == (37, 0, "")  # its input's row, with no anchor
    # the CLI paints the whole conversation again below, then its new turn
    painted = [*REPLAYED, "❯ Your session was interrupted; go on", "● Bash(git commit)", LIMIT + " (new)"]
    assert [row for row in not_replayed(painted, replayed) if row.strip()] == [
        "❯ Your session was interrupted; go on",
        "● Bash(git commit)",
        LIMIT + " (new)",
    ]
    assert not_replayed(painted, ()) == painted  # a worker not resumed: every row is output
    # a terminal cursor above the input row: read from there (a read returns the rows above the cursor)
    assert past_replay(view(cursor_y=2), AT_PROMPT, CLAUDE.prompt)[0].line == 2


def test_a_resumed_worker_on_the_alternate_screen_has_seen_every_row_shown_at_its_prompt():
    cursor, seen = past_replay(view(alternate=True), AT_PROMPT, CLAUDE.prompt)
    assert unseen_rows([*AT_PROMPT, "┃ new"], seen)[0] == ["┃ new"]


def test_a_conversation_painted_after_the_prompt_stood_still_is_no_new_output():
    """A loaded CLI on the alternate screen may show its prompt, stand still, and only then paint the
    conversation it resumed: the rows the session it resumes last read count as replayed."""
    before = seen_of(AT_PROMPT)  # the limited worker's screen, as the observer last read it
    prompt_only = ["┃ ", "", "  ctrl+p commands"]
    cursor, seen = past_replay(view(alternate=True), prompt_only, CLAUDE.prompt, before)
    painted = [*REPLAYED, "┃ Your session was interrupted; go on", *prompt_only]
    assert unseen_rows(painted, seen)[0] == ["┃ Your session was interrupted; go on"]
    # the same limit hit again is new: shown once more than the conversation showed it
    assert unseen_rows([*painted, LIMIT], seen)[0] == ["┃ Your session was interrupted; go on", LIMIT]
    # on the normal screen too (the rows above its input as well as those read before)
    _, replayed = past_replay(view(), AT_PROMPT, CLAUDE.prompt, seen_of(["● an older row"]))
    assert not_replayed(["● an older row", LIMIT, "● new"], replayed) == ["● new"]


def test_the_resumed_worker_is_told_what_happened_in_one_typable_line():
    line = resume_line(killed(last_error="exit status 137\n\x1b[31mred"), "/next-build greeting")
    assert line.endswith("go on with /next-build greeting") and untypable(line) is None
    assert "limit" in resume_line(killed(state=SessionState.RATE_LIMITED), "/next-build greeting")


PLAN_BEFORE = "# Plan\n\n## Group 1\n\n- [x] One\n- [ ] Two\n- [ ] Three\n"
PLAN_NOW = "# Plan\n\n## Group 1\n\n- [x] One\n- [x] Two\n- [ ] Three\n"


def test_the_boxes_ticked_since_the_step_began():
    assert ticked_since(PLAN_BEFORE, PLAN_NOW) == ("Two",)
    assert ticked_since("", PLAN_NOW) == ("One", "Two")


def test_the_note_says_the_facts_on_one_typable_line():
    facts = Facts(
        "claude",
        "abcd1234",
        "its agent hit a usage limit",
        commits=("f00d123 Build greeting",),
        ticked=("Two",),
        status="built task two\n\x1b]52;c;evil\x07, tests pass",
        tools=("Bash: git commit -m x",),
    )
    text = note(facts)
    assert untypable(text) is None
    for fact in ("claude tc-abcd1234", "usage limit", "f00d123 Build greeting", "Two", "Bash: git commit"):
        assert fact in text
    assert "built task two\\x0a\\x1b]52" in text  # escaped, not obeyed


def test_the_note_is_bounded_whatever_the_facts():
    many = tuple(f"{n:07x} " + "word " * 60 for n in range(50))
    facts = Facts(
        "claude", "abcd1234", "its CLI exited", commits=many, ticked=many, status="s" * 5000, tools=many
    )
    text = note(facts, limit=300)
    assert len(text) <= 300 and untypable(text) is None
    short = Facts(
        "claude", "abcd1234", "its CLI exited", commits=tuple(f"{n:07x} Task {n}" for n in range(9))
    )
    assert "(+5 more)" in note(short)


def test_a_note_with_nothing_done_says_so():
    assert "nothing committed or ticked" in note(Facts("codex", "abcd1234", "its CLI exited"))


GEMINI_BEFORE_ITS_REPLAY = [
    "⚠  Warning: True color (24-bit) support not detected.",
    "                                                      ? for shortcuts",
    "─" * 60,
    " YOLO Ctrl+Y                                          1 MCP server",
    " *   Type your message or @path/to/file",
    " workspace (/directory)                 branch        sandbox        /model",
]
GEMINI_REPLAYED = [
    " ▝▜▄     Gemini CLI v0.61.0",
    "Tips for getting started:",
    " > /next-build greeting",
    "╭" + "─" * 58 + "╮",
    "│ ✓  Shell printf 'first\\n' > todos/greeting/notes.md" + " " * 5 + "│",
    "╰" + "─" * 58 + "╯",
    " > [Function Response: run_shell_command]",
    *GEMINI_BEFORE_ITS_REPLAY,
]


def test_a_resumed_gemini_is_typed_into_only_once_it_painted_its_conversation_again():
    """gemini shows its prompt before it loads the chat it resumes, and loses a line typed meanwhile."""
    gemini, claude = PROFILES["gemini"].resume, CLAUDE.resume
    assert gemini is not None and claude is not None
    replayed = gemini.replayed
    assert not replay_shown(GEMINI_BEFORE_ITS_REPLAY, replayed)
    assert replay_shown(GEMINI_REPLAYED, replayed)
    assert replay_shown(GEMINI_BEFORE_ITS_REPLAY, claude.replayed)  # its prompt comes after it


def sided(main: str, side: str = "") -> str:
    """A row of opencode's 200-column screen, its sidebar from column 160."""
    return (main.ljust(160) + side).rstrip()


# opencode 1.18.33 resumed (`opencode --session ID`, the limit-and-resume scenario): its screen at its prompt
# 1.3 s before it painted the conversation (load ~15), then its last rows once painted
OPENCODE_INPUT = [
    "  ┃",
    sided("  ┃", "/tmp/pytest-of-root/pytest-1508/"),
    sided("  ┃", "test_a_limit_makes_it_unavaila0/"),
    sided("  ┃  Build · Scripted Model Scripted", "project:main"),
    "  ╹" + "▀" * 197,
]
OPENCODE_BEFORE_ITS_REPLAY = [
    "",
    sided("", "OK"),
    "",
    sided("", "Context"),
    sided("", "0 tokens"),
    sided("", "0% used"),
    sided("", "$0.00 spent"),
    "",
    sided("", "LSP"),
    sided("", "LSPs are disabled"),
    *[""] * 33,
    *OPENCODE_INPUT,
    "   /tmp/pytest-of-root/pytest-1508/test_a_limit_makes_it_unavaila0/project"
    + " " * 55
    + "tab agents  ctrl+p commands    • OpenCode 1.18.33",
]
OPENCODE_LIMIT = "  ┃  Rate limit reached for requests. Please try again in 20s."
OPENCODE_REPLAYED = [
    "  ┃  - Never merge, rebase, push, force-push, stash or switch branches.",
    "  ┃",
    "",
    "  ┃",
    "  ┃  $ printf 'first\\n' > todos/greeting/notes.md",
    "  ┃",
    "  ┃  (no output)",
    "  ┃",
    "",
    "  ┃",
    OPENCODE_LIMIT,
    "  ┃",
    "",
    "     ▣  Build · Scripted Model",
    "",
    *OPENCODE_INPUT,
    "   /tmp/pytest-of-root/pytest-1508/test_a_limit_makes_it_unavaila0/project"
    + " " * 61
    + "1.3K  ctrl+p commands    • OpenCode 1.18.33",
]


def test_a_resumed_opencode_is_started_once_it_painted_its_conversation_its_old_limit_no_new_one():
    """opencode shows its empty prompt before it paints the conversation it resumes (longer under load):
    read from that screen on, its replayed `Rate limit reached` row was a new limit, and the resumed worker
    was limited again by a limit that was over."""
    opencode = PROFILES["opencode"]
    assert opencode.resume is not None
    replayed, prompt, busy = opencode.resume.replayed, opencode.prompt, opencode.busy
    assert waiting_for_input(OPENCODE_BEFORE_ITS_REPLAY, prompt, busy)  # its prompt, yet no conversation
    assert not replay_shown(OPENCODE_BEFORE_ITS_REPLAY, replayed)
    assert replay_shown(OPENCODE_REPLAYED, replayed) and waiting_for_input(OPENCODE_REPLAYED, prompt, busy)
    alternate = PaneView("%1", 42, 0, 50000, 44, 50, True, False)
    now = T0 + timedelta(hours=1)
    # its start taken once the conversation is painted: the old limit is no new output, the new turn is
    _, seen = past_replay(alternate, OPENCODE_REPLAYED, prompt)
    typed = ["  ┃  Your session was interrupted (its agent hit a usage limit); go on with /next-build"]
    new, _ = unseen_rows([*OPENCODE_REPLAYED[:-6], *typed, *OPENCODE_REPLAYED[-6:]], seen)
    assert new == typed and find_limit("opencode", new, now, UTC, opencode.limit_patterns) is None
    # taken at its prompt before, as it was: the replayed limit read as new
    _, too_early = past_replay(alternate, OPENCODE_BEFORE_ITS_REPLAY, prompt)
    new, _ = unseen_rows(OPENCODE_REPLAYED, too_early)
    assert find_limit("opencode", new, now, UTC, opencode.limit_patterns) is not None
