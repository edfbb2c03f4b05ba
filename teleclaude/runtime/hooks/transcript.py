"""What a worker used, read by its stop hook from what its CLI's transcript holds new since its last read.

A transcript grows at every turn, and its stop hook read it whole at every turn's end (with `json`, the driver
and the store: 437 M instructions for one of 230 KB, Python's own start 40 M). Here the driver's own reader
(agents/transcripts.py, line by line) goes on from where the last read ended: the read's state (the file, the
offset of its last whole line, the sums so far) is kept beside the reading (the spend row, hook_db.py; a
sandboxed worker's channel, `SPEND_READ`), and what it gives is what reading the whole file gives
(records.py `read_record`): also None (unknown) for a missing file or one past RECORD_MOST.
"""

from __future__ import annotations

import os

from teleclaude.agents.jsonin import loads
from teleclaude.agents.transcripts import Reading, finite

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from teleclaude.agents.transcripts import Message

    Used = tuple[int | None, int | None, int | None, int | None, str]

RECORD_MOST = 64 * 1024 * 1024  # records.py's: a bigger record is unknown
SPEND_READ = "spend-read"  # a sandboxed worker's read state, a file of its channel (no mark: never relayed)


def read_new(path: str, state: str, message: Message) -> tuple[Used | None, str]:
    """(what the session used so far by the transcript at `path`: input, cached, output, reasoning, model;
    None when unknown or it names no message, the state to keep for the next read). `state`: the last
    read's ("" or one of another file: the whole file is read)."""
    kept = _decoded(state)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None, ""
    try:
        stat = os.fstat(fd)
        offset, reading = 0, Reading()
        if kept is not None and kept[:3] == (path, stat.st_dev, stat.st_ino) and kept[3] <= stat.st_size:
            offset, reading = kept[3], kept[4]
        if stat.st_size > RECORD_MOST:
            return None, ""
        os.lseek(fd, offset, os.SEEK_SET)
        chunks, left = [], RECORD_MOST + 1 - offset
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None, ""
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if offset + len(data) > RECORD_MOST:
        return None, ""
    cut = data.rfind(b"\n") + 1  # a line not ended yet is read again next time
    whole = reading.fed(data[:cut].decode("utf-8", errors="replace"), message)
    now = whole.fed(data[cut:].decode("utf-8", errors="replace"), message) if cut < len(data) else whole
    if now.again and offset:  # a message read before came again: the whole file's reading counts it once
        return read_new(path, "", message)
    return now.used(), _encoded(path, stat.st_dev, stat.st_ino, offset + cut, whole)


def _encoded(path: str, device: int, inode: int, offset: int, reading: Reading) -> str:
    values = (path, device, inode, offset, reading.seen, *reading.closed, reading.newest, *reading.last)
    return json_array((*values, reading.model, *reading.ids))


def _decoded(state: str) -> tuple[str, int, int, int, Reading] | None:
    """`_encoded`'s values; None for anything else (another teleclaude's, a damaged one: read it all)."""
    try:
        values = loads(state) if state else None
    except ValueError:
        return None
    if not isinstance(values, list) or len(values) < 15:
        return None
    path, device, inode, offset, seen, *counts = values[:9]
    newest, *last = values[9:14]
    model, ids = values[14], tuple(values[15:])
    counts_ok = all(_count(value) for value in (*counts, *last))
    places_ok = all(_count(value) and value is not None for value in (device, inode, offset))
    if not (counts_ok and places_ok and isinstance(seen, bool)):
        return None
    if not all(isinstance(value, str) for value in (path, newest, model, *ids)):
        return None
    return path, device, inode, offset, Reading(tuple(counts), seen, newest, tuple(last), model, ids)


def _count(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def json_array(values: tuple[object, ...]) -> str:
    """`json.dumps(list(values))` of strings, whole numbers, finite floats, booleans and None, without `json`
    (its encoder imports `re`): a sandboxed worker's spend mark (`core/spend.encode_tokens`), a read state."""
    from _json import encode_basestring_ascii

    def one(value: object) -> str:
        if value is None or isinstance(value, bool):
            return {None: "null", True: "true", False: "false"}[value]
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float) and finite(value):
            return float.__repr__(value)
        if isinstance(value, str):
            return encode_basestring_ascii(value)
        raise TypeError(f"not a JSON value here: {type(value).__name__}")

    return "[" + ", ".join(one(value) for value in values) + "]"
