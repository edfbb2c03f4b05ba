"""`teleclaude hook statusline`: an agent CLI's status-line command; keeps the usage the CLI reports in it.

Claude Code runs its `statusLine` command (its user settings.json) whenever its status line may change,
with the session's JSON on stdin, and shows what the command prints under its input. Since 2.1 that JSON
carries `rate_limits` for a subscriber (its 5-hour and 7-day windows: `used_percentage`, `resets_at`), read
from the API's `anthropic-ratelimit-unified-*` headers. The hook reads them as plain values
(agents/statusline.py) and, when they are news to the availability table (most refreshes repeat them:
checked with `_sqlite3` alone, adapters/hook_db.py), records them with the driver's usage reader and the
store (a worker on another computer: on its pane, record.py), so the planner sees an agent near its limit
before the limit ends a turn. It runs at every refresh of the screen: the JSON is parsed once (`_parsed`,
without `json`'s `re`), each field is read from that value, and what records a field is imported only when
there is news to record.

`--then COMMAND`: the status line the user had before `teleclaude install` put this one in its place. It is
run as Claude Code runs a status line (`/bin/sh -c COMMAND`, the same stdin, at most a few seconds), and what
it prints is shown instead of ours. Whatever fails here, the hook records nothing, still prints a line and
exits 0: the status line is never what breaks the CLI.
"""

from __future__ import annotations

import os
import sys
import time

from teleclaude.agents import USAGE_SOURCES
from teleclaude.agents.jsonin import loads
from teleclaude.agents.moments import UTC, datetime
from teleclaude.agents.statusline import cost, rate_limits
from teleclaude.runtime.hooks.record import USAGE_BUSY_MS, record_cost, warn

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:  # subprocess and select are imported by `theirs` alone: most status lines are ours
    import subprocess
    from collections.abc import Sequence
    from typing import BinaryIO, TextIO


THEIRS_TIMEOUT = 3.5  # Claude Code gives a status-line command 5 s in all (ours: up to 1 s more)
THEIRS_BYTES = 64 * 1024  # a status line is a few rows: more is a command gone wrong (`yes`)
PIPE_CHUNK = 64 * 1024
SHELL = "/bin/sh"  # what Claude Code (Node's `spawn(…, {shell: true})`) runs a command string with


