"""The MCP server's stdio, as the SDK's transport reads it: a line with a lone surrogate escape is answered,
not dropped; a line too long to be a request is answered, not read; fd 0 kept from child processes."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import BinaryIO

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_REQUEST, RequestParams

from teleclaude.errors import Error, ErrorCode, FrontEnd
from teleclaude.planner.core.render import to_text

log = logging.getLogger("teleclaude.mcp")


# --- stdio: a line with a lone surrogate escape is answered, not dropped ---------------------------------

# A noncharacter (never interchanged, so no client means it): stands for a lone surrogate the client sent.
NOT_UTF8 = "\ufdd0"
SURROGATE = re.compile("[\ud800-\udfff]")  # after json.loads, a pair is one character: these are lone


def mark_lone_surrogates(line: bytes) -> bytes:
    """`line` with each lone surrogate (`"\\ud800"`: JSON allows the escape, UTF-8 has no such character)
    replaced by `NOT_UTF8`; any other line byte for byte.

    The MCP SDK's stdio transport refuses the whole line when its parser meets one, and the request is
    never answered; marked, it reaches `BadArguments`, which answers `ERROR: INVALID_ARGUMENT`."""
    if b"\\u" not in line:
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    if not any(SURROGATE.search(text) for text in strings_in(message)):
        return line
    return json.dumps(_replace_surrogates(message)).encode() + b"\n"


def strings_in(value: object) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def _replace_surrogates(value: object) -> object:
    if isinstance(value, str):
        return SURROGATE.sub(NOT_UTF8, value)
    if isinstance(value, dict):
        return {_replace_surrogates(key): _replace_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    return value


# --- stdio: a line too long to be a request is answered, not read --------------------------------------

MAX_LINE = 1 << 20  # bytes of one message, its newline included: a teleclaude call is a few KB
TOO_LONG = "teleclaude/line_too_long"  # the request a line over MAX_LINE is answered as, by its id
EDGE = 4096  # bytes kept of each end of a line too long: where a client writes the id
_ID_VALUE = rb'(-?\d{1,18}|"[^"\\]{0,200}")'
_ID_FIRST = re.compile(rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID_VALUE)
_ID_LAST = re.compile(rb'"id"\s*:\s*' + _ID_VALUE + rb"\s*\}\s*\Z")


def too_long(head: bytes, tail: bytes, size: int) -> bytes | None:
    """The line that stands for a line of `size` bytes over MAX_LINE, of which `head` and `tail` were kept:
    a `TOO_LONG` request with the line's own id, which `refuse_too_long` answers with an error; None when no
    id is found at either end (the first key, as the Python SDK writes it, or the last, as the TypeScript SDK
    does): the line is dropped, as the SDK drops any line that is not a message."""
    found = _ID_FIRST.search(head) or _ID_LAST.search(tail)
    if found is None:
        return None
    request = {"jsonrpc": "2.0", "id": json.loads(found[1]), "method": TOO_LONG, "params": {"bytes": size}}
    return json.dumps(request).encode() + b"\n"


class _MarkedLines(io.RawIOBase):
    """The client's lines, each through `mark_lone_surrogates`; a line over MAX_LINE is read past, never held
    (one line of 50 MB once stalled the server for minutes), and stands as `too_long` says."""

    def __init__(self, source: BinaryIO) -> None:
        self.source, self.pending, self.at = source, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.at >= len(self.pending):
            self.pending, self.at = self._next_line(), 0
        size = min(len(buffer), len(self.pending) - self.at)
        buffer[:size] = memoryview(self.pending)[self.at : self.at + size]
        self.at += size
        return size

    def _next_line(self) -> bytes:
        while True:
            line = self.source.readline(MAX_LINE + 1)
            if len(line) <= MAX_LINE:
                return mark_lone_surrogates(line)
            head, tail, size = line[:EDGE], line[-EDGE:], len(line)
            while not tail.endswith(b"\n"):
                chunk = self.source.readline(1 << 16)
                if not chunk:
                    break
                tail, size = (tail + chunk)[-EDGE:], size + len(chunk)
            log.warning("a line of %d bytes from the MCP client is more than %d: not read", size, MAX_LINE)
            answer = too_long(head, tail, size)
            if answer is not None:
                return answer


class TooLongParams(RequestParams):
    bytes: int = 0


async def refuse_too_long(context: object, params: TooLongParams) -> dict:
    """The answer to a line over MAX_LINE: a JSON-RPC error with the line's id, `ERROR: INVALID_ARGUMENT`."""
    message = (
        f"a message of {params.bytes} bytes is more than the {MAX_LINE} bytes one may have: it was not "
        "read.\nSend less in one call."
    )
    raise MCPError(INVALID_REQUEST, to_text(Error(ErrorCode.INVALID_ARGUMENT, message), FrontEnd.MCP))


def mark_stdin(source: BinaryIO | None = None) -> None:
    """Give the SDK's stdio transport the client's lines marked, from `source` (what reads them: mcp_answers)
    or a private copy of fd 0; fd 0 itself reads the null device, so a child process (git, tmux) never eats
    the client's bytes."""
    if source is None:
        private = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        source = os.fdopen(private, "rb")
    marked = io.BufferedReader(_MarkedLines(source))
    sys.stdin = io.TextIOWrapper(marked, encoding="utf-8", errors="replace")
