"""Several panes' rows in one tmux invocation (on another computer: one ssh client for a wake-up's moved
panes, not one each), told apart by counting, never by anything a pane shows.

A pane can show any text, a line that looks like a separator or a header included; what it cannot do is put a
line break inside one of its rows (a terminal's newline moves its cursor, it is never stored in a cell). So
each capture is preceded by tmux's own line giving the pane's history size and height (`display-message`),
from which the number of rows `capture-pane -S -E` prints is known exactly (tmux clamps the range to the
pane's rows as `rows_captured` does); the output is cut at those counts, and taken only when it holds exactly
as many lines as counted, each header where one must be. Anything else (a pane gone, which stops tmux's
command list; a count that does not add up) is no answer, and each look captures its pane on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# (pane id, first row, last row, history size): `Tmux.capture(pane, first, last, history_size)` asked ahead
Asked = tuple[str, int, int, int]
PANE = re.compile(r"%[0-9]+")  # a pane id as tmux names it: nothing else is put on the command line
_HEADER = "#{history_size} #{pane_height}"


def captures_args(asked: Sequence[Asked]) -> list[str]:
    """The tmux arguments (one invocation, commands separated by `;`) that capture each of `asked`, each after
    its pane's header line. Every pane id must be a tmux pane id (`PANE`)."""
    args: list[str] = []
    for pane, first, last, _ in asked:
        if not PANE.fullmatch(pane):
            raise ValueError(f"not a tmux pane id: {pane!r}")
        args += [";", "display-message", "-p", "-t", pane, _HEADER]
        args += [";", "capture-pane", "-p", "-t", pane, "-S", str(first), "-E", str(last)]
    return args[1:]


def rows_captured(first: int, last: int, history: int, height: int) -> int:
    """How many rows `capture-pane -S first -E last` prints of a pane with `history` rows of history and
    `height` rows on screen: tmux clamps each end to the pane's rows and swaps them when reversed."""

    def clamped(row: int) -> int:
        at = 0 if row < -history else history + row
        return min(at, history + height - 1)

    return abs(clamped(last) - clamped(first)) + 1


def split_captures(asked: Sequence[Asked], lines: Sequence[str]) -> dict[Asked, list[str]]:
    """`captures_args`' output cut back into each capture's rows, padded with blank rows to the range asked
    (as `Tmux.capture`); a capture whose pane's history size is no longer the one asked for is left out (its
    rows are numbered otherwise now: its look captures it again). Empty unless every count adds up."""
    found: dict[Asked, list[str]] = {}
    at = 0
    for key in asked:
        _, first, last, history = key
        header = lines[at].split(" ") if at < len(lines) else []
        if len(header) != 2 or not all(word.isdigit() for word in header):
            return {}
        size, height = int(header[0]), int(header[1])
        count = rows_captured(first, last, size, height)
        rows = list(lines[at + 1 : at + 1 + count])
        if len(rows) != count:
            return {}
        at += 1 + count
        if size == history:
            found[key] = rows + [""] * (last - first + 1 - len(rows))
    return found if at == len(lines) else {}
