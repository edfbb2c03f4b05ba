"""Worker sessions: their records, lifecycle states and events, and the cursor that reads a pane's output.

Pure: the tmux adapter supplies `PaneView`s and captured lines; this module decides which absolute lines are
new and what a cursor means (what a screen says of a turn: core/screens.py).

Line numbers are absolute: line N is the N-th row the pane ever produced. tmux keeps `history_size` rows of
scroll-back above the visible screen; once the history is full (`history_limit`), old rows fall off the top
and `base` (the absolute number of the oldest kept row) grows. The cursor remembers the base it saw and a
hash of the last rows it returned, so a reader can tell how many rows rolled off in between.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum


class SessionState(Enum):
    PENDING = "pending"  # started, the command not yet delivered
    RUNNING = "running"
    TURN_ENDED = "turn_ended"  # back at its prompt: finished, or waiting for an answer
    STALLED = "stalled"
    RATE_LIMITED = "rate_limited"
    NEEDS_ATTENTION = "needs_attention"
    DONE = "done"  # the CLI exited with status 0, or the session was ended after its turn
    ERRORED = "errored"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self in (SessionState.DONE, SessionState.ERRORED, SessionState.CANCELLED)


class EventKind(Enum):
    TURN_ENDED = "turn_ended"
    EXITED = "exited"
    RATE_LIMITED = "rate_limited"
    ERRORED = "errored"
    REMINDED = "reminded"  # no progress: a reminder was typed into the worker (detail says soft or hard)
    NEEDS_ATTENTION = "needs_attention"  # max_nudges reminders went unanswered
    DIGEST = "digest"  # the periodic report on a worker for its orchestrator
    FINISHED = "finished"  # after report_status: the files say the step is done; the session was ended
    DIRECTED = "directed"  # after report_status: the step is not done; one directive was typed in
    # the session's history only (a wait does not return for them): what the runtime itself did, or was told
    DELIVERED = "delivered"  # its command was typed in and taken
    TYPED = "typed"  # a line was typed into it (send_message): it works again
    PROGRESSED = "progressed"  # a stalled or neglected worker showed progress: it works again
    ENDED = "ended"  # end_session ended it (detail: a post-report cycle it cancelled)

    @property
    def told(self) -> bool:
        """Whether a wait (wait_for_sessions, the supervisor, `teleclaude run`) reports it."""
        return self not in _HISTORY_ONLY


_HISTORY_ONLY = frozenset({EventKind.DELIVERED, EventKind.TYPED, EventKind.PROGRESSED, EventKind.ENDED})


class Activity(Enum):
    """What the pane looks like it is doing: display only, never a reason to change state."""

    WORKING = "working"
    TOOL = "tool"
    WAITING_API = "waiting_api"  # the CLI counts down to retrying a failed API call
    QUIET = "quiet"
    UNREACHABLE = "unreachable"  # ssh cannot reach its computer: its pane is not read until it answers


@dataclass(frozen=True)
class Session:
    id: str
    agent: str
    command: str
    args: str
    project: str
    subfolder: str | None
    state: SessionState
    created_at: datetime
    updated_at: datetime
    computer: str = "local"
    tmux_session: str = ""
    pane_id: str = ""
    pane_pid: int = 0
    delivered_at: datetime | None = None
    exit_code: int | None = None
    last_error: str = ""
    scan_cursor: str = ""  # the runtime's own reading position (limit detection, idleness)
    screen_hash: str = ""
    last_change_at: datetime | None = None
    prompt_polls: int = 0  # consecutive observations with the prompt visible and the screen unchanged
    # supervision: progress is new output, a hook event or report_status; reminders count up without it
    last_progress_at: datetime | None = None
    status_text: str = ""  # the worker's last report_status
    status_at: datetime | None = None
    nudges: int = 0  # reminders sent since the last progress
    last_nudge_at: datetime | None = None
    last_digest_at: datetime | None = None
    digest_escalated: bool = False  # digests every digest_period_quiet from now on (one-way)
    activity: Activity = Activity.WORKING
    cycle_started_at: datetime | None = None  # a post-report cycle is under way (report_status + wait_cmd)
    sent_back: int = 0  # post-report cycles in a row whose failed wait_cmd sent the worker back
    # the CLI's own record of the session (its prompt hook's `transcript_path`), where an API error that ended
    # a turn is recorded typed (the driver's `turn_error` reads it); no hook runs for such a turn
    transcript: str = ""
    # the last look that saw one of its tools running (the profile's `tool_running`): a wait on the API
    # after a long tool is counted from there, not from the output before the tool (core/apiwait.py)
    tool_seen_at: datetime | None = None
    # the alternate screen's rows the runtime last read (`row_hash`; blank rows left out): that screen is read
    # whole whenever it changes, and a row still shown is not new output (`unseen_rows`)
    seen_rows: tuple[str, ...] = ()
    # when its stop hook last ran while the session was not working: the turn of a line typed in can end
    # before the launcher sees the line taken and makes the session work again; the launcher ends it by this
    stopped_at: datetime | None = None
    # its worker's alone (TELECLAUDE_SESSION_KEY): a hook's record or pane mark counts only with it (marks.py)
    key: str = field(default="", repr=False)
    run_id: str = ""  # the `teleclaude run` that started it ("" for any other start): its report's rows
    # who dispatched it and is woken with its digests (core/parents.py): `session:ID` or `pane:SOCKET:%N`
    parent: str = ""
    parent_agent: str = ""  # the parent's agent CLI (its prompt and dialogs), "" when not known
    parent_pending: str = ""  # a digest line waiting for the parent's next idle moment
    parent_told: bool = False  # the parent was given the final digest of the worker's last turn
    # the CLI's own id of its conversation (its hooks' `session_id`), once it said it: what resumes it
    conversation: str = ""
    # the session whose conversation this worker resumed, or whose step it took over from another agent
    # with a continuation note (core/continuation.py); "" for a fresh start
    resumed_from: str = ""
    handed_over_from: str = ""
    version: int = 0  # counts the saves: a save made from an older read is refused

    @property
    def slug(self) -> str:
        return self.args.split()[0] if self.args.split() else ""

    @property
    def workdir(self) -> str:
        return f"{self.project}/{self.subfolder}" if self.subfolder else self.project


@dataclass(frozen=True)
class Event:
    session_id: str
    kind: EventKind
    at: datetime
    detail: str = ""
    id: int = 0


# --- the one transition table ----------------------------------------------------------------------------


class Change(Enum):
    """What happens to a session. `TRANSITIONS` says which state each leads to from each state."""

    DELIVERED = "delivered"  # the command was typed in and taken
    ERRORED = "errored"  # delivery failed, or the pane vanished or was respawned
    RATE_LIMITED = "rate_limited"
    EXITED_OK = "exited_ok"  # the CLI exited with status 0
    EXITED_FAILED = "exited_failed"  # the CLI exited with another status, or an unknown one
    TURN_ENDED = "turn_ended"  # idle at its prompt, or its Stop hook ran; again: announced once more
    PROGRESS = "progress"  # new output or a status report: a stalled worker runs again
    REMINDED = "reminded"
    NEEDS_ATTENTION = "needs_attention"
    TYPED = "typed"  # someone typed a line into it: it works again
    DIRECTED = "directed"  # the post-report cycle typed its directive
    FINISHED = "finished"  # the post-report cycle found the step done and ends the session
    ENDED = "ended"  # end_session


_S = SessionState
_C = Change
_LEAVING = {_C.ERRORED: _S.ERRORED, _C.FINISHED: _S.DONE, _C.TYPED: _S.RUNNING, _C.DIRECTED: _S.RUNNING}
_EXITS = {_C.EXITED_OK: _S.DONE, _C.EXITED_FAILED: _S.ERRORED, _C.ENDED: _S.CANCELLED}
_SUPERVISED = {_C.REMINDED: _S.STALLED, _C.NEEDS_ATTENTION: _S.NEEDS_ATTENTION}

TRANSITIONS: dict[SessionState, dict[Change, SessionState]] = {
    _S.PENDING: {**_LEAVING, _C.DELIVERED: _S.RUNNING, _C.PROGRESS: _S.PENDING, _C.ENDED: _S.CANCELLED},
    _S.RUNNING: {
        **_LEAVING,
        **_EXITS,
        **_SUPERVISED,
        _C.RATE_LIMITED: _S.RATE_LIMITED,
        _C.TURN_ENDED: _S.TURN_ENDED,
        _C.PROGRESS: _S.RUNNING,
    },
    _S.STALLED: {
        **_LEAVING,
        **_EXITS,
        **_SUPERVISED,
        _C.RATE_LIMITED: _S.RATE_LIMITED,
        _C.PROGRESS: _S.RUNNING,
    },
    _S.NEEDS_ATTENTION: {**_LEAVING, **_EXITS, _C.RATE_LIMITED: _S.RATE_LIMITED, _C.PROGRESS: _S.RUNNING},
    _S.TURN_ENDED: {
        **_LEAVING,
        **_EXITS,
        _C.ENDED: _S.DONE,  # ended after its turn: it did what it was asked
        _C.RATE_LIMITED: _S.RATE_LIMITED,
        _C.TURN_ENDED: _S.TURN_ENDED,
        _C.PROGRESS: _S.TURN_ENDED,
    },
    _S.RATE_LIMITED: {**_LEAVING, **_EXITS, _C.PROGRESS: _S.RATE_LIMITED},
    _S.DONE: {},
    _S.ERRORED: {},
    _S.CANCELLED: {},
}

# the event each change is recorded with: every state change of a session is in its history (progress only
# when it moves the state: new output at every look is not an event)
RECORDED: dict[Change, EventKind] = {
    _C.DELIVERED: EventKind.DELIVERED,
    _C.PROGRESS: EventKind.PROGRESSED,
    _C.TYPED: EventKind.TYPED,
    _C.ENDED: EventKind.ENDED,
    _C.ERRORED: EventKind.ERRORED,
    _C.RATE_LIMITED: EventKind.RATE_LIMITED,
    _C.EXITED_OK: EventKind.EXITED,
    _C.EXITED_FAILED: EventKind.EXITED,
    _C.TURN_ENDED: EventKind.TURN_ENDED,
    _C.REMINDED: EventKind.REMINDED,
    _C.NEEDS_ATTENTION: EventKind.NEEDS_ATTENTION,
    _C.DIRECTED: EventKind.DIRECTED,
    _C.FINISHED: EventKind.FINISHED,
}


class IllegalTransition(ValueError):
    def __init__(self, state: SessionState, change: Change) -> None:
        super().__init__(f"a {state.value} session cannot take the change {change.value}")
        self.state = state
        self.change = change


def transition(
    session: Session,
    change: Change,
    now: datetime,
    detail: str = "",
    *,
    error: str | None = None,
    exit_code: int | None = None,
) -> tuple[Session, tuple[Event, ...]]:
    """The session after `change` (its state from `TRANSITIONS`) and the event that records it.

    `error` becomes `last_error`, `exit_code` the CLI's exit status. Raises `IllegalTransition` when the
    table has no such move: nothing else in teleclaude assigns a session's state.
    """
    state = TRANSITIONS[session.state].get(change)
    if state is None:
        raise IllegalTransition(session.state, change)
    changed = replace(session, state=state, updated_at=now)
    if error is not None:
        changed = replace(changed, last_error=error)
    if exit_code is not None:
        changed = replace(changed, exit_code=exit_code)
    if change is Change.PROGRESS and state is session.state:
        return changed, ()
    return changed, (Event(session.id, RECORDED[change], now, detail),)


# --- reading output --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaneView:
    """What tmux says about a pane at one moment (one `list-panes` row)."""

    pane_id: str
    pane_pid: int
    history_size: int
    history_limit: int
    cursor_y: int
    height: int
    alternate: bool
    dead: bool
    dead_status: int | None = None
    turn_end: str = ""  # the stop hook's mark on the pane (a worker on another computer), until cleared
    stop_failure: str = ""  # its StopFailure hook's mark: the failure as JSON (core/limits.py), until cleared
    usage: str = (
        ""  # its usage hook's mark: its agent's windows (core/limits.py `encode_usage`), until cleared
    )
    activity: int = 0  # when its window last printed, in whole seconds of the tmux server's clock
    listed_at: int = 0  # that clock when this view was listed (0: unknown)
    spend: str = ""  # its stop hook's mark: what its session used so far (core/spend.py `encode_tokens`)
    cost: str = ""  # its status line's mark: what its CLI says the session cost so far (dollars)


def output_stamp(view: PaneView) -> int | None:
    """A number that changes whenever the pane prints from now on: its last output's time, once the second of
    that output is over (output later in the same second would leave the time as it is); else None."""
    return view.activity if 0 < view.activity < view.listed_at else None


class InvalidCursor(ValueError):
    pass


class StaleView(RuntimeError):
    """The pane scrolled between its view and a capture: look again."""


# the pane id (`%3`, or `box:%3` on another computer: adapters/ssh.py), the pane's pid, line, base, anchor
# and screen; a computer's name is a lowercase word (config/parse.py)
_CURSOR = re.compile(r"((?:[a-z0-9][a-z0-9_-]*:)?%\d+):(\d+):(\d+):(\d+):([0-9a-f]*):([0-9a-f]*)")


@dataclass(frozen=True)
class Cursor:
    """A reading position: `line` is the next absolute row to return; `base` the absolute oldest kept row."""

    pane_id: str
    pane_pid: int
    line: int
    base: int
    anchor: str = ""  # hash of the rows just before `line` ("" at the very start)
    screen: str = ""  # hash of the alternate screen last returned ("" when on the normal screen)

    def encode(self) -> str:
        return f"{self.pane_id}:{self.pane_pid}:{self.line}:{self.base}:{self.anchor}:{self.screen}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        match = _CURSOR.fullmatch(text.strip())
        if not match:
            raise InvalidCursor(f"{text!r} is not a cursor returned by get_session_output")
        pane, pid, line, base, anchor, screen = match.groups()
        return cls(pane, int(pid), int(line), int(base), anchor, screen)

    @classmethod
    def start(cls, pane_id: str, pane_pid: int) -> Cursor:
        """A cursor before the pane's first row: the next read returns everything still kept."""
        return cls(pane_id, pane_pid, 0, 0)

    def check_pane(self, view: PaneView) -> None:
        if self.pane_id != view.pane_id:
            raise InvalidCursor(
                f"the cursor belongs to pane {self.pane_id}, not to this session's {view.pane_id}"
            )
        if self.pane_pid != view.pane_pid:
            raise InvalidCursor(
                "the pane was respawned since this cursor was made: read again without a cursor"
            )


