"""Reading a pane's output by cursor, on a simulated pane whose history rolls over like tmux's."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from teleclaude.runtime.core.screens import observe_idle, prompt_visible
from teleclaude.runtime.core.sessions import (
    RECORDED,
    TRANSITIONS,
    Change,
    Cursor,
    EventKind,
    IllegalTransition,
    InvalidCursor,
    PaneView,
    Session,
    SessionState,
    read_since,
    seen_of,
    transition,
    unseen_rows,
)

from .factories import running_session


@dataclass
class Pane:
    """Finished rows plus the cursor's row; tmux keeps `limit` rows of history above `height` visible rows."""

    height: int = 5
    limit: int = 10
    rows: list[str] = field(default_factory=list)
    partial: str = ""
    alternate: list[str] | None = None
    pid: int = 42
    pane_id: str = "%1"

    def print(self, *rows: str) -> None:
        self.rows += rows

    @property
    def kept(self) -> int:
        return min(len(self.rows) + 1, self.limit + self.height)

    def view(self) -> PaneView:
        history = max(0, self.kept - self.height)
        cursor_y = self.kept - history - 1
        alternate = self.alternate is not None
        return PaneView(self.pane_id, self.pid, history, self.limit, cursor_y, self.height, alternate, False)

    def capture(self, start: int, end: int) -> list[str]:
        if self.alternate is not None:
            return [(self.alternate + [""] * self.height)[row] for row in range(start, end + 1)]
        history = self.view().history_size
        oldest = len(self.rows) + 1 - self.kept
        everything = self.rows + [self.partial]
        out = []
        for row in range(start, end + 1):
            index = oldest + history + row
            out.append(everything[index] if oldest <= index < len(everything) else "")
        return out

    def read(self, cursor: Cursor | None, max_lines: int = 1000, max_bytes: int = 100_000):
        return read_since(self.view(), cursor, self.capture, max_lines, max_bytes)


def start_of(view):
    return Cursor.start(view.pane_id, view.pane_pid)


def numbered(start: int, stop: int) -> list[str]:
    return [f"row {n}" for n in range(start, stop)]


def test_first_read_is_the_visible_screen_then_only_new_rows():
    pane = Pane()
    pane.print(*numbered(1, 13))
    first = pane.read(None)
    assert first.rows == tuple(numbered(9, 13))  # the 4 finished rows on a 5-row screen
    pane.print(*numbered(13, 16))
    second = pane.read(first.cursor)
    assert second.rows == tuple(numbered(13, 16))
    assert pane.read(second.cursor).rows == ()


def test_growing_output_read_three_times_repeats_and_loses_nothing():
    pane = Pane(limit=1000)
    seen: list[str] = []
    cursor = None
    for stop in (20, 57, 140):
        pane.print(*numbered(len(pane.rows) + 1, stop))
        chunk = pane.read(cursor) if cursor else pane.read(start_of(pane.view()))
        seen += chunk.rows
        cursor = chunk.cursor
    assert seen == numbered(1, 140)


def test_bounded_reads_continue_where_they_stopped():
    pane = Pane(limit=1000)
    pane.print(*numbered(1, 101))
    cursor, seen = start_of(pane.view()), []
    while True:
        chunk = pane.read(cursor, max_lines=7, max_bytes=40)
        seen += chunk.rows
        cursor = chunk.cursor
        if not chunk.truncated:
            break
    assert seen == numbered(1, 101)


def test_rows_rolled_off_between_reads_are_skipped_and_counted_as_found():
    pane = Pane(limit=10)
    pane.print(*numbered(1, 8))
    chunk = pane.read(start_of(pane.view()))
    pane.print(*numbered(8, 16))  # 8 new rows: the history (10) drops the oldest ones, not the anchor
    later = pane.read(chunk.cursor)
    assert later.lines_missed == 0
    assert later.rows == tuple(numbered(8, 16))


