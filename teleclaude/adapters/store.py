"""Agent availability in SQLite: which agents are out, until when, and why; and how much of each agent's
rate-limit windows its CLI last reported used.

Reads and writes use the stdlib `sqlite3` (they run on every planner call and in every agent hook, and
importing sqlite-utils costs more than a whole decision); the schema is made and mended by sqlite-utils,
imported only when a write finds a table missing or of another shape (`ensure_tables`). Every
transaction that writes starts with BEGIN IMMEDIATE so that several processes queue on the busy timeout
instead of failing to upgrade a read lock. The data is soft state: a corrupt file is moved aside and a table
of the wrong shape renamed aside, not fatal. Any other fault of the file is a `StoreError` with a code:
`STORE_LOCKED` when another process holds it, else `STORE_UNAVAILABLE` (a folder, a full disk, no access).
"""

from __future__ import annotations

import _thread
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.agents.usage import UsageWindow, kept_usage
from teleclaude.errors import ErrorCode, Failure
from teleclaude.planner.core.timeparse import format_utc

TYPE_CHECKING = False  # typing's own, without importing typing: a status line's read needs neither
if TYPE_CHECKING:  # nor the planner's model (Unavailability: imported where one is made)
    from typing import TypeVar

    import sqlite_utils

    from teleclaude.planner.core.model import Unavailability

    T = TypeVar("T")

TABLE = "agent_availability"
COLUMNS = {"agent": str, "available": int, "unavailable_until": str, "reason": str}
USAGE_TABLE = "agent_usage"
USAGE_COLUMNS = {"agent": str, "window": str, "used_percent": float, "resets_at": str, "seen_at": str}
BUSY_TIMEOUT_MS = 15_000
READ_TIMEOUT_MS = 3_000  # a reader waits less: availability is soft state, and the planner holds its lock
_CORRUPTION_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
CORRUPT_RECHECK_PAUSES = (0.05, 0.2)  # seconds before reading a file that looked corrupt again
_LOCKED_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_WRONG_SCHEMA = ("no such column", "has no column named", "does not match any PRIMARY KEY")
# (store class, file) -> the file's schema version (`PRAGMA schema_version`, counted up by every change of its
# schema) when this process last made sure of that store's tables: a write runs the schema again only when
# it changed since (a table dropped or added, the file deleted or moved aside and made anew)
_ENSURED: dict[tuple[type, str], int] = {}
# file -> the lock this process's writers to it take in turn. SQLite's busy handler polls, at longer and
# longer intervals, with no queue: `run`'s lanes (threads) beside other processes' writers, on a busy machine,
# left one thread waiting out the whole busy timeout ("database is locked") while the others took the lock
# again and again. One writer a process then competes with the other processes' (_thread: no import cost)
_WRITERS: dict[str, _thread.RLock] = {}
# each thread's own read connections (file -> the connection and the file's inode), kept while a store holds
# its file open (`kept_open`: a run, which reads the file many times a second; a connection's first statement
# reads the schema, most of a read's cost)
_READERS = _thread._local()
# file -> how many `kept_open` hold it open now: every store of the file then reads through the kept
# connections (the planner's `SessionStore()` beside a run's own)
_HELD: dict[str, int] = {}
_HELD_LOCK = _thread.allocate_lock()


@dataclass(frozen=True)
class TableShape:
    """A table a store keeps: its columns, its key, and the indexes on it (each a tuple of columns)."""

    name: str
    columns: Mapping[str, type]
    pk: str | tuple[str, ...]
    indexes: tuple[tuple[str, ...], ...] = ()

    @property
    def keys(self) -> list[str]:
        return [self.pk] if isinstance(self.pk, str) else list(self.pk)


AVAILABILITY = TableShape(TABLE, COLUMNS, "agent")
USAGE = TableShape(USAGE_TABLE, USAGE_COLUMNS, ("agent", "window"))


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("TELECLAUDE_DB"):
        return Path(env["TELECLAUDE_DB"])
    return user_folder(env) / "teleclaude.db"


def user_folder(env: Mapping[str, str] | None = None) -> Path:
    """`~/.teleclaude`: the database, the HTTP token, install's manifest; its owner's alone (0700)."""
    env = os.environ if env is None else env
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".teleclaude"


class StoreError(Failure):
    code = ErrorCode.STORE_UNAVAILABLE
    next_step = (
        "It only holds agent availability and worker sessions: fix it, move it aside, or point "
        "$TELECLAUDE_DB at another file, then try again."
    )


class StoreLocked(StoreError):
    code = ErrorCode.STORE_LOCKED
    next_step = "Wait for the other program to finish (`fuser` on the file names it), then try again."


