"""What a worker's screen says, read as rows: its prompt (a turn's end when it stands), a typed line shown or
taken, a command its CLI lists. Pure, as sessions.py."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from teleclaude.runtime.core.sessions import Session, SessionState, screen_hash

# --- turn ends -------------------------------------------------------------------------------------------


def prompt_visible(rows: list[str], prompt_pattern: str) -> bool:
    """`prompt_pattern` (the input prompt, or any row) matches one of the last non-blank rows."""
    tail = [row for row in rows if row.strip()][-6:]
    pattern = re.compile(prompt_pattern)
    return any(pattern.search(row) for row in tail)


def command_listed(rows: list[str], listed_pattern: str, name: str) -> bool:
    """A row lists the command `name` (the profile's `command_listed`, `{name}` standing for the name): the
    CLI knows it. Not the input line that shows the typed `/name` itself."""
    pattern = re.compile(listed_pattern.replace("{name}", re.escape(name)))
    return any(pattern.search(row) for row in rows)


def shows_part_of(rows: list[str], typed: str) -> bool:
    """A row holds only a beginning of `typed` (box-drawing borders and blanks aside): a line typed into the
    input and not yet wholly erased. opencode's `┃  /` while its last Backspace is on its way."""
    return any((content := row.translate(_BORDERS).strip()) and typed.startswith(content) for row in rows)


_BORDERS = {code: " " for code in range(0x2500, 0x25A0)}  # box drawing, block elements


def shown_as_message(rows: list[str], typed: str) -> int:
    """How many rows hold `typed` alone (borders aside; a side panel may follow after two blanks): the line
    as a CLI shows a message it sent to the model as typed, or its input box still holding it."""
    shown = 0
    for row in rows:
        content = row.translate(_BORDERS).strip()
        shown += content == typed or content.startswith(f"{typed}  ")
    return shown


def command_taken(rows: list[str], typed: str, expansion: Sequence[str], shown_before: int) -> bool | None:
    """After Enter on a typed command line: True when a row shows a line of the command's text (`expansion`,
    its arguments substituted: the CLI expanded it), False when the typed line shows as a message once more
    than before it was typed (the CLI sent it to the model as plain text), None while neither shows."""
    if any(line in row for row in rows for line in expansion):
        return True
    if shown_as_message(rows, typed) > shown_before:
        return False
    return None


def shows_typed(rows: list[str], typed: str) -> bool:
    """`typed` on the screen, in one row or wrapped over consecutive rows (blanks and box-drawing borders
    aside): a CLI draws a typed line only once it has read its keys."""
    if any(typed in row for row in rows):
        return True
    text = "".join(typed.split())
    return bool(text) and text in "".join("".join(row.translate(_BORDERS).split()) for row in rows)


def typed_at(rows: list[str], typed: str) -> tuple[tuple[int, int], ...]:
    """Each place `typed` shows, as `shows_typed` finds it (wrapped over rows too): (its first row, its last
    row). On a full screen that scrolls, only these moving says a typed line was taken."""
    wanted = "".join(typed.split())
    kept = ["".join(row.translate(_BORDERS).split()) for row in rows]
    where = [number for number, text in enumerate(kept) for _ in text]  # the row of each character kept
    joined, found = "".join(kept), []
    at = joined.find(wanted) if wanted else -1
    while at != -1:
        found.append((where[at], where[at + len(wanted) - 1]))
        at = joined.find(wanted, at + 1)
    return tuple(found)


def waiting_for_input(rows: list[str], prompt_pattern: str, busy_pattern: str = "") -> bool:
    """The prompt is shown and nothing says the CLI is still working (a CLI may keep its input line while it
    works; only its footer tells, e.g. `esc to interrupt`)."""
    if busy_pattern and prompt_visible(rows, busy_pattern):
        return False
    return prompt_visible(rows, prompt_pattern)


def observe_idle(
    session: Session, rows: list[str], prompt: bool, now: datetime, idle_seconds: float
) -> tuple[Session, bool]:
    """Update the screen-change bookkeeping; True when the turn has ended by the screen's evidence.

    A turn ends when the screen has not changed for `idle_seconds` and the prompt was visible on two
    consecutive observations. Only a running session whose screen changed after delivery can end a turn.
    """
    digest = screen_hash(rows)
    if digest != session.screen_hash:
        return replace(session, screen_hash=digest, last_change_at=now, prompt_polls=0), False
    polls = session.prompt_polls + 1 if prompt else 0
    if polls != session.prompt_polls:
        session = replace(session, prompt_polls=polls)
    changed_since_delivery = (
        session.delivered_at is not None
        and session.last_change_at is not None
        and session.last_change_at > session.delivered_at
    )
    quiet = (
        session.last_change_at is not None and (now - session.last_change_at).total_seconds() >= idle_seconds
    )
    ended = session.state is SessionState.RUNNING and changed_since_delivery and quiet and polls >= 2
    return session, ended