def test_rows_lost_to_roll_over_are_reported():
    pane = Pane(limit=10)
    pane.print(*numbered(1, 8))
    chunk = pane.read(start_of(pane.view()))
    pane.print(*numbered(8, 60))
    later = pane.read(chunk.cursor)
    assert later.lines_missed is None  # unknown how many: the last row read rolled off too
    assert later.rows[-1] == "row 59"
    assert set(later.rows) <= set(numbered(8, 60))


def test_a_cleared_history_is_reported_not_silently_misread():
    pane = Pane(limit=100)
    pane.print(*numbered(1, 30))
    chunk = pane.read(start_of(pane.view()))
    pane.rows = ["after clear"]  # `clear-history` and a cleared screen
    later = pane.read(chunk.cursor)
    assert later.lines_missed is None
    assert later.rows == ("after clear",)


def test_cursor_of_another_pane_or_a_respawned_pane_is_refused():
    pane = Pane()
    pane.print("x")
    cursor = pane.read(None).cursor
    pane.pid = 43
    with pytest.raises(InvalidCursor):
        pane.read(cursor)
    with pytest.raises(InvalidCursor):
        Cursor.decode("not a cursor")
    assert Cursor.decode(cursor.encode()) == cursor


def test_a_cursor_of_a_pane_on_another_computer_reads_back():
    """Its pane id carries the computer's name (`box:%3`): a cursor that did not read back made the observer
    skip every new row of a remote worker (its limits, refusals and progress went unseen)."""
    pane = Pane()
    pane.pane_id = "loopback-ssh:%3"
    pane.print("a")
    cursor = pane.read(None).cursor
    assert Cursor.decode(cursor.encode()) == cursor
    pane.print("b")
    assert pane.read(Cursor.decode(cursor.encode())).rows == ("b",)


def test_alternate_screen_is_sent_whole_when_it_changes():
    pane = Pane()
    pane.alternate = ["menu", "  item 1"]
    first = pane.read(None)
    assert first.alternate_screen and first.rows == ("menu", "  item 1")
    assert pane.read(first.cursor).rows == ()
    pane.alternate = ["menu", "> item 1"]
    assert pane.read(first.cursor).rows == ("menu", "> item 1")


def test_rows_still_on_an_alternate_screen_are_not_new_again_wherever_they_moved():
    """Codex's screen after a usage limit, then after the next message: the old `■` row moved up, and is
    not new output; the rows the new turn drew are."""
    limit = "■ You’ve hit your usage limit. … try again at 5:19 PM."
    limited = ["› $next-build greeting", limit, "", "› Ask"]
    fresh, seen = unseen_rows(limited, ())
    assert fresh == [row for row in limited if row]
    assert seen == seen_of(limited)
    after = [limited[0], limited[1], "› go on", "• Done.", "", "› Ask"]
    fresh, seen = unseen_rows(after, seen)
    assert fresh == ["› go on", "• Done."]
    assert unseen_rows(after[1:], seen)[0] == []  # scrolled up: nothing new


def test_a_row_shown_more_often_than_before_is_new_once_for_each_extra_time():
    row = "■ You’ve hit your usage limit. … try again at 5:19 PM."
    fresh, seen = unseen_rows(["a", row], ())
    assert unseen_rows(["a", row, "b", row], seen)[0] == ["b", row]  # the same limit again


def test_blank_rows_are_never_new_nor_remembered():
    assert unseen_rows(["", "  ", "x"], ()) == (["x"], seen_of(["x"]))


def test_the_cursor_row_is_partial_and_sent_until_finished():
    pane = Pane()
    pane.print("done")
    pane.partial = "> "
    chunk = pane.read(None)
    assert chunk.rows == ("done",) and chunk.partial == ">"


# --- turn ends ---------------------------------------------------------------------------------------------

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


running = partial(running_session, T0, id="s1", args="x", last_change_at=T0)