def main(
    agent: str,
    then: str | None = None,
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    raw = _read(stdin or sys.stdin.buffer)
    text = raw.decode("utf-8", "replace")
    line = ""
    try:
        data = _parsed(text)
        now = datetime.now(UTC)
        limits = rate_limits(data, now) if USAGE_SOURCES.get(agent) == "statusline" else ()
        if limits and not _on_record(agent, limits):
            _record(agent, text, now)
        record_cost(cost(data))  # what the session cost so far, for a worker (record.py)
        line = our_line(agent, data, limits, now)
    except Exception as error:  # record nothing; the line is still printed
        warn(f"{type(error).__name__}: {error}", "statusline")
    if then:
        line = theirs(then, raw) or line
    stdout.write((line or agent) + "\n")
    stdout.flush()
    return 0


def _parsed(text: str) -> object:
    """The status line's JSON, parsed once for every field the hook reads of it (None: not JSON)."""
    try:
        return loads(text)
    except ValueError:
        return None


def _on_record(agent: str, limits: tuple[tuple[str, float, datetime], ...]) -> bool:
    """Every window is on record just so (most refreshes: the same numbers again), read with the stdlib's
    sqlite3 alone (hook_db.py); a worker on another computer marks its pane each time instead (record.py)."""
    if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE of adapters/tmux.py: remote
        return False
    from teleclaude.adapters.hook_db import db_file, usage_known

    return usage_known(db_file(), USAGE_BUSY_MS, agent, limits)


def _record(agent: str, text: str, now: datetime) -> None:
    """News: the driver's usage reader and the store keep it (record.py)."""
    from teleclaude.agents import driver
    from teleclaude.runtime.hooks.record import record_usage

    reader = driver(agent).usage.read
    record_usage(reader(text, now) if reader else (), "statusline")


def _read(stream: BinaryIO) -> bytes:
    try:
        return stream.read()
    except (OSError, ValueError):
        return b""


def theirs(command: str, raw: bytes) -> str:
    """What the user's own status line prints for this input; "" when it fails, hangs or prints too much. It
    has `THEIRS_TIMEOUT` seconds and `THEIRS_BYTES` of output, whatever the processes it starts do: one that
    hangs or floods is ended with every process it started (its own process group), as Claude Code would,
    and a process that left the group (`setsid`) and holds the output open is not waited for once the
    command itself has exited."""
    import contextlib
    import signal
    import subprocess

    try:
        process = subprocess.Popen(
            [SHELL, "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as error:
        warn(f"your status line did not run: {error}", "statusline")
        return ""
    out, fault = _collect(process, raw, time.monotonic() + THEIRS_TIMEOUT)
    if fault:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1)  # killed: at once, but a zombie is not left behind either way
        warn(f"your status line {fault}: ended", "statusline")
        return ""
    if process.returncode != 0:
        return ""
    return out.decode("utf-8", "replace").rstrip("\n")


def _collect(process: subprocess.Popen[bytes], raw: bytes, deadline: float) -> tuple[bytes, str]:
    """`raw` written to the process and its output read, until it has exited and its output is read or
    closed; (the output, "" or what went wrong: the deadline passed, too much output)."""
    import select
    import subprocess

    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin.fileno(), process.stdout.fileno()
    exited = _exit_signal(process.pid)
    os.set_blocking(stdin, False)
    pending, out = memoryview(raw), bytearray()
    writing, reading = [stdin] if raw else [], [stdout]
    if not raw:
        process.stdin.close()
    try:
        while reading:
            gone = process.poll() is not None
            left = deadline - time.monotonic()
            if left <= 0 and not gone:
                return bytes(out), f"took more than {THEIRS_TIMEOUT:g} s"
            waits = [] if gone or exited is None else [exited]
            pause = 0 if gone else min(left, 0.05 if exited is None else left)
            readable, writable, _ = select.select(reading + waits, [] if gone else writing, [], pause)
            if gone and stdout not in readable:
                break  # what it printed is read; a process it left behind (setsid) may hold the pipe open
            if writable:
                try:
                    pending = pending[os.write(stdin, pending[:PIPE_CHUNK]) :]
                except BlockingIOError:
                    pass
                except OSError:  # it stopped reading: what it read is what it gets
                    pending = memoryview(b"")
                if not pending:
                    writing = []
                    process.stdin.close()
            if stdout in readable:
                chunk = os.read(stdout, PIPE_CHUNK)
                if not chunk:
                    reading = []
                out += chunk
                if len(out) > THEIRS_BYTES:
                    return bytes(out[:THEIRS_BYTES]), f"printed more than {THEIRS_BYTES} bytes"
    finally:
        if exited is not None:
            os.close(exited)
        process.stdout.close()
        if not process.stdin.closed:
            process.stdin.close()
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:  # it closed its output and went on
        return bytes(out), f"took more than {THEIRS_TIMEOUT:g} s"
    return bytes(out), ""


def _exit_signal(pid: int) -> int | None:
    """A descriptor that turns readable when the process exits (Linux's pidfd); None: poll it instead."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def our_line(agent: str, data: object, limits: Sequence[tuple[str, float, datetime]], now: datetime) -> str:
    """The model's name, then each window's use (`limits`: window, percent used, reset) as `teleclaude
    agents` shows it: `Opus 4.8 · 5h 83% ↺ 19:00 · 7d 41% ↺ Sun 29 09:00` (resets in local time)."""
    from teleclaude.planner.core.terminal import printable
    from teleclaude.planner.core.usage_line import window_text

    model = data.get("model") if isinstance(data, dict) else None
    name = model.get("display_name") if isinstance(model, dict) else None
    zone = now.astimezone().tzinfo or UTC
    usage = " · ".join(window_text(*limit, now, zone) for limit in limits if limit[2] > now)
    shown = printable(name) if isinstance(name, str) and name else agent  # the model's name is the provider's
    return " · ".join(part for part in (shown, usage) if part)
