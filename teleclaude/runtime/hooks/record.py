"""What the agent hooks share: a hook's news recorded on its worker's session, or marked on its pane.

Imported by every hook run: it imports the runtime only when the hook runs in a worker's session.
"""

from __future__ import annotations

import os
import stat
import sys
import time

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.adapters.store import AvailabilityStore
    from teleclaude.agents.usage import UsageWindow
    from teleclaude.runtime.api import Runtime

    Spent = tuple[int | None, int | None, int | None, int | None, float | None, str]  # hook_db.py's `Used`


def record(
    write: Callable[[Runtime, str], bool],
    what: str,
    attempts: int = 50,
    pause: float = 0.05,
    hook: str = "stop",
) -> None:
    """Record a hook's news on the session of this worker (TELECLAUDE_SESSION_ID), if it is one, and only
    with that session's key (TELECLAUDE_SESSION_KEY): a hook cannot speak for another worker's session.

    The record is a compare-and-set on the session's row, which an observer saving at the same moment wins;
    so `write` is tried again (up to `attempts` times, `pause` seconds apart) until it says the row shows it.
    A failure is a warning on stderr, as from `teleclaude hook {hook}`.
    """
    if not os.environ.get("TELECLAUDE_SESSION_ID", ""):
        return
    try:  # imported only for a worker's session: every other stop stays off sqlite and the runtime
        from teleclaude.runtime.api import open_runtime

        runtime = open_runtime(os.getcwd())  # the project's own profiles: its command prefix and sign
        _retried(lambda session_id: write(runtime, session_id), runtime.owns, what, attempts, pause, hook)
    except Exception as error:  # never break the agent over bookkeeping
        warn(f"could not record {what}: {error}", hook)


def keep(write: Callable[[SessionStore, str], bool], what: str, hook: str = "stop") -> None:
    """`record` of news that only the session's row keeps (what it used, its transcript named): with the
    store alone, without the runtime and the project's settings."""
    if not os.environ.get("TELECLAUDE_SESSION_ID", ""):
        return
    try:
        from teleclaude.adapters.sessions_db import SessionStore
        from teleclaude.runtime.core.marks import same_key

        store = SessionStore()

        def owns(session_id: str, key: str) -> bool:  # as `Runtime.owns`
            session = store.get(session_id)
            return session is None or same_key(session.key, key)

        _retried(lambda session_id: write(store, session_id), owns, what, hook=hook)
    except Exception as error:  # never break the agent over bookkeeping
        warn(f"could not record {what}: {error}", hook)


def _retried(
    write: Callable[[str], bool],
    owns: Callable[[str, str], bool],
    what: str,
    attempts: int = 50,
    pause: float = 0.05,
    hook: str = "stop",
) -> None:
    from teleclaude.runtime.core.marks import SESSION_KEY

    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    if not owns(session_id, os.environ.get(SESSION_KEY, "")):
        warn(f"not recording {what}: ${SESSION_KEY} is not session {session_id}'s key", hook)
        return
    from teleclaude.adapters.store import StoreLocked

    for attempt in range(attempts):
        try:
            if write(session_id):
                return
        except StoreLocked:  # other writers held the file past the busy timeout: try again
            if attempt + 1 == attempts:
                raise
        if attempt + 1 < attempts:
            time.sleep(pause)
    warn(f"could not record {what}: session {session_id} kept changing", hook)


TURN_END_BUSY_MS = 1000  # the plain record's wait for the database; past it, the runtime's waits and retries


