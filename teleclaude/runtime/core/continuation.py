"""How a worker takes up a step an earlier worker left: a fresh start, its conversation resumed, or a
hand-over to another agent with a continuation note (core/handover.py writes the note).

Pure: the sessions of the item, what the driver can resume and whether the CLI's record of the conversation
is still there come in; a `Continuation` goes out. `Runtime.start` gathers the facts and acts on it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from teleclaude.runtime.core.sessions import (
    Cursor,
    EventKind,
    PaneView,
    Session,
    SessionState,
    row_hash,
    seen_of,
)


class How(Enum):
    FRESH = "fresh"
    RESUME = "resume"
    HAND_OVER = "hand_over"


@dataclass(frozen=True)
class Continuation:
    how: How
    previous: Session | None = None  # the worker whose step this one takes up
    why: str = ""  # one log line: why a resume was not possible ("" when nothing was left)


def bare(command: str) -> str:
    return command.rsplit(":", 1)[-1].lstrip("/$")


def left_step(sessions: Sequence[Session], command: str, slug: str) -> Session | None:
    """The item's newest worker, when it did `command` (the same step) and is through: the worker whose step a
    new start takes up. None when the item's newest worker did another step (a review between two builds:
    a new round, started fresh), or there is none. `sessions` are the project's, in any order."""
    workers = [s for s in sessions if s.slug == slug and s.delivered_at is not None]
    if not workers:
        return None
    newest = max(workers, key=lambda s: (s.created_at, s.id))
    if bare(newest.command) != bare(command) or not (newest.state.is_final or _left(newest)):
        return None
    return newest


def step_began(sessions: Sequence[Session], left: Session) -> Session:
    """The first of the item's workers, in a row up to `left`, that did `left`'s step: when the step began."""
    workers = sorted(
        (
            s
            for s in sessions
            if s.slug == left.slug and s.delivered_at is not None and s.created_at <= left.created_at
        ),
        key=lambda s: (s.created_at, s.id),
    )
    first = left
    for session in reversed(workers):
        if bare(session.command) != bare(left.command):
            break
        first = session
    return first


def _left(session: Session) -> bool:
    return session.state in (SessionState.RATE_LIMITED, SessionState.ERRORED)


def decide(
    previous: Session | None,
    agent: str,
    id_pattern: str | None,
    recorded: bool,
    open_elsewhere: bool,
    here: bool = True,
) -> Continuation:
    """What a new worker of `agent` does with the step `previous` left (`left_step`).

    `id_pattern`: the form of the agent's conversation ids (None: its driver cannot resume); `recorded`:
    the CLI's record of the previous conversation is still there (its transcript file); `open_elsewhere`: a
    live session holds that conversation; `here`: the new worker starts on the previous one's computer.
    """
    if previous is None:
        return Continuation(How.FRESH)
    if previous.agent != agent:
        return Continuation(How.HAND_OVER, previous)
    conversation = previous.conversation
    if id_pattern is None:
        return Continuation(How.FRESH, previous, f"{agent} cannot resume a conversation")
    if not conversation:
        return Continuation(How.FRESH, previous, f"{previous.id} never said its conversation")
    if not re.fullmatch(id_pattern, conversation):
        return Continuation(How.FRESH, previous, f"{previous.id}'s conversation id is not {agent}'s form")
    if not here:
        return Continuation(How.FRESH, previous, f"{previous.id}'s conversation is on another computer")
    if not recorded:
        return Continuation(
            How.FRESH, previous, f"{previous.id}'s conversation is gone (its file was deleted)"
        )
    if open_elsewhere:
        return Continuation(How.FRESH, previous, f"{previous.id}'s conversation is open in another worker")
    return Continuation(How.RESUME, previous)


def stopped(previous: Session, events: Sequence[EventKind] = ()) -> str:
    """Why the previous worker stopped, in a few words: its last event that says so (the run ends a limited
    worker's session afterwards), else its state."""
    said = [kind for kind in events if kind in _WHY]
    if said:
        return _WHY[said[-1]]
    match previous.state:
        case SessionState.RATE_LIMITED:
            return _WHY[EventKind.RATE_LIMITED]
        case SessionState.ERRORED:
            return _WHY[EventKind.ERRORED]
        case SessionState.NEEDS_ATTENTION:
            return _WHY[EventKind.NEEDS_ATTENTION]
        case SessionState.CANCELLED:
            return "it was ended before its step was done"
    return _WHY[EventKind.TURN_ENDED]


_WHY = {
    EventKind.RATE_LIMITED: "its agent hit a usage limit",
    EventKind.EXITED: "its CLI exited or was killed mid-turn",
    EventKind.ERRORED: "its CLI exited or was killed mid-turn",
    EventKind.NEEDS_ATTENTION: "it stopped making progress",
    EventKind.TURN_ENDED: "its turn ended before its step was done",
}


def resume_line(previous: Session, role_command: str, events: Sequence[EventKind] = ()) -> str:
    """The one line typed into a resumed worker: what happened, and to go on with its role command."""
    return f"Your session was interrupted ({stopped(previous, events)}); go on with {role_command}"


def past_replay(
    view: PaneView, screen: Sequence[str], prompt: str, seen_before: Sequence[str] = ()
) -> tuple[Cursor, tuple[str, ...]]:
    """Where the observer starts reading a resumed worker (its `scan_cursor`), and the rows its CLI replayed
    (its `seen_rows`), from its `view` and `screen` at its prompt before its line is typed: the replayed
    conversation's old limit error must not limit it again. On the normal screen, the cursor at its input's
    row (the last row that reads as its `prompt`, or the terminal cursor's if that is higher), with no anchor
    (the rows above the input are redrawn as its box moves: an anchor that no longer matched would read
    from the oldest row), and the rows above it replayed (`not_replayed`: a CLI may paint the whole
    conversation again below). On the alternate screen, every row shown then is seen (`unseen_rows`).
    `seen_before` (the `seen_rows` of the session it resumes: the conversation as last read) counts as
    replayed too: a loaded CLI may paint its conversation only after its prompt stood still."""
    if view.alternate:
        row, seen = 0, seen_of(screen)
    else:
        pattern = re.compile(prompt)
        rows = [index for index, row in enumerate(screen[: view.height]) if pattern.search(row)]
        row = min(rows[-1], view.cursor_y) if rows else view.cursor_y
        seen = seen_of(screen[:row])
    return Cursor(view.pane_id, view.pane_pid, view.history_size + row, 0), either(seen, seen_before)


def either(seen: Sequence[str], more: Sequence[str]) -> tuple[str, ...]:
    """Row hashes seen in either read, each as often as in the read that has it more often."""
    extra = Counter(more) - Counter(seen)
    return (*seen, *extra.elements())


def replay_shown(screen: Sequence[str], replayed: str) -> bool:
    """Whether a resumed worker's screen shows a row of the conversation its CLI painted again (its driver's
    `Resume.replayed`): until then a CLI that shows its prompt before it loads the conversation would lose
    the line typed into it. Always, for a CLI without the pattern (its prompt comes after its replay)."""
    return not replayed or any(re.search(replayed, row) for row in screen)


def not_replayed(rows: Sequence[str], replayed: Sequence[str]) -> list[str]:
    """The rows read from a resumed worker's normal screen that are not a row of the conversation its CLI
    replayed before its line was typed (`past_replay`), however often it paints them again. A new row that
    says exactly what a replayed one said is left out too: its limit is then told by the CLI's hook or
    record, which every driver that resumes has."""
    if not replayed:
        return list(rows)
    old = set(replayed)
    return [row for row in rows if row_hash(row) not in old]
