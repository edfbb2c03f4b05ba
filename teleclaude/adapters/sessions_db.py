"""Worker sessions and their events in SQLite, in the same file as agent availability.

State changes are compare-and-set on the stored state, and an event is written in the same transaction as
the change that causes it: two observers of one pane (the MCP server and a CLI) never report it twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import asdict, fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from teleclaude.adapters.store import SqliteStore
from teleclaude.core.sessions import Event, EventKind, Session, SessionState

if TYPE_CHECKING:
    import sqlite_utils

SESSIONS = "sessions"
EVENTS = "session_events"
_TIMES = ("created_at", "updated_at", "delivered_at", "last_change_at")
_SESSION_COLUMNS = {
    "id": str,
    "agent": str,
    "command": str,
    "args": str,
    "project": str,
    "subfolder": str,
    "state": str,
    "created_at": str,
    "updated_at": str,
    "computer": str,
    "tmux_session": str,
    "pane_id": str,
    "pane_pid": int,
    "delivered_at": str,
    "exit_code": int,
    "last_error": str,
    "scan_cursor": str,
    "screen_hash": str,
    "last_change_at": str,
    "prompt_polls": int,
}
_EVENT_COLUMNS = {"id": int, "session_id": str, "kind": str, "at": str, "detail": str, "delivered": int}


class SessionStore(SqliteStore):
    def create_tables(self, db: sqlite_utils.Database) -> None:
        db.table(SESSIONS).create(_SESSION_COLUMNS, pk="id", if_not_exists=True)
        db.table(EVENTS).create(_EVENT_COLUMNS, pk="id", if_not_exists=True)
        db.table(EVENTS).create_index(["session_id", "delivered"], if_not_exists=True)

    # --- sessions ------------------------------------------------------------------------------------------

    def add(self, session: Session) -> None:
        self._write(lambda db: db.table(SESSIONS).insert(_row(session)))

    def get(self, session_id: str) -> Session | None:
        found = self._select(f"SELECT * FROM {SESSIONS} WHERE id = ?", (session_id,))
        return _session(found[0]) if found else None

    def sessions(self, ids: Iterable[str] | None = None) -> list[Session]:
        if ids is None:
            rows = self._select(f"SELECT * FROM {SESSIONS} ORDER BY created_at, id")
        else:
            wanted = list(ids)
            marks = ",".join("?" * len(wanted))
            rows = self._select(
                f"SELECT * FROM {SESSIONS} WHERE id IN ({marks}) ORDER BY created_at, id", wanted
            )
        return [_session(row) for row in rows]

    def save(self, session: Session, expect: SessionState | None = None, event: Event | None = None) -> bool:
        """Store `session`; with `expect`, only if the stored state still is `expect` (then also `event`)."""

        def change(db: sqlite_utils.Database) -> bool:
            if expect is not None:
                stored = db.execute(f"SELECT state FROM {SESSIONS} WHERE id = ?", [session.id]).fetchone()
                if stored is None or stored[0] != expect.value:
                    return False
            db.table(SESSIONS).upsert(_row(session), pk="id")
            if event is not None:
                db.table(EVENTS).insert(_event_row(event))
            return True

        return self._write(change)

    # --- events --------------------------------------------------------------------------------------------

    def undelivered(self, ids: Iterable[str]) -> list[Event]:
        wanted = list(ids)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        rows = self._select(
            f"SELECT * FROM {EVENTS} WHERE delivered = 0 AND session_id IN ({marks}) ORDER BY id", wanted
        )
        return [_event(row) for row in rows]

    def mark_delivered(self, events: Iterable[Event]) -> None:
        ids = [(event.id,) for event in events]
        if ids:
            self._write(
                lambda db: db.conn.executemany(f"UPDATE {EVENTS} SET delivered = 1 WHERE id = ?", ids)
            )

    # --- reading -------------------------------------------------------------------------------------------

    def _select(self, query: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        if not self.path.exists():
            return []

        def read() -> list[sqlite3.Row]:
            with closing(self._connect(writing=False)) as conn:
                conn.row_factory = sqlite3.Row
                try:
                    return conn.execute(query, list(params)).fetchall()
                except sqlite3.OperationalError as error:
                    if "no such table" in str(error):
                        return []
                    raise

        return self._survive_corruption(read)


def _row(session: Session) -> dict[str, Any]:
    row = asdict(session)
    row["state"] = session.state.value
    for name in _TIMES:
        row[name] = _stamp(row[name])
    return row


def _session(row: sqlite3.Row) -> Session:
    values = {f.name: row[f.name] for f in fields(Session) if f.name in row.keys()}  # noqa: SIM118 (sqlite3.Row has no __contains__ for names)
    values["state"] = SessionState(values["state"])
    for name in _TIMES:
        values[name] = _time(values[name])
    values["subfolder"] = values["subfolder"] or None
    for text in ("last_error", "scan_cursor", "screen_hash", "tmux_session", "pane_id", "computer"):
        values[text] = values[text] or ""
    values["pane_pid"] = values["pane_pid"] or 0
    values["prompt_polls"] = values["prompt_polls"] or 0
    return Session(**values)


def _event_row(event: Event) -> dict[str, Any]:
    return {
        "session_id": event.session_id,
        "kind": event.kind.value,
        "at": _stamp(event.at),
        "detail": event.detail,
        "delivered": 0,
    }


def _event(row: sqlite3.Row) -> Event:
    return Event(row["session_id"], EventKind(row["kind"]), _time(row["at"]), row["detail"] or "", row["id"])


def _stamp(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds") if moment else None


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