def test_turn_ends_after_quiet_time_with_the_prompt_seen_twice():
    session = running()
    screen = ["working", "done", "> "]
    session, ended = observe_idle(session, screen, True, T0 + timedelta(seconds=1), 5)
    assert not ended  # the first look after delivery is a change
    for seconds, expected in ((10, False), (11, True)):  # quiet, but the prompt seen once, then twice
        session, ended = observe_idle(session, screen, True, T0 + timedelta(seconds=seconds), 5)
        assert ended is expected


def test_no_turn_end_without_the_prompt_or_while_the_screen_changes():
    session = running()
    for second in range(1, 20):
        session, ended = observe_idle(session, ["spinner"], False, T0 + timedelta(seconds=second), 2)
        assert not ended
    session = running()
    for second in range(1, 20):
        session, ended = observe_idle(
            session, [f"tick {second}", "> "], True, T0 + timedelta(seconds=second), 2
        )
        assert not ended


def test_prompt_is_found_on_the_last_rows_only():
    pattern = r"^\s*[│|]?\s*[>❯›]\s?"
    assert prompt_visible(["output", "│ > ", "", ""], pattern)
    assert not prompt_visible(["> old prompt", *[f"row {n}" for n in range(10)]], pattern)


# --- the transition table ----------------------------------------------------------------------------------


def a_session(state: SessionState) -> Session:
    return Session("s1", "claude", "next-build", "x", "/p", None, state, T, T)


T = datetime(2026, 1, 1, tzinfo=UTC)
LATER = T + timedelta(seconds=5)
S, C = SessionState, Change


@pytest.mark.parametrize(
    ("state", "change", "after", "event"),
    [
        (S.PENDING, C.DELIVERED, S.RUNNING, EventKind.DELIVERED),
        (S.PENDING, C.ERRORED, S.ERRORED, EventKind.ERRORED),
        (S.PENDING, C.PROGRESS, S.PENDING, None),
        (S.RUNNING, C.TURN_ENDED, S.TURN_ENDED, EventKind.TURN_ENDED),
        (S.RUNNING, C.REMINDED, S.STALLED, EventKind.REMINDED),
        (S.STALLED, C.REMINDED, S.STALLED, EventKind.REMINDED),
        (S.STALLED, C.NEEDS_ATTENTION, S.NEEDS_ATTENTION, EventKind.NEEDS_ATTENTION),
        (S.STALLED, C.PROGRESS, S.RUNNING, EventKind.PROGRESSED),
        (S.NEEDS_ATTENTION, C.PROGRESS, S.RUNNING, EventKind.PROGRESSED),
        (S.RUNNING, C.RATE_LIMITED, S.RATE_LIMITED, EventKind.RATE_LIMITED),
        (S.TURN_ENDED, C.TURN_ENDED, S.TURN_ENDED, EventKind.TURN_ENDED),  # announced once more
        (S.TURN_ENDED, C.PROGRESS, S.TURN_ENDED, None),
        (S.TURN_ENDED, C.ENDED, S.DONE, EventKind.ENDED),
        (S.RUNNING, C.ENDED, S.CANCELLED, EventKind.ENDED),
        (S.RATE_LIMITED, C.ENDED, S.CANCELLED, EventKind.ENDED),
        (S.RUNNING, C.EXITED_OK, S.DONE, EventKind.EXITED),
        (S.RATE_LIMITED, C.EXITED_FAILED, S.ERRORED, EventKind.EXITED),
        (S.TURN_ENDED, C.DIRECTED, S.RUNNING, EventKind.DIRECTED),
        (S.RATE_LIMITED, C.TYPED, S.RUNNING, EventKind.TYPED),
        (S.TURN_ENDED, C.FINISHED, S.DONE, EventKind.FINISHED),
    ],
)
def test_each_change_leads_where_the_table_says_and_is_announced_by_its_event(state, change, after, event):
    changed, events = transition(a_session(state), change, LATER, "why")
    assert changed.state is after and changed.updated_at == LATER
    assert [(e.kind, e.detail, e.at) for e in events] == ([(event, "why", LATER)] if event else [])


