"""Worker sessions and their events in SQLite, in the same file as agent availability.

State changes are compare-and-set on the stored state, and an event is written in the same transaction as
the change that causes it: two observers of one pane (the MCP server and a CLI) never report it twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from functools import cache

from teleclaude.adapters.hook_db import EVENTS, INSERT_TOOL_USE, PRUNE_TOOL_USES, SESSIONS, TOOL_USES
from teleclaude.adapters.hook_db import stamp as _stamp
from teleclaude.adapters.store import SqliteStore, TableShape, insert_rows, upsert

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from teleclaude.agents.tokens import Tokens
    from teleclaude.planner.core.tool_lines import ToolUse
    from teleclaude.runtime.core.sessions import Event, Session, SessionState

# The session model and the tool-use record are imported by the methods that build them: the planner reads
# `latest_failure` on every dispatch, and defining their ~12 dataclasses would cost it ~12 ms.

RUNS = "runs"
SPEND = "spend"  # what each session used so far, a row each time its stop hook read a change
_TIMES = (
    "created_at",
    "updated_at",
    "delivered_at",
    "last_change_at",
    "last_progress_at",
    "status_at",
    "last_nudge_at",
    "last_digest_at",
    "cycle_started_at",
    "tool_seen_at",
    "stopped_at",
)
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
    "last_progress_at": str,
    "status_text": str,
    "status_at": str,
    "nudges": int,
    "last_nudge_at": str,
    "last_digest_at": str,
    "digest_escalated": int,
    "activity": str,
    "cycle_started_at": str,
    "sent_back": int,
    "transcript": str,
    "tool_seen_at": str,
    "seen_rows": str,  # row hashes, space-separated
    "stopped_at": str,
    "key": str,  # the session's own, given to its worker only (runtime/core/marks.py)
    "run_id": str,  # the `teleclaude run` that started it (a file from an older teleclaude gets it added)
    "parent": str,
    "parent_agent": str,
    "parent_pending": str,
    "parent_told": int,
    "conversation": str,
    "resumed_from": str,
    "handed_over_from": str,
    "version": int,
}
# SessionState.ERRORED and NEEDS_ATTENTION, spelled out so the planner's read imports no session model.
FAILED_STATES = ("errored", "needs_attention")
FINAL_STATES = ("done", "errored", "cancelled")  # SessionState.is_final, spelled out for the same reason
_EVENT_COLUMNS = {"id": int, "session_id": str, "kind": str, "at": str, "detail": str, "delivered": int}
_TOOL_USE_COLUMNS = {"id": int, "session_id": str, "at": str, "tool": str, "target": str}
_SPEND_COLUMNS = {
    "id": int,
    "session_id": str,
    "at": str,
    "input": int,
    "cached": int,
    "output": int,
    "reasoning": int,
    "cost_usd": float,
    "model": str,
    "read_state": str,  # where a worker's stop hook read its transcript up to (runtime/hooks/transcript.py)
}
_RUN_COLUMNS = {"id": str, "project": str, "slug": str, "started_at": str, "ended_at": str, "outcome": str}


@dataclass(frozen=True)
class RunRow:
    """One `teleclaude run`: its sessions carry its id; `ended_at` is None while it runs (or was killed)."""

    id: str
    project: str
    slug: str  # "" for the whole roadmap
    started_at: datetime
    ended_at: datetime | None = None
    outcome: str = ""  # the report's outcome (COMPLETE, SELF, …); "" while it runs


# the sessions of one project's item: its args are the slug, or start with it (`slug extra words`)
_OF_ITEM = "project = ? AND (args = ? OR args LIKE ?)"


# a worker started ahead of its step (`teleclaude run`'s warm start) is no item's newest worker while it waits
# for its command, nor once it was ended without it
_A_WORKER = "NOT (delivered_at IS NULL AND state IN ('pending', 'cancelled'))"


def _of_item(project: str, slug: str) -> tuple[str, str, str]:
    return project, slug, f"{slug} %"


class SessionStore(SqliteStore):
    tables = (
        TableShape(SESSIONS, _SESSION_COLUMNS, "id"),
        TableShape(EVENTS, _EVENT_COLUMNS, "id", indexes=(("session_id", "delivered"),)),
        TableShape(TOOL_USES, _TOOL_USE_COLUMNS, "id", indexes=(("session_id", "id"),)),
        TableShape(RUNS, _RUN_COLUMNS, "id"),
        TableShape(SPEND, _SPEND_COLUMNS, "id", indexes=(("session_id", "id"), ("at",))),
    )

    # --- sessions ------------------------------------------------------------------------------------------

    def add(self, session: Session) -> None:
        self._write(lambda conn: insert_rows(conn, SESSIONS, [_row(session)]))

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

    def live_computers(self) -> set[str]:
        """The computers that sessions not yet final run on (read as one plain column)."""
        marks = ",".join("?" * len(FINAL_STATES))
        query = f"SELECT DISTINCT computer FROM {SESSIONS} WHERE state NOT IN ({marks})"
        rows = self._select(query, FINAL_STATES)
        return {row["computer"] for row in rows}

    def computers_of(self, project: str, slug: str) -> set[str]:
        """The computers sessions of `project` for `slug` ran on, whatever their state (one plain column)."""
        rows = self._select(
            f"SELECT DISTINCT computer FROM {SESSIONS} WHERE {_OF_ITEM}", _of_item(project, slug)
        )
        return {row["computer"] for row in rows}

    def latest(self, project: str, slug: str) -> Session | None:
        """The newest session of `project` whose args start with `slug` (one that got its command, or failed
        or ended by itself without it)."""
        found = self._select(
            f"SELECT * FROM {SESSIONS} WHERE {_OF_ITEM} AND {_A_WORKER} "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            _of_item(project, slug),
        )
        return _session(found[0]) if found else None

    def latest_failure(self, project: str, slug: str) -> tuple[str, str, str] | None:
        """(command, agent, last error) of the newest session of `project` for `slug` when it failed.

        Read as plain columns: the planner asks on every dispatch and need not load the session model.
        """
        found = self._select(
            f"SELECT state, command, agent, last_error FROM {SESSIONS} WHERE {_OF_ITEM} AND {_A_WORKER} "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            _of_item(project, slug),
        )
        if not found or found[0]["state"] not in FAILED_STATES or not found[0]["last_error"]:
            return None
        return found[0]["command"], found[0]["agent"], found[0]["last_error"]

    def save(
        self,
        session: Session,
        expect: SessionState | None = None,
        events: Iterable[Event] = (),
        also: Callable[[sqlite3.Connection], None] | None = None,
    ) -> Session | None:
        """Store `session` and `events`; the stored copy (its version counted up), or None when refused.

        With `expect`, only if the stored row is still the one `session` was made from: the state is
        `expect` and nobody saved since (the same `version`). A stale observer never overwrites a newer row.
        `also` is written in the same transaction, only when the session is.
        """
        events = list(events)

        def change(conn: sqlite3.Connection) -> Session | None:
            stored = conn.execute(
                f"SELECT state, version FROM {SESSIONS} WHERE id = ?", [session.id]
            ).fetchone()
            version = (stored[1] or 0) if stored else session.version
            if expect is not None and (
                stored is None or stored[0] != expect.value or version != session.version
            ):
                return None
            saved = replace(session, version=version + 1)
            upsert(conn, SESSIONS, _row(saved), "id")
            insert_rows(conn, EVENTS, (_event_row(event) for event in events))
            if also is not None:
                also(conn)
            return saved

        return self._write(change)

    def name_transcript(self, session_id: str, path: str, conversation: str = "") -> bool:
        """The session's transcript (its CLI's record of it) and the CLI's own id of it, when news (a hook
        names them: runtime/hook_news.py). True once the stored row shows them (or there is no such
        session); False when another writer saved first."""
        session = self.get(session_id)
        conversation = conversation or (session.conversation if session else "")
        if session is None or (session.transcript, session.conversation) == (path, conversation):
            return True
        named = replace(session, transcript=path, conversation=conversation)
        return self.save(named, expect=session.state) is not None

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
            self._write(lambda conn: conn.executemany(f"UPDATE {EVENTS} SET delivered = 1 WHERE id = ?", ids))

    # --- tool uses (reported by the agent CLI's tool hook) -----------------------------------------------

    def add_tool_use(self, use: ToolUse) -> None:
        """Record `use`, keeping the session's latest KEPT. Run by a hook before every tool call, so the
        common case (the tables exist) is plain sqlite3, without importing sqlite-utils."""
        from teleclaude.runtime.core.tool_uses import KEPT

        row = (use.session_id, _stamp(use.at), use.tool, use.target)
        insert, prune = INSERT_TOOL_USE, PRUNE_TOOL_USES

        def plain() -> bool:
            with closing(self._connect()) as conn, conn:
                try:
                    conn.execute(insert, row)
                except sqlite3.OperationalError as error:
                    if "no such table" in str(error):
                        return False
                    raise
                conn.execute(prune, (use.session_id, use.session_id, KEPT))
            return True

        def change(conn: sqlite3.Connection) -> None:
            conn.execute(insert, row)
            conn.execute(prune, (use.session_id, use.session_id, KEPT))

        if not (self.path.exists() and self._survive(plain)):
            self._write(change)

    def recent_tool_uses(
        self, ids: Iterable[str], limit: int | None = None
    ) -> dict[str, tuple[ToolUse, ...]]:
        """session id -> its latest `limit` (default `tool_lines.SHOWN`) tool uses, oldest first (sessions
        without any are left out)."""
        from teleclaude.planner.core.tool_lines import SHOWN, ToolUse

        limit = SHOWN if limit is None else limit
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        query = f"SELECT * FROM {TOOL_USES} WHERE session_id IN ({marks}) ORDER BY session_id, id DESC"
        newest: dict[str, list[sqlite3.Row]] = {}
        for row in self._select(query, wanted):  # at most KEPT rows a session are kept
            rows = newest.setdefault(row["session_id"], [])
            if len(rows) < limit:
                rows.append(row)
        return {
            session_id: tuple(
                ToolUse(
                    row["session_id"], row["tool"], row["target"] or "", datetime.fromisoformat(row["at"])
                )
                for row in reversed(newest[session_id])
            )
            for session_id in wanted
            if session_id in newest
        }

    # --- runs (`teleclaude run`: what its report and the board's timeline draw) ---------------------------

    def add_run(self, run: RunRow) -> None:
        self._write(lambda conn: upsert(conn, RUNS, _run_row(run), "id"))

    def end_run(self, run_id: str, ended_at: datetime, outcome: str) -> None:
        update = f"UPDATE {RUNS} SET ended_at = ?, outcome = ? WHERE id = ?"
        self._write(lambda conn: conn.execute(update, [_stamp(ended_at), outcome, run_id]))

    def run(self, run_id: str) -> RunRow | None:
        found = self._select(f"SELECT * FROM {RUNS} WHERE id = ?", (run_id,))
        return _run(found[0]) if found else None

    def latest_run(self, project: str) -> RunRow | None:
        found = self._select(
            f"SELECT * FROM {RUNS} WHERE project = ? ORDER BY started_at DESC, rowid DESC LIMIT 1", (project,)
        )
        return _run(found[0]) if found else None

    def sessions_of_run(self, run_id: str) -> list[Session]:
        rows = self._select(f"SELECT * FROM {SESSIONS} WHERE run_id = ? ORDER BY created_at, id", (run_id,))
        return [_session(row) for row in rows]

    def events(self, ids: Iterable[str]) -> list[Event]:
        """Every event of the sessions `ids`, delivered or not, oldest first."""
        wanted = list(ids)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        rows = self._select(f"SELECT * FROM {EVENTS} WHERE session_id IN ({marks}) ORDER BY id", wanted)
        return [_event(row) for row in rows]

    # --- spend (read by the workers' stop hooks from their CLI's record: runtime/core/spend.py) -------------

    def add_spend(self, session_id: str, at: datetime, tokens: Tokens) -> bool:
        """Keep the session's use so far, when it differs from its last reading. True: kept or unchanged."""
        last = self._last_spend(session_id)
        if tokens.cost_usd is None and last and last[0]["cost_usd"] is not None:
            tokens = replace(tokens, cost_usd=last[0]["cost_usd"])  # `keep_cost`'s, until the next
        row: tuple[object, ...] = (session_id, _stamp(at), tokens.input, tokens.cached, tokens.output)
        row += (tokens.reasoning, tokens.cost_usd, tokens.model)
        if last and tuple(last[0])[1:] == row[2:]:
            return True
        insert = (
            f"INSERT INTO {SPEND} (session_id, at, input, cached, output, reasoning, cost_usd, model) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self._write(lambda conn: conn.execute(insert, row))
        return True

    def amend_spend(self, session_id: str, at: datetime, tokens: Tokens) -> bool:
        """A later look at the record its last reading was read from (the turn is over, or the worker ends):
        that reading made right when `tokens` says more (`Tokens.ahead_of`), so that a turn stays one
        reading; the first reading when there is none. False: nothing to change."""
        from teleclaude.agents.tokens import Tokens

        last = self._last_spend(session_id)
        if not last:
            return self.add_spend(session_id, at, tokens)
        row = last[0]
        kept = Tokens(
            row["input"], row["cached"], row["output"], row["reasoning"], row["cost_usd"], row["model"] or ""
        )
        if tokens.cost_usd is None:
            tokens = replace(tokens, cost_usd=kept.cost_usd)  # the status line's (`keep_cost`), if any
        if not tokens.ahead_of(kept):
            return False
        update = (
            f"UPDATE {SPEND} SET input = ?, cached = ?, output = ?, reasoning = ?, cost_usd = ?, model = ? "
            "WHERE id = ?"
        )
        values = (tokens.input, tokens.cached, tokens.output, tokens.reasoning, tokens.cost_usd)
        self._write(lambda conn: conn.execute(update, (*values, tokens.model or kept.model, row["id"])))
        return True

    def set_cost(self, session_id: str, usd: float) -> bool:
        """What the CLI says the session cost so far, set on its latest reading (as `hook_db.keep_cost` sets
        a local worker's); False when it has none yet or the cost is the same."""
        from teleclaude.adapters.hook_db import LAST_SPEND, SET_COST

        last = self._select(LAST_SPEND, (session_id,))
        if not last or last[0]["cost_usd"] == usd:
            return False
        self._write(lambda conn: conn.execute(SET_COST, (usd, last[0]["id"])))
        return True

    def _last_spend(self, session_id: str) -> list[sqlite3.Row]:
        return self._select(
            f"SELECT id, input, cached, output, reasoning, cost_usd, model FROM {SPEND} "
            "WHERE session_id = ? ORDER BY id DESC LIMIT 1",
            (session_id,),
        )

    def spend_readings(
        self, ids: Iterable[str] | None = None, since: datetime | None = None
    ) -> list[tuple[str, datetime, Tokens]]:
        """(session id, when read, its use so far) of the sessions `ids` (None: every session), oldest
        first; `since`: only the sessions read since then, with all their readings (a day's use needs the
        reading before the day)."""
        from teleclaude.agents.tokens import Tokens

        query, params = f"SELECT * FROM {SPEND}", list[object]()
        if ids is not None:
            wanted = list(dict.fromkeys(ids))
            if not wanted:
                return []
            query += f" WHERE session_id IN ({','.join('?' * len(wanted))})"
            params = list(wanted)
        elif since is not None:
            query += f" WHERE session_id IN (SELECT session_id FROM {SPEND} WHERE at >= ?)"
            params = [_stamp(since)]
        return [
            (
                row["session_id"],
                datetime.fromisoformat(row["at"]),
                Tokens(
                    row["input"],
                    row["cached"],
                    row["output"],
                    row["reasoning"],
                    row["cost_usd"],
                    row["model"] or "",
                ),
            )
            for row in self._select(query + " ORDER BY id", params)
        ]

    # --- reading -------------------------------------------------------------------------------------------

    def _select(self, query: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        if not self.path.exists():
            return []

        def read() -> list[sqlite3.Row]:
            with self._reading() as conn:
                conn.row_factory = sqlite3.Row
                try:
                    return conn.execute(query, list(params)).fetchall()
                except sqlite3.OperationalError as error:
                    if "no such table" in str(error):
                        return []
                    raise

        return self._survive(read)


def _row(session: Session) -> dict[str, Any]:
    # its fields as they are (all plain values): `asdict` deep-copied each, most of a save's cost
    row = {name: getattr(session, name) for name in _session_fields()}
    row["state"] = session.state.value
    row["activity"] = session.activity.value
    row["digest_escalated"] = int(session.digest_escalated)
    row["parent_told"] = int(session.parent_told)
    row["seen_rows"] = " ".join(session.seen_rows)
    for name in _TIMES:
        row[name] = _stamp(row[name])
    return row


# The rows last read as sessions, by id, with what they were read as: `teleclaude run` reads its workers'
# rows every second, and a row that did not change since is the same (frozen) Session. Bounded: cleared
# when it outgrows `_PARSED_MAX` (a read of every session of a long-used file).
_parsed: dict[str, tuple[tuple[Any, ...], Session]] = {}
_PARSED_MAX = 1024


def _session(row: sqlite3.Row) -> Session:
    """A row as a Session; columns a file from an older teleclaude lacks take the field's default."""
    whole = tuple(row)
    known = _parsed.get(row["id"])
    if known is not None and known[0] == whole:
        return known[1]
    session = _read_session(row)
    if len(_parsed) >= _PARSED_MAX:
        _parsed.clear()
    _parsed[session.id] = (whole, session)
    return session


@cache
def _session_fields() -> frozenset[str]:
    from teleclaude.runtime.core.sessions import Session

    return frozenset(f.name for f in fields(Session))


def _read_session(row: sqlite3.Row) -> Session:
    from teleclaude.runtime.core.sessions import Activity, Session, SessionState

    names = _session_fields()
    values = {key: row[key] for key in row.keys() if key in names and row[key] is not None}  # noqa: SIM118 (sqlite3.Row has keys() only)
    values["subfolder"] = values.get("subfolder") or None
    values["state"] = SessionState(values["state"])
    for name in _TIMES:
        if name in values:
            values[name] = _time(values[name])
    for flag in ("digest_escalated", "parent_told"):
        if flag in values:
            values[flag] = bool(values[flag])
    if "activity" in values:
        values["activity"] = Activity(values["activity"])
    values["seen_rows"] = tuple(values.get("seen_rows", "").split())
    return Session(**values)


def _run_row(run: RunRow) -> dict[str, Any]:
    return {**asdict(run), "started_at": _stamp(run.started_at), "ended_at": _stamp(run.ended_at)}


def _run(row: sqlite3.Row) -> RunRow:
    started = _time(row["started_at"])
    assert started is not None  # add_run writes it
    return RunRow(
        row["id"], row["project"], row["slug"] or "", started, _time(row["ended_at"]), row["outcome"] or ""
    )


def _event_row(event: Event) -> dict[str, Any]:
    return {
        "session_id": event.session_id,
        "kind": event.kind.value,
        "at": _stamp(event.at),
        "detail": event.detail,
        "delivered": 0 if event.kind.told else 1,  # history only: no wait returns for it
    }


def _event(row: sqlite3.Row) -> Event:
    from teleclaude.runtime.core.sessions import Event, EventKind

    return Event(
        row["session_id"],
        EventKind(row["kind"]),
        datetime.fromisoformat(row["at"]),
        row["detail"] or "",
        row["id"],
    )


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
