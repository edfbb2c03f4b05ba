"""What a worker's agent hooks read and write on its session as they run, with the stdlib's `sqlite3` alone.

`teleclaude hook tool-use` runs before every tool call of every worker and `hook prompt` at every message, so
their usual case (the database and its tables there, made by the runtime that started the worker) goes
without the store's modules (sessions_db.py, store.py: their dataclasses, and `dataclasses` imports
`inspect`) or the runtime. Anything else (no file, a table missing or of another shape, a corrupt file) is
left to the store, which makes, mends or moves the file aside as every write of the store does. The tool
uses' statements are this module's; sessions_db.py writes with them too.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime
    from types import ModuleType
    from typing import Any

    # (input, cached, output, reasoning, cost, model) of a reading (core/spend.py's columns)
    Used = tuple[int | None, int | None, int | None, int | None, float | None, str]


def _functools() -> ModuleType:
    """`functools` as `_sqlite3` uses it as it is first imported: `lru_cache` (each connection's cache of
    statements), made of the same C wrapper `functools.lru_cache` makes; anything else from the real module.
    `functools` (with `collections`) is three quarters of what importing `_sqlite3` costs a hook."""
    stand_in = type(sys)("functools")  # types.ModuleType, without importing `types`

    def lru_cache(maxsize: int = 128, typed: bool = False) -> Callable[[Callable[..., Any]], Any]:
        def wrap(function: Callable[..., Any]) -> Any:
            try:
                from _functools import _lru_cache_wrapper  # type: ignore[import-not-found]  # typeshed has none

                return _lru_cache_wrapper(function, max(maxsize, 0), typed, tuple)
            except (ImportError, TypeError):  # a Python whose C wrapper differs: the real module's
                return real("lru_cache")(maxsize, typed)(function)

        return wrap

    def real(name: str) -> Any:
        if sys.modules.get("functools") is stand_in:
            del sys.modules["functools"]
        from importlib import import_module

        return getattr(import_module("functools"), name)

    stand_in.lru_cache = lru_cache  # type: ignore[attr-defined]
    stand_in.__getattr__ = real  # type: ignore[method-assign]  # PEP 562
    return stand_in


# The stdlib's sqlite3 is `_sqlite3` and sqlite3/dbapi2.py, which adds adapters for `datetime` values (the
# hooks bind none) and imports `datetime` for them: most of what a worker's tool use would import else.
if "_sqlite3" in sys.modules or "functools" in sys.modules:
    import _sqlite3 as sqlite3
else:
    _placed = sys.modules["functools"] = _functools()
    try:
        import _sqlite3 as sqlite3
    finally:
        if sys.modules.get("functools") is _placed:
            del sys.modules["functools"]

SESSIONS = "sessions"
EVENTS = "session_events"
TOOL_USES = "tool_uses"
SPEND = "spend"
INSERT_TOOL_USE = f"INSERT INTO {TOOL_USES} (session_id, at, tool, target) VALUES (?, ?, ?, ?)"
# the session's latest `keep` (bound as session_id, session_id, keep)
PRUNE_TOOL_USES = (
    f"DELETE FROM {TOOL_USES} WHERE session_id = ? AND id NOT IN "
    f"(SELECT id FROM {TOOL_USES} WHERE session_id = ? ORDER BY id DESC LIMIT ?)"
)
SESSION_OF = f"SELECT key, conversation, transcript FROM {SESSIONS} WHERE id = ?"
SESSION_TRANSCRIPT_OF = f"SELECT key, transcript FROM {SESSIONS} WHERE id = ?"
USAGE_OF = "SELECT window, used_percent, resets_at FROM agent_usage WHERE agent = ?"  # store.py's USAGE_TABLE
_LOCKED_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def db_file() -> str:
    """The store's file (`store.default_db_path`), named without importing the store (pathlib)."""
    if os.environ.get("TELECLAUDE_DB"):
        return os.environ["TELECLAUDE_DB"]
    return os.path.join(os.environ.get("HOME") or os.path.expanduser("~"), ".teleclaude", "teleclaude.db")