@pytest.mark.parametrize(
    ("state", "change"), [(state, change) for state, row in TRANSITIONS.items() for change in row]
)
def test_every_state_change_is_an_event_in_the_sessions_history(state, change):
    changed, events = transition(a_session(state), change, LATER)
    moved = changed.state is not state
    assert len(events) == (1 if moved or change is not C.PROGRESS else 0)  # progress at every look is not
    assert all(event.kind is RECORDED[change] and event.at == LATER for event in events)


def test_only_what_a_waiter_acts_on_is_told_the_rest_is_history():
    told = {kind for kind in EventKind if kind.told}
    assert {EventKind.DELIVERED, EventKind.TYPED, EventKind.PROGRESSED, EventKind.ENDED}.isdisjoint(told)
    assert {EventKind.TURN_ENDED, EventKind.EXITED, EventKind.RATE_LIMITED, EventKind.DIGEST} <= told


@pytest.mark.parametrize(
    ("state", "change"),
    [
        (S.PENDING, C.TURN_ENDED),  # not delivered yet
        (S.PENDING, C.EXITED_OK),
        (S.STALLED, C.TURN_ENDED),  # only a running worker ends a turn (the stop hook is progress first)
        (S.TURN_ENDED, C.REMINDED),  # nobody reminds a worker at its prompt
        (S.RATE_LIMITED, C.RATE_LIMITED),
        (S.NEEDS_ATTENTION, C.NEEDS_ATTENTION),
        (S.RUNNING, C.DELIVERED),
    ],
)
def test_a_change_the_table_does_not_list_is_refused(state, change):
    with pytest.raises(IllegalTransition):
        transition(a_session(state), change, LATER)


def test_a_final_state_takes_no_change_at_all():
    for state in (S.DONE, S.ERRORED, S.CANCELLED):
        for change in Change:
            with pytest.raises(IllegalTransition):
                transition(a_session(state), change, LATER)


def test_every_state_has_a_row_and_every_live_state_can_be_left():
    assert set(TRANSITIONS) == set(SessionState)
    for state in SessionState:
        if not state.is_final:
            assert {C.ERRORED, C.ENDED, C.FINISHED} <= TRANSITIONS[state].keys()


def test_an_exit_records_its_status_and_an_error_its_text():
    exited, _ = transition(a_session(S.RUNNING), C.EXITED_FAILED, LATER, "exit status 3", exit_code=3)
    assert (exited.exit_code, exited.last_error) == (3, "")
    lost, _ = transition(a_session(S.RUNNING), C.ERRORED, LATER, "gone", error="its pane is gone")
    assert lost.last_error == "its pane is gone"


# Claude Code 2.1 keeps its input line while it works; its footer tells busy from idle (realcli/NOTES.md)
CLAUDE_IDLE = [
    " ▐▛███▜▌   Claude Code v2.1.197",
    "─" * 40,
    "❯ ",
    "─" * 40,
    "  ⏵⏵ bypass permissions on (shift+tab to cycle) · ← for agents",
]
CLAUDE_BUSY = [
    "✻ Cogitating… (3s)",
    "─" * 40,
    "❯ ",
    "─" * 40,
    "  ⏵⏵ bypass permissions on (shift+tab to cycle) · esc to interrupt · ← for agents",
]


def test_claudes_busy_footer_keeps_a_screen_with_its_prompt_from_counting_as_idle():
    from teleclaude.agents import PROFILES
    from teleclaude.runtime.core.screens import waiting_for_input

    claude = PROFILES["claude"]
    assert waiting_for_input(CLAUDE_IDLE, claude.prompt, claude.busy)
    assert not waiting_for_input(CLAUDE_BUSY, claude.prompt, claude.busy)
    assert waiting_for_input(CLAUDE_BUSY, claude.prompt)  # what the prompt alone would have said