ANCHOR_ROWS = 3


def anchor_of(rows: list[str]) -> str:
    """A hash of the last few rows: enough to find them again after older rows rolled off."""
    tail = "\n".join(rows[-ANCHOR_ROWS:])
    return hashlib.blake2b(tail.encode(), digest_size=8).hexdigest() if rows else ""


def screen_hash(rows: list[str]) -> str:
    return hashlib.blake2b("\n".join(rows).encode(), digest_size=8).hexdigest()


def row_hash(row: str) -> str:
    return hashlib.blake2b(row.encode(), digest_size=4).hexdigest()


def unseen_rows(screen: Sequence[str], seen: Sequence[str]) -> tuple[list[str], tuple[str, ...]]:
    """The rows of an alternate screen that were not on it when it was last read (`seen`: that screen's
    `row_hash`es), and the hashes to keep for the next read. The alternate screen has no history and is read
    whole when it changes: a row still shown, wherever it moved, is not new output (an old limit or refusal
    must not count again), and a row shown more often than before is new once for each extra time."""
    before = Counter(seen)
    fresh: list[str] = []
    for row in screen:
        digest = row_hash(row)
        if before[digest] > 0:
            before[digest] -= 1
        elif row.strip():
            fresh.append(row)
    return fresh, seen_of(screen)