def end_turn_plainly(reading: tuple[str, ...] | None = None, prompt: str = "") -> bool:
    """A local worker's turn ended (no prompt to judge): recorded with the stdlib's sqlite3
    (adapters/hook_db.py `end_turn`), its waiters woken as the runtime wakes them (the run through the pipe
    it listens on, `channel.look_beside`; else through the tmux server its pane is in, $TMUX), without
    loading the runtime or the project's settings. `reading`: (its agent, the transcript its stop input
    names), for a driver that reads what it used there line by line
    (`agents.TRANSCRIPT_LINES`): what it holds new kept with the turn's end (`hook_db.end_turn_reading`), as
    `record_spend` keeps it; or (its agent, its CLI's database, the CLI's own id of the session) for a
    driver that reads it there (`agents.SPEND_DATABASES`), with that id on record. `prompt`: what the model
    was sent, when the CLI's stop input says (`agents.STOP_PROMPTS`), plainly not the session's command line
    as typed (`not_typed`). False when that is not known so (not in a pane, the session not running, the
    database busy or not as the runtime left it; with a reading, anything but a running session of its own
    with that record on record; a prompt that may be the typed line): `record` then records it through the
    runtime (stop.py first keeps what it used, with a reading)."""
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    server = os.environ.get("TMUX", "").split(",")[0]  # the socket of the pane's server: $TMUX's first field
    if not session_id or not server.startswith("/"):
        return False
    from teleclaude.adapters.channel import look_beside, poke
    from teleclaude.adapters.hook_db import ENDED, NOT_OWNED, db_file, end_turn, end_turn_reading, stamp_now
    from teleclaude.runtime.core.marks import SESSION_KEY, exit_channel, same_key

    key = os.environ.get(SESSION_KEY, "")
    owns = lambda stored: same_key(stored, key)  # noqa: E731
    plain = (lambda command, args: not_typed(prompt, command, args)) if prompt else None
    db = db_file()
    try:
        if reading is None:
            done = end_turn(db, TURN_END_BUSY_MS, session_id, owns, stamp_now(), plain)
        else:
            read, at, named = _reader(*reading), stamp_now(), reading[2] if len(reading) > 2 else ""
            done = end_turn_reading(
                db, TURN_END_BUSY_MS, session_id, owns, at, reading[1], read, plain, named
            )
    except Exception:  # held past the busy timeout (StoreLocked): the runtime's record waits and tries again
        return False
    if done is None:
        return False
    if done == NOT_OWNED:
        warn(f"not recording the end of the turn: ${SESSION_KEY} is not session {session_id}'s key")
    elif done == ENDED and not poke(look_beside(db, session_id)):  # as hook_news.py `_wake`: none listens
        # as `Tmux.signal`: a server no one waits on is no failure
        from teleclaude.adapters.spawn import output

        output(["tmux", "-S", server, "wait-for", "-S", exit_channel(session_id)])
    return True


def not_typed(prompt: str, command: str, args: str) -> bool:
    """The prompt a CLI sent its model is plainly not the session's command line as typed (runtime/core/
    blockers.py `unexpanded_command`, which needs the project's command sign and prefix): it does not end
    with the command's name and its arguments, as every typed line of it does (`AgentProfile.slash_command`).
    False when it may be: the runtime judges it then."""
    tail = f"{command} {args}".rstrip()
    return bool(tail.strip()) and not prompt.rstrip().endswith(tail)


def _reader(
    agent: str, path: str, conversation: str = ""
) -> Callable[[str], tuple[Spent | None, str | None]]:
    """What the session used by its CLI's record at `path`, as `read_state -> (input, cached, output,
    reasoning, cost, model) or None, the state to keep`: `transcript.read_new` of a transcript with the
    driver's line reader (`agents.TRANSCRIPT_LINES`), or the answers of the CLI's own id of the session
    (`conversation`) in its database (agents/answers.py, `agents.SPEND_DATABASES`: no state)."""
    from teleclaude.agents import TRANSCRIPT_LINES, transcripts

    if agent not in TRANSCRIPT_LINES:

        def answers(state: str) -> tuple[Spent | None, str | None]:
            from teleclaude.adapters.records import query_rows
            from teleclaude.agents.answers import MESSAGES, answers_used

            rows = query_rows(path, MESSAGES, conversation)
            return None if rows is None else answers_used(rows), None

        return answers
    from teleclaude.runtime.hooks.transcript import read_new

    message = getattr(transcripts, TRANSCRIPT_LINES[agent])

    def lines(state: str) -> tuple[Spent | None, str | None]:
        used, kept = read_new(path, state, message)
        return (None if used is None else (used[0], used[1], used[2], used[3], None, used[4])), kept

    return lines


TURN_END_MARK = "@teleclaude_turn_end"  # TURN_END_OPTION of adapters/tmux.py, spelled out: it imports tmux


