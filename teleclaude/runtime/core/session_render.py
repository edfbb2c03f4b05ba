"""The runtime's answers as text (what MCP tools and the CLI print) and as JSON-ready dicts.

First lines say what the answer is: `SESSION:`, `OUTPUT:`, `EVENTS:`, `NO_EVENTS:`, `SESSIONS:`, `OK:`, and
the second line of each carries `key="value"` fields an orchestrator can read without parsing prose.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.errors import FrontEnd, call
from teleclaude.planner.core.terminal import printable
from teleclaude.runtime.core.sessions import (
    Ended,
    Event,
    EventKind,
    Output,
    Reported,
    Session,
    Started,
    Waited,
)
from teleclaude.runtime.core.spend import Total
from teleclaude.runtime.core.supervision import MARK, digest_rule

Answer = Started | Output | Waited | Ended | Reported | list[Session]
Tools = Mapping[str, Sequence[str]]  # session id -> its latest tool uses, a line each (Runtime.recent_tools)
Spent = Mapping[str, Total]  # session id -> what it used (runtime/spend.py `per_session`)


def session_text(
    answer: Answer, tools: Tools | None = None, front_end: FrontEnd = FrontEnd.CLI, spent: Spent | None = None
) -> str:
    """The answer as text; the next steps it names are spelled for `front_end` (a CLI verb, an MCP tool)."""
    if isinstance(answer, Started):
        return _started(answer.session, front_end)
    if isinstance(answer, Reported):
        then = (
            "The supervisor runs wait_cmd, waits for your pane to be quiet, then ends your session or types "
            "one directive."
            if answer.cycle
            else "Carry on."
        )
        return (
            f"OK: status recorded for session {answer.session.id}.\n"
            + _fields(_summary(answer.session))
            + f"\n{then}"
        )
    if isinstance(answer, Output):
        return _output(answer)
    if isinstance(answer, Waited):
        return _waited(answer)
    if isinstance(answer, Ended):
        return f"OK: session {answer.session.id} ended ({answer.session.state.value}).\n" + _fields(
            _summary(answer.session)
        )
    return _listing(answer, tools or {}, spent or {})


def session_dict(answer: Answer, tools: Tools | None = None, spent: Spent | None = None) -> Any:
    if isinstance(answer, Started | Ended):
        return _session_dict(answer.session)
    if isinstance(answer, Reported):
        return {**_session_dict(answer.session), "cycle": answer.cycle}
    if isinstance(answer, Output):
        return {"session": _session_dict(answer.session), **_chunk_dict(answer)}
    if isinstance(answer, Waited):
        return {
            "events": [_event_dict(e) for e in answer.events],
            "sessions": [_session_dict(s) for s in answer.sessions],
            "timed_out": answer.timed_out,
        }
    return [
        {**_session_dict(s), "recent_tools": list((tools or {}).get(s.id, ()))}
        | ({"spend": spent[s.id].as_json()} if spent and s.id in spent else {})
        for s in answer
    ]


def _started(session: Session, front_end: FrontEnd) -> str:
    wait = call("wait_for_sessions", session_ids=(session.id,)).spelled(front_end)
    watch = call("get_session_output", session_id=session.id).spelled(front_end)
    if session.parent:  # the supervisor pushes its digests: nothing to poll
        return "\n".join(
            (
                f"SESSION: {session.id} started",
                _fields(_summary(session)),
                f"You are its parent: a digest of it (one line, starting `{MARK}`) will be typed into "
                f"your prompt {digest_rule(RuntimeConfig())} and when its turn ends, so you "
                f"may end your turn now. Or wait for it with {wait}.",
            )
        )
    return "\n".join(
        (
            f"SESSION: {session.id} started",
            _fields(_summary(session)),
            f"Wait for it with {wait}: it returns when the worker's turn ends, it exits or",
            f"hits a limit (call it again after a timeout). Watch it with {watch}.",
        )
    )


def _output(answer: Output) -> str:
    chunk = answer.chunk
    fields = {
        "session_id": answer.session.id,
        "state": answer.session.state.value,
        "cursor": chunk.cursor.encode(),
        "lines": len(chunk.rows),
        "lines_missed": "unknown" if chunk.lines_missed is None else chunk.lines_missed,
        "truncated": chunk.truncated,
        "alternate_screen": chunk.alternate_screen,
        "pane_dead": chunk.pane_dead,
    }
    body = [printable(row) for row in (*chunk.rows, *([chunk.partial] if chunk.partial else []))]
    return "\n".join([f"OUTPUT: {answer.session.id}", _fields(fields), "---", *body])


def _waited(answer: Waited) -> str:
    if not answer.events:
        head = (
            "NO_EVENTS: the wait timed out; call it again"
            if answer.timed_out
            else "NO_EVENTS: nothing is running"
        )
        return "\n".join([head, *(_fields(_summary(s)) for s in answer.sessions)])
    lines = [f"EVENTS: {len(answer.events)}"]
    for event in answer.events:
        lines.append(_fields(_event_dict(event)))
        if event.kind is EventKind.DIGEST:  # the digest once more, readable
            lines += [f"    {printable(row)}" for row in event.detail.splitlines()]
    lines += ["sessions:", *(_fields(_summary(s)) for s in answer.sessions)]
    return "\n".join(lines)


def _listing(sessions: list[Session], tools: Tools, spent: Spent) -> str:
    lines = [f"SESSIONS: {len(sessions)}"]
    for session in sessions:
        used = {"used": spent[session.id].text()} if session.id in spent else {}
        lines.append(_fields(_summary(session) | used))
        lines += [
            f"    {line}" for line in tools.get(session.id, ())
        ]  # already escaped by tool_lines (planner/core/tool_lines.py)
    return "\n".join(lines)


def _summary(session: Session) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "session_id": session.id,
        "state": session.state.value,
        "agent": session.agent,
        "command": session.command,
        "args": session.args,
        "workdir": session.workdir,
    }
    if session.resumed_from:  # it goes on in that worker's conversation (core/continuation.py)
        fields["resumed_from"] = f"tc-{session.resumed_from}"
    if session.handed_over_from:  # it took over that worker's step, with a continuation note
        fields["handed_over_from"] = f"tc-{session.handed_over_from}"
    if session.state.value in ("running", "stalled", "needs_attention"):
        fields["activity"] = session.activity.value
    if session.nudges:
        fields["nudges"] = session.nudges
    if session.status_text:
        fields["status"] = session.status_text
    if session.exit_code is not None:
        fields["exit_code"] = session.exit_code
    if session.last_error:
        fields["last_error"] = session.last_error.splitlines()[0]
    return fields


def _fields(values: dict[str, Any]) -> str:
    return " ".join(f"{key}={_value(value)}" for key, value in values.items())


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return printable(json.dumps(str(value), ensure_ascii=False))  # json escapes C0, printable the rest


def _session_dict(session: Session) -> dict[str, Any]:
    return {
        **_summary(session),
        "project": session.project,
        "subfolder": session.subfolder,
        "tmux_session": session.tmux_session,
        "pane_id": session.pane_id,
        "pane_pid": session.pane_pid,
        "exit_code": session.exit_code,
        "last_error": session.last_error,
        "status": session.status_text,
        "status_at": _time(session.status_at),
        "nudges": session.nudges,
        "activity": session.activity.value,
        "last_progress_at": _time(session.last_progress_at),
        "created_at": _time(session.created_at),
        "updated_at": _time(session.updated_at),
    }


def _event_dict(event: Event) -> dict[str, Any]:
    return {
        "session_id": event.session_id,
        "event": event.kind.value,
        "at": _time(event.at),
        "detail": event.detail,
    }


def _chunk_dict(answer: Output) -> dict[str, Any]:
    chunk = answer.chunk
    return {
        "rows": list(chunk.rows),
        "partial": chunk.partial,
        "cursor": chunk.cursor.encode(),
        "lines_missed": chunk.lines_missed,
        "truncated": chunk.truncated,
        "alternate_screen": chunk.alternate_screen,
        "pane_dead": chunk.pane_dead,
    }


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment else None