def stamp(moment: datetime | None) -> str | None:
    """A moment as the sessions' tables keep it: `2026-11-21T17:00:00.123+00:00`."""
    from teleclaude.agents.moments import UTC

    return moment.astimezone(UTC).isoformat(timespec="milliseconds") if moment else None


def stamp_now() -> str:
    """`stamp` of this moment, without importing `datetime`."""
    seconds, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanoseconds // 1_000_000:03d}+00:00"


def add_plainly(
    path: str,
    busy_ms: int,
    row: tuple[str, str | None, str, str],
    plainly: Callable[[str, str, str], bool | None],
    keep: int,
) -> bool | None:
    """`row` (session_id, at, tool, target) added to the tool uses of its session, keeping its latest `keep`,
    when no such session is on record (rows no one shows, as the store writes them) or `plainly(key,
    conversation, transcript)` of its stored row ("" for none) says True. False: it said False (another
    session's key), nothing written. None: not written, for the store to do: it said None (the session has
    news to keep), or the file or a table is missing, or of another shape, or the file is not a database.
    Raises the store's `StoreLocked` when other writers hold the file past `busy_ms`."""
    with _Opened(path, busy_ms) as conn:
        if conn is None:
            return None
        found = conn.execute(SESSION_OF, (row[0],)).fetchone()
        verdict = True if found is None else plainly(*(value or "" for value in found))
        if verdict is not True:
            return verdict
        with conn:
            conn.execute(INSERT_TOOL_USE, row)
            conn.execute(PRUNE_TOOL_USES, (row[0], row[0], keep))
        return True
    return None


def kept_conversation(
    path: str, busy_ms: int, session_id: str, owns: Callable[[str], bool]
) -> tuple[str, str] | None:
    """(conversation, transcript) on record for the session ("" for none) when `owns` its stored key; None
    when that is not known so (no file, no such session or column, another key, any fault): the runtime
    says then."""
    found = None
    with _Opened(path, busy_ms, raise_locked=False) as conn:
        found = conn.execute(SESSION_OF, (session_id,)).fetchone() if conn else None
    if found is None or not owns(found[0] or ""):
        return None
    return found[1] or "", found[2] or ""


def usage_known(path: str, busy_ms: int, agent: str, windows: Iterable[tuple[str, float, datetime]]) -> bool:
    """Whether every window (name, percent used, reset) is on record for `agent` just so and not yet reset
    (the reset is later than now): a status line's usual news, which the store would keep as it is. False
    when not known so (no file, no table, any fault): the store then reads and keeps what is news."""
    stored = None
    with _Opened(path, busy_ms, raise_locked=False) as conn:
        stored = {row[0]: (row[1], row[2]) for row in conn.execute(USAGE_OF, (agent,))} if conn else None
    if stored is None:
        return False
    from teleclaude.agents.moments import UTC, datetime

    now = datetime.now(UTC)
    return all(reset > now and stored.get(window) == (used, utc(reset)) for window, used, reset in windows)


def utc(moment: datetime) -> str:
    """`2026-11-21T17:00:00Z`: a moment as the availability table keeps it (`timeparse.format_utc`)."""
    from teleclaude.agents.moments import UTC

    return moment.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


# the session's latest reading of what it used, and the cost on it (bound as session_id)
LAST_SPEND = f"SELECT id, cost_usd FROM {SPEND} WHERE session_id = ? ORDER BY id DESC LIMIT 1"
SET_COST = f"UPDATE {SPEND} SET cost_usd = ? WHERE id = ?"


def keep_cost(path: str, busy_ms: int, session_id: str, owns: Callable[[str], bool], usd: float) -> bool:
    """What the CLI says the session cost so far (its status line), set on the session's latest reading
    (sessions_db.py `add_spend`) when `owns` its stored key and it differs. False when nothing was written:
    the same cost, no reading yet (the cost waits for the stop hook's first: a reading of no tokens would be
    an unknown turn), another key, no file or table, any fault. Raises the store's `StoreLocked` when other
    writers hold the file past `busy_ms`."""
    with _Opened(path, busy_ms) as conn:
        if conn is None:
            return False
        found = conn.execute(SESSION_TRANSCRIPT_OF, (session_id,)).fetchone()
        last = conn.execute(LAST_SPEND, (session_id,)).fetchone() if found and owns(found[0] or "") else None
        if last is None or last[1] == usd:
            return False
        with conn:
            conn.execute(SET_COST, (usd, last[0]))
        return True
    return False