def mark_turn_end_plainly(reading: tuple[str, ...] | None = None, prompt: str = "") -> bool:
    """A sandboxed worker's turn ended (no prompt to tell): its sealed mark written into its session's channel
    folder (TELECLAUDE_CHANNEL) as `mark_pane` writes it, without adapters/tmux.py, sandbox.py or OpenSSL.
    The worker reaches no tmux server: the run watching it here is woken through the channel's pipe, and on
    another computer the channel's relay, as `mark_pane` wakes them (channel.wake). `reading` (as
    `end_turn_plainly`'s): what the transcript holds new is read first and marked as `record_spend` marks it
    (the read's state kept in the channel, `transcript.SPEND_READ`), with the usage it reports, as
    `record_transcript_usage` marks it. `prompt` (as `end_turn_plainly`'s) goes with the mark, for the
    observer to judge. False when not a sandboxed worker's, or the folder refused a mark: stop.py then marks
    it."""
    session_id, channel = (
        os.environ.get("TELECLAUDE_SESSION_ID", ""),
        os.environ.get("TELECLAUDE_CHANNEL", ""),
    )
    if not session_id or not channel:
        return False
    from teleclaude.adapters.channel import wake, write_mark
    from teleclaude.runtime.core.marks import SESSION_KEY, seal, turn_end_payload

    key = os.environ.get(SESSION_KEY, "")
    if reading is not None and not (_mark_usage(channel, key, session_id, *reading)):
        return False
    if reading is not None and not _mark_reading(channel, key, session_id, *reading):
        return False
    payload = turn_end_payload(time.time_ns(), prompt)
    if not write_mark(channel, TURN_END_MARK, seal(key, session_id, TURN_END_MARK, payload)):
        return False
    wake(channel)
    return True


SPEND_MARK = "@teleclaude_spend"  # SPEND_OPTION of adapters/tmux.py, spelled out
TRANSCRIPT_NAMED = "transcript"  # TRANSCRIPT of adapters/sandbox.py, spelled out: it imports the git adapter


CONVERSATION_NAMED = "conversation"  # CONVERSATION of adapters/sandbox.py, spelled out
CONVERSATION_KEPT = 200  # sandbox.py's: a longer one is no CLI's id


def _mark_reading(
    channel: str, key: str, session_id: str, agent: str, path: str, conversation: str = ""
) -> bool:
    """What a sandboxed worker's CLI's record holds new, read from where its last read ended (the state in
    its channel) and marked there with the record's path (and the CLI's id of the session, for a database),
    as `record_spend` and sandbox.py `name_record` mark them. False when the folder refused the mark."""
    from teleclaude.adapters.channel import read_file, write_mark
    from teleclaude.runtime.core.marks import seal
    from teleclaude.runtime.hooks.transcript import SPEND_READ, json_array

    used, state = _reader(agent, path, conversation)(read_file(channel, SPEND_READ))
    *counts, cost, model = used or (None, None, None, None, None, "")
    spent = json_array((*counts, cost, model[:100]))  # core/spend.py `encode_tokens`
    if not write_mark(channel, SPEND_MARK, seal(key, session_id, SPEND_MARK, spent)):
        return False
    write_mark(channel, TRANSCRIPT_NAMED, path)
    if conversation and len(conversation) <= CONVERSATION_KEPT:
        write_mark(channel, CONVERSATION_NAMED, conversation)
    if state is not None:
        write_mark(channel, SPEND_READ, state)
    return True


def mark_pane(option: str, payload: str) -> bool:
    """A worker on another computer: mark its own tmux pane with `payload`, sealed with its session's key
    (runtime/core/marks.py), for the observer to read over ssh; a sandboxed worker: the same mark as a file
    in its session's channel folder. False when tmux (or the file) refused."""
    from teleclaude.runtime.core.marks import SESSION_KEY, seal

    session_id, key = os.environ.get("TELECLAUDE_SESSION_ID", ""), os.environ.get(SESSION_KEY, "")
    sealed = seal(key, session_id, option, payload)
    channel = os.environ.get("TELECLAUDE_CHANNEL")  # CHANNEL of adapters/sandbox.py: a sandboxed worker
    if channel:  # its only way out: its session's own folder, which the observer reads
        from teleclaude.adapters.channel import wake, write_mark

        written = write_mark(channel, option, sealed)
        wake(channel)  # on another computer: its relay moves the mark onto its pane
        return written
    from teleclaude.adapters.tmux import STOP_FAILURE_OPTION, TURN_END_OPTION, mark_own_pane
    from teleclaude.runtime.core.marks import exit_channel

    ends = option in (TURN_END_OPTION, STOP_FAILURE_OPTION)  # the run waits on these: its wait is woken
    return mark_own_pane(sealed, option, exit_channel(session_id) if ends and session_id else "")


def warn(message: str, hook: str = "stop") -> None:
    """One line on stderr, which the CLI may show on its terminal: what the message quotes of the hook's
    input (an `error` field, a file's name) has every character a terminal would obey escaped."""
    from teleclaude.planner.core.terminal import printable

    sys.stderr.write(f"teleclaude hook {hook}: {printable(message)}\n")


USAGE_BUSY_MS = 1000  # a usage hook waits at most this long for the database: its CLI waits on it


