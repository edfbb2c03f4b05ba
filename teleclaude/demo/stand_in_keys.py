"""The stand-in agent CLI's keyboard: lines typed at its prompt, key by key, with the faults of real CLIs it
plays (an Enter dropped, deaf or sluggish to Enter, a command list that lags or loads late, keys read
late)."""

from __future__ import annotations

import os
import re
import select
import sys
import termios
import time
import tty

SWALLOW_WINDOW = 0.05
SLUGGISH_SECONDS = 3.5  # longer than the 3 s over which the launcher pressed Enter three times before
LIST_LAG_SECONDS = 1.0  # lagging: how long the list stays after the arguments are typed
BUSY_SECONDS = 1.5  # busy: how late typed keys are read (longer than the second the launcher waited)
PROMPT = "> "
BOX = "┃  "  # opencode's input box: its left border, then the typed line


def read_lines(
    lists_commands: bool = False,
    deaf: bool = False,
    sluggish: bool = False,
    lagging: bool = False,
    busy: bool = False,
    boxed: bool = False,
    loads_at: float = 0.0,
):
    """Lines typed at the prompt, key by key; an Enter within 50 ms of the last key is dropped. With
    `lists_commands`, a command typed alone is listed below the input row, as gemini lists a command it
    knows (the launcher waits for that row before typing the arguments). `deaf` drops every Enter under a
    line that is not a command; `sluggish` shows a taken Enter only after SLUGGISH_SECONDS; `lagging`
    keeps the list LIST_LAG_SECONDS after the arguments are typed, and an Enter meanwhile puts the listed
    name in place of the last word and sends nothing (gemini on a loaded machine). `busy` reads keys
    BUSY_SECONDS after they came, and an Enter within 50 ms of the last key is a newline (gemini's). `boxed`
    draws opencode's input box (the prompt `BOX`, emptied on Enter, its list rows `┃  /name   …`); with
    `loads_at`, no command is listed before that moment (`time.monotonic()`), and a name typed before it is
    listed then."""
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    if saved is not None:
        tty.setraw(fd)
    try:
        while True:
            sys.stdout.write(BOX if boxed else PROMPT)
            sys.stdout.flush()
            line = read_line(fd, lists_commands, deaf, sluggish, lagging, busy, boxed, loads_at)
            if line is None:
                return
            yield line
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_line(
    fd: int,
    lists_commands: bool = False,
    deaf: bool = False,
    sluggish: bool = False,
    lagging: bool = False,
    busy: bool = False,
    boxed: bool = False,
    loads_at: float = 0.0,
) -> str | None:
    prompt = BOX if boxed else PROMPT
    typed = ""
    last_key = 0.0
    listed = ""  # the command listed below the input row
    unlist_at: float | None = None  # lagging: when the list goes
    while True:
        now = time.monotonic()
        waits = [max(0.0, unlist_at - now)] if unlist_at is not None else []
        named = re.fullmatch(r"/([a-z0-9-]+)", typed)
        if lists_commands and named and not listed and now < loads_at:
            waits.append(loads_at - now)  # its commands load meanwhile: the typed name is listed then
        if waits and not select.select([fd], [], [], min(waits))[0]:
            if unlist_at is not None and time.monotonic() >= unlist_at:
                _unlist(typed, prompt)
                listed, unlist_at = "", None
            elif named:
                listed = _list(named.group(1), typed, boxed)
            sys.stdout.flush()
            continue
        if busy:
            select.select([fd], [], [])
            time.sleep(BUSY_SECONDS)
        data = os.read(fd, 1024)
        if not data:
            return None
        for char in data.decode(errors="replace"):
            if char in "\r\n":
                if typed and time.monotonic() - last_key < SWALLOW_WINDOW:
                    if busy:  # a newline in the input: the cursor goes to the row below
                        sys.stdout.write("\r\n")
                    continue  # pasted text and its Enter arrived together: drop the Enter
                if listed and unlist_at is not None:  # the list is behind the input: Enter takes its name
                    typed = f"{typed.rsplit(' ', 1)[0]} {listed}"
                    sys.stdout.write(f"\r\x1b[2K{prompt}{typed}")
                    continue
                if deaf and typed and typed[0] not in "/$":
                    continue
                if listed:
                    _unlist(typed, prompt)
                if sluggish and typed:
                    time.sleep(SLUGGISH_SECONDS)
                    if os.isatty(fd):  # the Enters pressed again meanwhile land in an empty input: nothing
                        termios.tcflush(fd, termios.TCIFLUSH)
                sys.stdout.write("\r\x1b[2K" if boxed else "\r\n")  # opencode's input box is emptied
                return typed
            if char == "\x03":
                raise SystemExit(130)
            if char == "\x7f":
                typed = typed[:-1]
                sys.stdout.write("\b \b")
            elif char == "\x1b":
                continue
            elif char.isprintable():
                typed += char
                sys.stdout.write(char)
            last_key = time.monotonic()
        command = re.fullmatch(r"/([a-z0-9-]+)", typed)
        if lists_commands and command and not listed and time.monotonic() >= loads_at:
            listed, unlist_at = _list(command.group(1), typed, boxed), None
        elif listed and not command and lagging:
            unlist_at = unlist_at or time.monotonic() + LIST_LAG_SECONDS
        elif listed and not command:
            _unlist(typed, prompt)
            listed = ""
        sys.stdout.flush()


def _list(name: str, typed: str, boxed: bool) -> str:
    """The command `name` listed on the row below the input row, then back up to the input row (relative
    moves: right at the bottom of the pane the new row scrolls the screen, and the input row with it)."""
    row = f"{BOX}/{name}   stand-in command" if boxed else f"  {name}   stand-in command"
    sys.stdout.write(f"\r\n{row}\x1b[1A\r{BOX if boxed else PROMPT}{typed}")
    return name


def _unlist(typed: str, prompt: str = PROMPT) -> None:
    """Clear the listed command's row below the input row."""
    sys.stdout.write(f"\x1b[1B\r\x1b[2K\x1b[1A\r{prompt}{typed}")