# A working session's turn ended by its stop hook, as the runtime saves it (hook_news.py `record_turn_end`, no
# prompt): progress first (the reminders start again), then TURN_ENDED with its event, compare-and-set on the
# state and version the row was read with (sessions_db.py `save`); bound as (at, at, version + 1, id,
# version).
SESSION_STATE_OF = f"SELECT key, state, version, command, args FROM {SESSIONS} WHERE id = ?"
END_TURN = (
    f"UPDATE {SESSIONS} SET state = 'turn_ended', updated_at = ?, last_progress_at = ?, nudges = 0, "
    "last_nudge_at = NULL, version = ? WHERE id = ? AND state = 'running' AND IFNULL(version, 0) = ?"
)
# the event, told to whoever waits (EventKind.TURN_ENDED, `told`: delivered 0); bound as (id, at)
TURN_ENDED_EVENT = (
    f"INSERT INTO {EVENTS} (session_id, kind, at, detail, delivered) "
    "VALUES (?, 'turn_ended', ?, 'stop hook', 0)"
)
FINAL_STATES = ("done", "errored", "cancelled")  # SessionState.is_final, as sessions_db.py spells it
# what `end_turn` did: the turn's end written (its waiters to wake), nothing to write, another session's key
ENDED, NOTHING, NOT_OWNED = "ended", "nothing", "not owned"


def end_turn(
    path: str,
    busy_ms: int,
    session_id: str,
    owns: Callable[[str], bool],
    at: str,
    plain: Callable[[str, str], bool] | None = None,
) -> str | None:
    """A worker's turn ended at `at` (`stamp_now`), recorded on its session when it is running and `owns`
    its stored key: ENDED. NOTHING when the runtime would write nothing (no such session, a final one);
    NOT_OWNED for another key. None: not written, for the runtime to record (the session not running: a
    stalled one's progress, a stop before its line was taken; `plain(command, args)` of its row said False:
    a prompt to judge; the row changed since it was read; no file, table or column as the runtime leaves
    them). Raises the store's `StoreLocked` when other writers hold the file past `busy_ms`."""
    with _Opened(path, busy_ms) as conn:
        if conn is None:
            return None
        found = conn.execute(SESSION_STATE_OF, (session_id,)).fetchone()
        if found is None:
            return NOTHING
        key, state, version, command, args = found
        if not owns(key or ""):
            return NOT_OWNED
        if state in FINAL_STATES:
            return NOTHING
        if state != "running" or (plain is not None and not plain(command or "", args or "")):
            return None
        version = version or 0
        with conn:
            if conn.execute(END_TURN, (at, at, version + 1, session_id, version)).rowcount != 1:
                return None
            conn.execute(TURN_ENDED_EVENT, (session_id, at))
        return ENDED
    return None