def record_usage(windows: tuple[UsageWindow, ...], hook: str) -> None:
    """Keep the usage an agent CLI reported (its driver's `usage` reader): with the availability table, for
    every process of this user's, worker or not; a worker on another computer marks its pane instead
    (sealed, as its stop hook does), which the observer reads over ssh and records here. Never raises."""
    if not windows:
        return
    try:
        if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE of adapters/tmux.py: remote
            if os.environ.get("TELECLAUDE_SESSION_ID"):
                from teleclaude.adapters.tmux import USAGE_OPTION
                from teleclaude.runtime.core.limits import encode_usage

                if not mark_pane(USAGE_OPTION, encode_usage(windows)):
                    warn("could not mark the usage on the tmux pane", hook)
            return
        from teleclaude.adapters.store import AvailabilityStore

        store = AvailabilityStore()
        store.busy_timeout_ms = USAGE_BUSY_MS
        # a status line runs at every change of the screen, mostly with what is on record already: a read
        # (the stdlib's sqlite3) is far cheaper than a write (sqlite-utils), so only news is written
        known = {(w.agent, w.window, w.used_percent, w.resets_at) for w in _on_record(store, windows)}
        fresh = [w for w in windows if (w.agent, w.window, w.used_percent, w.resets_at) not in known]
        store.record_usage(fresh)
    except Exception as error:  # never break the agent over bookkeeping
        warn(f"could not record the usage: {type(error).__name__}: {error}", hook)


def _on_record(store: AvailabilityStore, windows: tuple[UsageWindow, ...]) -> tuple[UsageWindow, ...]:
    return tuple(w for agent_windows in store.usage(windows[0].seen_at).values() for w in agent_windows)


TRANSCRIPT_TAIL = 64 * 1024  # bytes of a transcript read for its latest usage


def record_transcript_usage(agent: str, path: str, hook: str) -> None:
    """The usage the CLI's transcript (a hook input's `transcript_path`) reports so far, kept as
    `record_usage` keeps it, when the driver reads its usage there. Never raises."""
    from teleclaude.agents import USAGE_SOURCES

    if USAGE_SOURCES.get(agent) != "transcript" or not os.path.isfile(path):
        return  # no driver imported to find that out (a stop hook's `transcript_path` comes every turn)
    if usage_on_record(agent, path):
        return  # most turns: the windows of the last one again
    try:
        from teleclaude.agents import driver
        from teleclaude.agents.profile import UsageSource

        usage = driver(agent).usage
        if usage is None or usage.read is None or usage.source is not UsageSource.TRANSCRIPT:
            return
        from datetime import UTC, datetime
        from pathlib import Path

        from teleclaude.adapters.fs import read_tail

        lines = read_tail(Path(path), TRANSCRIPT_TAIL)
        record_usage(usage.read("\n".join(lines), datetime.now(UTC)), hook)
    except Exception as error:  # never hold up the CLI over bookkeeping
        warn(f"could not read the usage: {type(error).__name__}: {error}", hook)


def transcript_limits(
    agent: str, path: str
) -> tuple[tuple[str, float, datetime | None, datetime], ...] | None:
    """The usage windows (agents/rollout.py's plain values) the tail of the CLI's transcript at `path`
    reports, read as `record_transcript_usage` reads them, for a driver whose reader is that plain one
    (`agents.USAGE_LINES`); None when it is not, or the file is not a regular one it can read."""
    from teleclaude.agents import USAGE_LINES

    name = USAGE_LINES.get(agent)
    if name is None:
        return None
    try:  # as fs.py `read_tail`
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.lseek(fd, max(0, os.lseek(fd, 0, os.SEEK_END) - TRANSCRIPT_TAIL), os.SEEK_SET)
        chunks, left = [], TRANSCRIPT_TAIL
        while left > 0 and (chunk := os.read(fd, left)):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    from teleclaude.agents import rollout
    from teleclaude.agents.moments import UTC, datetime

    read = getattr(rollout, name)
    limits: tuple[tuple[str, float, datetime | None, datetime], ...] = read(
        b"".join(chunks).decode("utf-8", "replace"), datetime.now(UTC)
    )
    return limits


def usage_on_record(agent: str, path: str) -> bool:
    """Whether `record_transcript_usage` of the transcript at `path` has nothing to write, seen without the
    driver or the store: its reader a plain one (`transcript_limits`), and each window it reads on record just
    so (hook_db.py `usage_known`), or none. False when not known so (a worker on another computer or in a
    sandbox marks them every time): the driver and the store read and keep them."""
    if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE of adapters/tmux.py
        return False
    limits = transcript_limits(agent, path)
    if limits is None or any(reset is None for _, _, reset, _ in limits):
        return False
    if not limits:
        return True
    from teleclaude.adapters.hook_db import db_file, usage_known

    windows = [(window, used, reset) for window, used, reset, _ in limits if reset is not None]
    return usage_known(db_file(), USAGE_BUSY_MS, agent, windows)