def seen_of(screen: Sequence[str]) -> tuple[str, ...]:
    """What `unseen_rows` keeps of a screen read: its rows' hashes, blank rows left out."""
    return tuple(row_hash(row) for row in screen if row.strip())


def find_shift(kept: list[str], expected_end: int, anchor: str) -> int | None:
    """How many rows rolled off: the anchor's rows ended at kept index `expected_end` before any roll-off.

    None when the anchor is no longer among the kept rows.
    """
    for end in range(min(expected_end, len(kept)), ANCHOR_ROWS - 1, -1):
        if anchor_of(kept[end - ANCHOR_ROWS : end]) == anchor:
            return expected_end - end
    return None


def bound(rows: list[str], max_lines: int, max_bytes: int) -> tuple[list[str], bool]:
    """The oldest rows that fit both limits (at least one row, cut to max_bytes if it alone is too long)."""
    kept: list[str] = []
    size = 0
    for row in rows[:max_lines]:
        cost = len(row.encode()) + 1
        if kept and size + cost > max_bytes:
            break
        if not kept and cost > max_bytes:
            kept.append(row.encode()[: max(max_bytes - 1, 0)].decode(errors="ignore"))
            break
        kept.append(row)
        size += cost
    return kept, len(kept) < len(rows)


@dataclass(frozen=True)
class Chunk:
    """One bounded slice of new output, and the cursor to read the rest with."""

    rows: tuple[str, ...]
    partial: str  # the unfinished row the terminal cursor is on ("" if blank); sent again until finished
    cursor: Cursor
    truncated: bool = False  # more finished rows are waiting: read again with the new cursor
    lines_missed: int | None = 0  # rows that rolled off or were cleared before they were read; None: unknown
    alternate_screen: bool = False
    pane_dead: bool = False


