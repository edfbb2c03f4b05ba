"""What a worker used, read from its CLI's own record of the session (the driver's `TokenReport`): a file of
text its stop hook names, or an SQLite database of the CLI's, only ever read. Whatever is wrong with the
record (missing, locked, too big, corrupt, hostile) makes it unknown (None), never 0 and never a traceback.
Used by the stop hook (runtime/hooks/record.py) and by the runtime's later look (runtime/spend.py).
"""

from __future__ import annotations

import os

from teleclaude.adapters.hook_db import readonly_uri, sqlite3

TYPE_CHECKING = False  # typing's own, without importing typing (a stop hook imports this module)
if TYPE_CHECKING:
    from collections.abc import Callable

    from teleclaude.agents.tokens import DatabaseRecord, TokenReport, Tokens

RECORD_MOST = 64 * 1024 * 1024  # bytes of a CLI's record read for what its session used; past it: unknown
ROWS_MOST = 100_000  # rows of a CLI's database read for one session; past them: unknown
BUSY_MS = 1000  # a database the CLI is writing: waited on this long, then unknown


def read_use(report: TokenReport, path: str, conversation: str) -> Tokens | None:
    """What the session used so far by its CLI's record: the file at `path` (a transcript), or the database
    at `path` for the CLI's own session id `conversation`. None: unknown."""
    if report.database is not None:
        return query_record(path, conversation, report.database) if path and conversation else None
    if report.read is not None and path:
        return read_record(path, report.read)
    return None


def read_record(path: str, reader: Callable[[str], Tokens | None]) -> Tokens | None:
    """`reader` of the text of the file at `path`; None when it is missing, unreadable or past RECORD_MOST."""
    most = RECORD_MOST
    try:
        with open(path, "rb") as file:
            data = file.read(most + 1)
    except OSError:
        return None
    if len(data) > most:
        return None
    return reader(data.decode("utf-8", errors="replace"))


def query_record(path: str, conversation: str, database: DatabaseRecord) -> Tokens | None:
    """`database.read` of the rows its query selects for `conversation`, the file opened read-only: never
    written, never made, no code of its schema run (`trusted_schema` off). None on any fault."""
    rows = query_rows(path, database.query, conversation)
    return None if rows is None else database.read(rows)


def query_rows(path: str, query: str, conversation: str) -> list[tuple[object, ...]] | None:
    """The rows `query` (bound as `conversation`) selects from the database at `path`, opened as
    `query_record` opens it; None on any fault, or past ROWS_MOST rows."""
    if not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=BUSY_MS / 1000)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        rows = conn.execute(query, (conversation,)).fetchmany(ROWS_MOST + 1)
    except (sqlite3.Error, OverflowError, ValueError):
        return None
    finally:
        conn.close()
    if len(rows) > ROWS_MOST:
        return None
    return [tuple(row) for row in rows]