def store_error(path: Path, error: sqlite3.Error | OSError) -> StoreError:
    """A fault of the database file as a coded failure that names the file and what is wrong with it."""
    code = getattr(error, "sqlite_errorcode", 0) & 0xFF
    if code in _LOCKED_CODES:
        return StoreLocked(f"the teleclaude database {path} is locked by another process ({error})")
    if path.is_dir():
        return StoreError(f"the teleclaude database {path} is a folder, not a file")
    if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        return StoreError(f"the teleclaude database {path} could not be written ({error}): is the disk full?")
    return StoreError(f"the teleclaude database {path} cannot be used: {error}")


@dataclass(frozen=True)
class AgentRow:
    agent: str
    available: bool
    until: datetime | None  # aware UTC; None when available
    reason: str = ""


class SqliteStore:
    """One SQLite file shared by every table of teleclaude: connecting, writing, surviving corruption."""

    busy_timeout_ms = BUSY_TIMEOUT_MS  # how long a write queues behind another process's

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()

    tables: tuple[TableShape, ...] = ()

    def _write(self, change: Callable[[sqlite3.Connection], T]) -> T:
        return self._survive(lambda: self._apply(change))

    def _apply(self, change: Callable[[sqlite3.Connection], T]) -> T:
        key = (type(self), str(self.path))
        with _WRITERS.setdefault(str(self.path), _thread.RLock()), closing(self._connect()) as conn:
            with _immediate(conn):  # the write lock: no other process changes the schema from here on
                version = _schema_version(conn)
                if _ENSURED.get(key) != version:
                    ensure_tables(conn, self.tables)
                    version = _schema_version(conn)
                done = change(conn)
            _ENSURED[key] = version  # once committed: a rollback takes the schema's changes with it
            return done

    def _connect(self, writing: bool = True) -> sqlite3.Connection:
        if writing and not self.path.exists():
            self._create_private()
        fs.make_private(*self._private_paths())
        busy = self.busy_timeout_ms if writing else min(READ_TIMEOUT_MS, self.busy_timeout_ms)
        conn = sqlite3.connect(self.path, timeout=busy / 1000)
        if not writing:
            return conn  # WAL mode is a property of the file, set by the first write
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy)}")
            _into_wal(conn, busy / 1000)
        except BaseException:
            conn.close()
            raise
        return conn

    def _private_paths(self) -> tuple[Path, ...]:
        """The file, its -wal and -shm, and its folder when it is teleclaude's own: made private at every
        connection (older installs made them 0755 and 0644; a folder $TELECLAUDE_DB names is left as it is).
        Named once per store (a run connects a few times a second)."""
        named = self.__dict__.get("_private")
        if named is None or named[0] != self.path:
            ours = (self.path.parent,) if self.path.parent == user_folder() else ()
            files = tuple(Path(f"{self.path}{suffix}") for suffix in ("", "-wal", "-shm"))
            named = self.__dict__["_private"] = (self.path, (*ours, *files))
        return named[1]

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A connection to read with: while `kept_open` holds the file open, the calling thread's own, kept
        from one read to the next (made anew when the file was replaced: moved aside as corrupt, deleted);
        else one for this read alone."""
        if not _HELD.get(str(self.path)):
            self._let_go_kept_reader()  # one this thread kept while the file was held open
            with closing(self._connect(writing=False)) as conn:
                yield conn
            return
        kept: dict[str, tuple[sqlite3.Connection, int]] = _READERS.__dict__.setdefault("kept", {})
        key, found = str(self.path), None
        with suppress(KeyError):
            found = kept.pop(key)
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = -1
        if found is not None and found[1] != inode:
            found[0].close()
            found = None
        conn = found[0] if found is not None else self._connect(writing=False)
        try:
            yield conn
        except BaseException:  # a read that failed: the next connects anew
            conn.close()
            raise
        if inode != -1:
            kept[key] = (conn, inode)
        else:
            conn.close()

    @contextmanager
    def kept_open(self) -> Iterator[None]:
        """One connection to the file held open meanwhile, for a process that reads and writes it every second
        (`teleclaude run`): the connection of each read and write is then not the file's last, whose close
        checkpoints the WAL into the file and deletes it (half of a read's CPU; the next write makes it anew).
        Nothing when the file does not exist yet or cannot be read."""
        held = None
        if self.path.exists():
            try:
                held = sqlite3.connect(self.path, timeout=READ_TIMEOUT_MS / 1000, check_same_thread=False)
                held.execute("PRAGMA schema_version").fetchone()  # maps the WAL's index: the file is in use
            except sqlite3.Error:
                if held is not None:
                    held.close()
                held = None
        key = str(self.path)
        with _HELD_LOCK:
            _HELD[key] = _HELD.get(key, 0) + (held is not None)
        try:
            yield
        finally:
            if held is not None:
                with _HELD_LOCK:
                    _HELD[key] -= 1
                    if not _HELD[key]:
                        del _HELD[key]
                held.close()
                if key not in _HELD:
                    self._let_go_kept_reader()  # other threads' go at their next read or their end

    def _let_go_kept_reader(self) -> None:
        """Closes the calling thread's kept read connection to the file, if it has one."""
        kept = _READERS.__dict__.get("kept")
        if kept:
            found = kept.pop(str(self.path), None)
            if found is not None:
                found[0].close()

    def _create_private(self) -> None:
        """The file, made 0600 before SQLite makes it (0644 under the usual umask); -wal and -shm follow it.

        Only when it is missing: closing any descriptor of the file drops every POSIX lock this process holds
        on it, so opening and closing it beside another thread's live connection broke that connection's
        locks (a lasting `disk I/O error`, SQLITE_IOERR_SHORT_READ, in the threaded run)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with suppress(FileExistsError):
            os.close(
                os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
            )

    # --- faults ----------------------------------------------------------------------------------------

    def _survive(self, operation: Callable[[], T]) -> T:
        """`operation`, once more after moving a corrupt file aside or repairing a table of the wrong shape;
        any other fault of the file raises a `StoreError`."""
        try:
            try:
                return operation()
            except sqlite3.DatabaseError as error:
                if _corrupt(error):
                    # a file another process is just creating can read as not a database for an instant,
                    # and moving it aside then would break that process's connection: look again first
                    for pause in CORRUPT_RECHECK_PAUSES:
                        time.sleep(pause)
                        try:
                            return operation()
                        except sqlite3.DatabaseError as again:
                            if not _corrupt(again):
                                raise
                    self._move_aside(error)
                elif not any(text in str(error) for text in _WRONG_SCHEMA):
                    raise
                for key in [key for key in _ENSURED if key[1] == str(self.path)]:
                    del _ENSURED[key]  # make sure of the schema again, whatever its version says
            self._apply(lambda db: None)  # recreate the empty tables, or repair them (`ensure_table`)
            return operation()
        except (sqlite3.Error, OSError) as error:
            raise store_error(self.path, error) from error

    def _move_aside(self, error: sqlite3.DatabaseError) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        _log("%s is corrupt (%s): moved it to %s and started afresh", self.path, error, target)
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, f"{target}{suffix}")


def _corrupt(error: sqlite3.DatabaseError) -> bool:
    return getattr(error, "sqlite_errorcode", 0) & 0xFF in _CORRUPTION_CODES


def ensure_tables(conn: sqlite3.Connection, shapes: Iterable[TableShape]) -> None:
    """Each table as its shape says, made or mended by sqlite-utils; checked first in plain SQL, so that a
    process whose first write finds them right (every hook's) never imports sqlite-utils."""
    wrong = [shape for shape in shapes if not _fits(conn, shape)]
    if not wrong:
        return
    import sqlite_utils

    db = sqlite_utils.Database(conn, execute_plugins=False)
    for shape in wrong:
        ensure_table(db, shape)


def _fits(conn: sqlite3.Connection, shape: TableShape) -> bool:
    info = conn.execute(f"PRAGMA table_info({_quoted(shape.name)})").fetchall()
    keys = [name for _, name, _, _, _, pk in sorted(info, key=lambda row: row[5]) if pk]
    if keys != shape.keys or not set(shape.columns) <= {row[1] for row in info}:
        return False
    indexed = {
        tuple(row[2] for row in conn.execute(f"PRAGMA index_info({_quoted(index[1])})"))
        for index in conn.execute(f"PRAGMA index_list({_quoted(shape.name)})")
    }
    return set(shape.indexes) <= indexed


def ensure_table(db: sqlite_utils.Database, shape: TableShape) -> None:
    """The table of `shape`: missing columns are added (a file from an older teleclaude); a table keyed
    otherwise was not made by us and is renamed aside, like a corrupt file."""
    table = db.table(shape.name)
    if table.exists() and table.pks != shape.keys:
        aside = f"{shape.name}_moved_{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
        _log("table %s has the wrong shape: renamed it to %s and made a new one", shape.name, aside)
        db.rename_table(shape.name, aside)
    table.create(dict(shape.columns), pk=shape.pk, if_not_exists=True)
    for column in sorted(shape.columns.keys() - table.columns_dict.keys()):
        table.add_column(column, shape.columns[column])
    for columns in shape.indexes:
        table.create_index(list(columns), if_not_exists=True)


def upsert(conn: sqlite3.Connection, table: str, row: Mapping[str, object], pk: str) -> None:
    """Insert `row`, or update the given columns of the row with its key (sqlite-utils' `upsert`)."""
    names = list(row)
    updates = ", ".join(f"{_quoted(name)} = excluded.{_quoted(name)}" for name in names if name != pk)
    conflict = f" ON CONFLICT ({_quoted(pk)}) " + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")
    conn.execute(_insert(table, names) + conflict, [row[name] for name in names])


def insert_rows(conn: sqlite3.Connection, table: str, rows: Iterable[Mapping[str, object]]) -> None:
    """Insert `rows`, which all have the same columns."""
    rows = list(rows)
    if rows:
        names = list(rows[0])
        conn.executemany(_insert(table, names), [[row[name] for name in names] for row in rows])


def _insert(table: str, names: list[str]) -> str:
    columns = ", ".join(map(_quoted, names))
    return f"INSERT INTO {_quoted(table)} ({columns}) VALUES ({', '.join('?' * len(names))})"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class AvailabilityStore(SqliteStore):
    tables = (AVAILABILITY, USAGE)

    def unavailable(self, now: datetime) -> dict[str, Unavailability]:
        """The agents that are out at `now` (a `StoreError` when the file cannot be read)."""
        return _out(self.all_rows(now))

    def all_rows(self, now: datetime) -> list[AgentRow]:
        """Every agent on record, after putting back those whose time has passed."""
        if not self.path.exists():
            return []  # a read never creates the database
        return self._survive(lambda: self._read_and_reset(now))

    def mark_unavailable(self, agent: str, until: datetime, reason: str) -> Unavailability:
        self._write(marking_unavailable(agent, until, reason))
        from teleclaude.planner.core.model import Unavailability

        parsed = _parse_stored(format_utc(until))
        assert parsed is not None  # format_utc writes what _parse_stored reads
        return Unavailability(agent, parsed, reason)

    def mark_available(self, agent: str) -> None:
        row = {"agent": agent, "available": 1, "unavailable_until": None, "reason": None}
        self._write(lambda conn: upsert(conn, TABLE, row, "agent"))

    def record_usage(self, windows: Iterable[UsageWindow], now: datetime | None = None) -> None:
        """Store each window's usage as `kept_usage` keeps it (reports race, and any process may send one):
        read and written in one transaction, so two reports at once both count."""
        windows = list(windows)
        if not windows:
            return
        moment = now or datetime.now(UTC)

        def keep(conn: sqlite3.Connection) -> None:
            on_record = {(w.agent, w.window): w for w in _read_usage(conn)}
            for report in (_usage_window(*_usage_row(w)) for w in windows):  # to the second, as stored
                kept = kept_usage(on_record.get((report.agent, report.window)), report, moment)
                if kept is not None:
                    conn.execute(_UPSERT_USAGE, _usage_row(kept))
                    on_record[(kept.agent, kept.window)] = kept

        self._write(keep)

    def usage(self, now: datetime) -> dict[str, tuple[UsageWindow, ...]]:
        """Each agent's windows that have not reset by `now`, by window name."""
        if not self.path.exists():
            return {}
        return _current(self._survive(lambda: self._with_reader(_read_usage)), now)

    def on_record(self, now: datetime) -> AgentsOnRecord:
        """`unavailable(now)` and `usage(now)` in one read of the file (the planner's hot path)."""
        if not self.path.exists():
            return AgentsOnRecord({}, {})

        def read(conn: sqlite3.Connection) -> tuple[list[AgentRow], list[UsageWindow]]:
            return _read_and_reset(conn, now), _read_usage(conn)

        rows, windows = self._survive(lambda: self._with_reader(read))
        return AgentsOnRecord(_out(rows), _current(windows, now))

    # --- reading ---------------------------------------------------------------------------------------

    def _with_reader(self, read: Callable[[sqlite3.Connection], T]) -> T:
        with closing(self._connect(writing=False)) as conn:
            return read(conn)

    def _read_and_reset(self, now: datetime) -> list[AgentRow]:
        return self._with_reader(partial(_read_and_reset, now=now))


def marking_unavailable(agent: str, until: datetime, reason: str) -> Callable[[sqlite3.Connection], None]:
    """The write that marks `agent` out until `until`, to run in any store's transaction on the same file
    (a session's RATE_LIMITED change and its agent's mark are one write: whoever sees one sees both)."""
    row = {"agent": agent, "available": 0, "unavailable_until": format_utc(until), "reason": reason}

    def mark(conn: sqlite3.Connection) -> None:
        ensure_tables(conn, (AVAILABILITY,))
        upsert(conn, TABLE, row, "agent")

    return mark


@dataclass(frozen=True)
class AgentsOnRecord:
    """What the store knows of the agents at one moment: who is out, and each one's current usage."""

    unavailable: Mapping[str, Unavailability]
    usage: Mapping[str, tuple[UsageWindow, ...]]


def _out(rows: Iterable[AgentRow]) -> dict[str, Unavailability]:
    from teleclaude.planner.core.model import Unavailability

    return {
        row.agent: Unavailability(row.agent, row.until, row.reason)
        for row in rows
        if not row.available and row.until is not None
    }


def _current(windows: Iterable[UsageWindow], now: datetime) -> dict[str, tuple[UsageWindow, ...]]:
    current: dict[str, list[UsageWindow]] = {}
    for window in windows:
        if window.current(now):
            current.setdefault(window.agent, []).append(window)
    return {agent: tuple(found) for agent, found in current.items()}


def _read_usage(conn: sqlite3.Connection) -> list[UsageWindow]:
    if not _has_table(conn, USAGE_TABLE):
        return []
    query = f"SELECT agent, window, used_percent, resets_at, seen_at FROM {USAGE_TABLE} ORDER BY 1, 2"
    return [_usage_window(*columns) for columns in conn.execute(query)]


def _read_and_reset(conn: sqlite3.Connection, now: datetime) -> list[AgentRow]:
    """Every agent on record, putting back (in the file too) those whose time has passed."""
    if not _has_table(conn):
        return []
    query = f"SELECT agent, available, unavailable_until, reason FROM {TABLE} ORDER BY agent"
    stored = conn.execute(query).fetchall()
    rows = [_agent_row(*columns) for columns in stored]
    expired = {row.agent for row in rows if _expired(row, now)}
    if expired:
        _reset(conn, [(agent, until_text) for agent, _, until_text, _ in stored if agent in expired])
    return [AgentRow(row.agent, True, None) if row.agent in expired else row for row in rows]


def _into_wal(conn: sqlite3.Connection, seconds: float) -> None:
    """WAL mode for the file (a no-op once it has it). The pragma can answer `database is locked` at once,
    without waiting on the busy timeout, while another process's last connection checkpoints the file on its
    close: it is tried again until the timeout."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA schema_version").fetchone()[0])


def _has_table(conn: sqlite3.Connection, name: str = TABLE) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(query, (name,)).fetchone() is not None


_UPSERT_USAGE = (
    f"INSERT INTO {USAGE_TABLE} (agent, window, used_percent, resets_at, seen_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (agent, window) DO UPDATE SET used_percent = excluded.used_percent, "
    "resets_at = excluded.resets_at, seen_at = excluded.seen_at"
)


def _usage_row(w: UsageWindow) -> tuple[str, str, float, str | None, str]:
    return (w.agent, w.window, float(w.used_percent), _stored_or_none(w.resets_at), format_utc(w.seen_at))


def _stored_or_none(when: datetime | None) -> str | None:
    return None if when is None else format_utc(when)


def _usage_window(agent: str, window: str, used: float, resets: str | None, seen: str | None) -> UsageWindow:
    seen_at = _parse_stored(seen) or datetime.fromtimestamp(0, UTC)
    return UsageWindow(agent, window, float(used or 0), _parse_stored(resets), seen_at)


def _reset(conn: sqlite3.Connection, expired: list[tuple[str, str | None]]) -> None:
    """Put agents back, unless someone marked them again since we read (compare-and-set on the time)."""
    with _immediate(conn):
        conn.executemany(
            f"UPDATE {TABLE} SET available = 1, unavailable_until = NULL, reason = NULL "
            "WHERE agent = ? AND available = 0 AND unavailable_until IS ?",
            expired,
        )


def _expired(row: AgentRow, now: datetime) -> bool:
    return not row.available and (row.until is None or row.until <= now)


def _agent_row(agent: str, available: object, until_text: str | None, reason: str | None) -> AgentRow:
    if available:
        return AgentRow(agent, True, None)
    return AgentRow(agent, False, _parse_stored(until_text), reason or "")


def _parse_stored(text: str | None) -> datetime | None:
    """A stored time; None for a missing or mangled one (the row then counts as expired)."""
    try:
        parsed = datetime.fromisoformat(text or "")
    except (ValueError, TypeError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _log(message: str, *args: object) -> None:
    """A warning of a mended file: logging imported only then (it costs every planner call that reads)."""
    import logging

    logging.getLogger("teleclaude").warning(message, *args)