Capture = Callable[[int, int], list[str]]  # rows start..end inclusive, tmux numbering


def read_since(
    view: PaneView, cursor: Cursor | None, capture: Capture, max_lines: int, max_bytes: int
) -> Chunk:
    """The finished rows after `cursor` (the visible screen without one), at most max_lines / max_bytes.

    Rows above the terminal cursor are finished; the cursor's own row is returned as `partial` each time.
    On the alternate screen there is no history: the whole screen is returned when it changed.
    """
    if cursor is not None:
        cursor.check_pane(view)
    if view.alternate:
        return _read_alternate(view, cursor, capture, max_lines, max_bytes)
    history = view.history_size
    finished = history + view.cursor_y  # kept rows before the cursor's row, counted from the oldest kept
    missed: int | None
    if cursor is None:  # the first read: the visible screen
        base, line, missed = 0, history, 0
    else:
        base, line, missed = _locate(view, cursor, capture, finished)
    start = line - base
    lead = min(ANCHOR_ROWS, start)
    window = capture(start - lead - history, finished - 1 - history)
    context, fresh = window[:lead], window[lead:]
    rows, truncated = bound(fresh, max_lines, max_bytes)
    anchor = anchor_of(context + fresh[: len(rows)])
    partial = "" if truncated else capture(view.cursor_y, view.cursor_y)[0].rstrip()
    after = Cursor(view.pane_id, view.pane_pid, line + len(rows), base, anchor)
    return Chunk(tuple(rows), partial, after, truncated, missed, pane_dead=view.dead)