# A worker's stop that read what it used from its CLI's transcript (runtime/hooks/transcript.py): the reading
# kept as sessions_db.py `add_spend` keeps it, with where the read got to (`read_state`), and its turn's end
SESSION_ENDING_OF = (
    f"SELECT key, state, version, transcript, command, args, conversation FROM {SESSIONS} WHERE id = ?"
)
LAST_READING = (
    f"SELECT id, input, cached, output, reasoning, cost_usd, model, read_state FROM {SPEND} "
    "WHERE session_id = ? ORDER BY id DESC LIMIT 1"
)
ADD_READING = (
    f"INSERT INTO {SPEND} (session_id, at, input, cached, output, reasoning, cost_usd, model, read_state) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SET_READ_STATE = f"UPDATE {SPEND} SET read_state = ? WHERE id = ?"


def end_turn_reading(
    path: str,
    busy_ms: int,
    session_id: str,
    owns: Callable[[str], bool],
    at: str,
    transcript: str,
    read: Callable[[str], tuple[Used | None, str | None]],
    plain: Callable[[str, str], bool] | None = None,
    conversation: str = "",
) -> str | None:
    """`end_turn` of a running session that `owns` its stored key, whose CLI's record (`transcript`, the one
    on record; a database: with the CLI's own id of the session, `conversation`, on record too) says what it
    used: `read(state)` gives (input, cached, output, reasoning, cost or None, model) or None (unknown) and
    the state to keep (None: none), from the last reading's state; that reading is kept with it in the same
    transaction, as the stop hook's store keeps it (`SessionStore.add_spend`: no cost, the last reading's).
    ENDED, or None when nothing was written: anything else (no such session, another key, not running,
    another record on record, `plain` as `end_turn`'s said False, the row changed, the file or a column not
    as the runtime leaves it) is the stop hook's to record. Raises the store's `StoreLocked` when other
    writers hold the file past `busy_ms`."""
    with _Opened(path, busy_ms) as conn:
        if conn is None:
            return None
        found = conn.execute(SESSION_ENDING_OF, (session_id,)).fetchone()
        if found is None or not owns(found[0] or "") or found[1] != "running" or found[3] != transcript:
            return None
        if plain is not None and not plain(found[4] or "", found[5] or ""):
            return None
        if conversation and found[6] != conversation:
            return None
        version = found[2] or 0
        last = conn.execute(LAST_READING, (session_id,)).fetchone()
        used, state = read(last[7] or "" if last else "")
        *counts, cost, model = used or (None, None, None, None, None, "")
        if cost is None:  # the status line's (`keep_cost`), if any
            cost = last[5] if last else None
        reading = (*counts, cost, model)
        with conn:
            if conn.execute(END_TURN, (at, at, version + 1, session_id, version)).rowcount != 1:
                return None
            conn.execute(TURN_ENDED_EVENT, (session_id, at))
            if last is not None and tuple(last[1:7]) == reading:
                if last[7] != state:
                    conn.execute(SET_READ_STATE, (state, last[0]))
            else:
                conn.execute(ADD_READING, (session_id, at, *reading, state))
                if last is not None and last[7] is not None:  # the latest reading alone keeps one
                    conn.execute(SET_READ_STATE, (None, last[0]))
        return ENDED
    return None


# quoted as urllib.parse `quote` quotes a path (its `safe` "/"), without urllib (it imports `re`)
URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def readonly_uri(path: str) -> str:
    """The URI that opens the database file at `path` read-only (`sqlite3.connect(…, uri=True)`)."""
    quoted = "".join(chr(b) if b in URI_SAFE else f"%{b:02X}" for b in os.path.abspath(path).encode())
    return f"file:{quoted}?mode=ro"


class _Opened:
    """`with _Opened(path, busy_ms) as conn:` the database file, opened as the store opens it (None when there
    is none or it cannot be opened) and closed after. A fault of sqlite's in the block ends it quietly (the
    caller's answer after the block: not known), but for a file other writers held past the busy timeout:
    the store's `StoreLocked`, for the caller to retry (unless `raise_locked` is False)."""

    def __init__(self, path: str, busy_ms: int, raise_locked: bool = True) -> None:
        self.path, self.busy_ms, self.raise_locked = path, busy_ms, raise_locked
        self.conn: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection | None:
        try:
            if os.path.isfile(self.path):
                self.conn = sqlite3.connect(self.path, timeout=self.busy_ms / 1000)
        except sqlite3.Error:
            self.conn = None
        return self.conn

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> bool:
        if self.conn is not None:
            self.conn.close()
        if not isinstance(error, sqlite3.Error):
            return False
        if self.raise_locked and getattr(error, "sqlite_errorcode", 0) & 0xFF in _LOCKED_CODES:
            from pathlib import Path

            from teleclaude.adapters.store import store_error

            raise store_error(Path(self.path), error) from error
        return True