USAGE_MARK = "@teleclaude_usage"  # USAGE_OPTION of adapters/tmux.py, spelled out


def _mark_usage(channel: str, key: str, session_id: str, agent: str, path: str, *_: str) -> bool:
    """The usage the transcript's tail reports, marked in a sandboxed worker's channel as `record_usage`
    marks it (runtime/core/limits.py `encode_usage`), for a driver with a plain reader. False when the
    folder refused the mark; True with nothing to mark."""
    from teleclaude.agents import USAGE_SOURCES

    if USAGE_SOURCES.get(agent) != "transcript" or not os.path.isfile(path):
        return True
    limits = transcript_limits(agent, path)
    if not limits:
        return limits is not None
    from teleclaude.adapters.channel import write_mark
    from teleclaude.runtime.core.marks import seal
    from teleclaude.runtime.hooks.transcript import json_array

    rows = (
        json_array((window[:40], used, reset.timestamp() if reset else None, seen.timestamp()))
        for window, used, reset, seen in limits
    )
    return write_mark(channel, USAGE_MARK, seal(key, session_id, USAGE_MARK, "[" + ", ".join(rows) + "]"))


def record_cost(usd: float | None, hook: str = "statusline") -> None:
    """What this worker's CLI says its session cost so far (its status line: agents/statusline.py `cost`),
    kept on its latest reading (adapters/hook_db.py, with the stdlib's sqlite3 alone: a status line runs at
    every change of the screen); a worker on another computer marks its pane with it. Never raises."""
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    if usd is None or not session_id:
        return
    try:
        if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE of adapters/tmux.py: remote
            from teleclaude.adapters.tmux import COST_OPTION

            if not mark_pane(COST_OPTION, repr(usd)):
                warn("could not mark the cost on the tmux pane", hook)
            return
        from teleclaude.adapters.hook_db import db_file, keep_cost
        from teleclaude.runtime.core.marks import SESSION_KEY, same_key

        key = os.environ.get(SESSION_KEY, "")
        keep_cost(db_file(), USAGE_BUSY_MS, session_id, lambda stored: same_key(stored, key), usd)
    except Exception as error:  # never break the agent over bookkeeping
        warn(f"could not record the cost: {type(error).__name__}: {error}", hook)


def record_spend(agent: str, path: str, conversation: str = "", hook: str = "stop") -> None:
    """What this worker's session used so far, read from its CLI's record of the session (the hook input's
    `transcript_path`, or the CLI's database for its own session id `conversation`: the driver's `tokens`),
    kept on the session. A record that is missing, unreadable or too big is kept as unknown. A worker on
    another computer marks its pane with it instead (sealed, as its turn's end), which the observer reads
    over ssh and keeps here. Never raises."""
    if not os.environ.get("TELECLAUDE_SESSION_ID"):
        return
    try:
        from teleclaude.agents import NAMES, driver
        from teleclaude.agents.tokens import Tokens

        report = driver(agent).tokens if agent in NAMES else None
        if report is None or (report.read is None and report.database is None):
            return
        path = report.database.where(os.environ) if report.database else path
        if not path:
            return
        from teleclaude.adapters.records import read_use

        tokens = read_use(report, path, conversation) or Tokens()
        if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE of adapters/tmux.py: remote
            from teleclaude.adapters.tmux import SPEND_OPTION
            from teleclaude.runtime.core.spend import encode_tokens

            if not mark_pane(SPEND_OPTION, encode_tokens(tokens)):
                warn("could not mark what the session used on the tmux pane", hook)
            channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its record named, as below
            if channel:
                from pathlib import Path

                from teleclaude.adapters.sandbox import name_record

                name_record(Path(channel), path, conversation if report.database else "")
            return
        # the record named on the session too (with the CLI's id of the session, for a database): the runtime
        # reads it again after the turn (a CLI can write its last answer after this hook read it) and before
        # it ends the worker
        named = conversation if report.database else ""
        from datetime import UTC, datetime

        keep(
            lambda store, session_id: (
                store.name_transcript(session_id, path, named)
                and store.add_spend(session_id, datetime.now(UTC), tokens)
            ),
            "what it used",
            hook=hook,
        )
    except Exception as error:  # never hold up the CLI over bookkeeping
        warn(f"could not read what the session used: {type(error).__name__}: {error}", hook)