def _locate(view: PaneView, cursor: Cursor, capture: Capture, finished: int) -> tuple[int, int, int | None]:
    """(base, line, lines_missed) now: where the cursor's row is after roll-off or a cleared history."""
    expected = cursor.line - cursor.base  # where the cursor's row would be, had nothing rolled off
    full = view.history_size >= view.history_limit
    history = view.history_size
    if not cursor.anchor:
        if expected <= finished and not full:
            return cursor.base, cursor.line, 0
    else:
        if 0 < expected <= finished:
            rows = capture(expected - min(ANCHOR_ROWS, expected) - history, expected - 1 - history)
            if anchor_of(rows) == cursor.anchor:
                return cursor.base, cursor.line, 0
        if full:
            kept = capture(-history, finished - 1 - history)
            shift = find_shift(kept, expected, cursor.anchor)
            if shift is not None:
                return cursor.base + shift, cursor.line, 0
    # the rows after the cursor are gone (cleared, or rolled off past the anchor): go on from the oldest kept
    return cursor.line, cursor.line, None


def _read_alternate(
    view: PaneView, cursor: Cursor | None, capture: Capture, max_lines: int, max_bytes: int
) -> Chunk:
    screen = capture(0, view.height - 1)
    digest = screen_hash(screen)
    while screen and not screen[-1].strip():
        screen = screen[:-1]
    unchanged = cursor is not None and cursor.screen == digest
    rows, truncated = bound([] if unchanged else screen, max_lines, max_bytes)
    line, base, anchor = (cursor.line, cursor.base, cursor.anchor) if cursor else (view.history_size, 0, "")
    after = Cursor(view.pane_id, view.pane_pid, line, base, anchor, digest)
    return Chunk(tuple(rows), "", after, truncated, 0, alternate_screen=True, pane_dead=view.dead)


# --- a start, and the answers of the runtime ------------------------------------------------------------


@dataclass(frozen=True)
class StartRequest:
    """What to start: `/command args` typed into `agent` in `thinking_mode`, on `computer`, in the project's
    folder (or its `subfolder`, a worktree). Built once by each front end; checked by the launcher."""

    computer: str
    command: str
    args: str
    project: str
    agent: str
    thinking_mode: str
    subfolder: str | None = None
    # who is woken with the worker's digests (core/parents.py `Parent.encode`), "" for nobody; its agent CLI
    parent: str = ""
    parent_agent: str = ""
    # resume that session's conversation (its `conversation`) instead of a fresh start, typing `told` (one
    # line: what happened, go on with the role command) instead of the role command; or the session whose
    # step this start takes over (its note is in `args`). Set by `Runtime.start` (core/continuation.py)
    resumed_from: str = ""
    conversation: str = ""
    told: str = ""
    handed_over_from: str = ""


@dataclass(frozen=True)
class Started:
    session: Session


@dataclass(frozen=True)
class Output:
    session: Session
    chunk: Chunk


@dataclass(frozen=True)
class Waited:
    events: tuple[Event, ...]
    sessions: tuple[Session, ...]
    timed_out: bool


@dataclass(frozen=True)
class Ended:
    session: Session


@dataclass(frozen=True)
class Reported:
    session: Session
    cycle: bool  # a post-report cycle was started
