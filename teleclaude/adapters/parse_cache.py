"""The parse cache: chunk summaries of the roadmap and the plans, kept between processes.

One JSON file per parsed file under `<git common dir>/teleclaude-cache/`, mapping the hash of each chunk's
text to what the parser kept of it (see `planner.core.markdown.chunk_summaries`). An entry is found only
through the hash of the text being parsed, so a stale one is never used; a file that is missing, corrupt,
of another shape, not a regular file or larger than the text it caches could explain counts as empty, and
deleting the folder is always safe. The parsers check what an entry says against the text (a forged one
with the right key is ignored too). Writes replace the file atomically (a link there is replaced, never
followed) and keep only the entries of the last parse.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from teleclaude.adapters import fs

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

FOLDER = "teleclaude-cache"
FORMAT = 1
_last: dict[Path, tuple[str, Any]] = {}  # cache file -> (text, value) of its last parse in this process


def cached_parse(
    common_dir: Path, name: str, text: str, parse: Callable[[str, dict[str, Any]], tuple[T, dict[str, Any]]]
) -> T:
    """`parse(text, known)` with `known` read from, and the entries it used written back to, the cache."""
    path = _path(common_dir, name)
    last = _last.get(path)
    if last is not None and last[0] == text:
        return last[1]
    with _no_collection():
        known = load(path, limit=size_limit(text))
        value, used = parse(text, known)
        if used != known:  # cheap when nothing changed: the same summary objects compare by identity
            save(path, used)
    _last[path] = (text, value)
    return value


def forget(common_dir: Path, name: str) -> None:
    """Remove the cache file `name` (e.g. a delivered item's plan): nothing will parse that file again."""
    path = _path(common_dir, name)
    _last.pop(path, None)
    path.unlink(missing_ok=True)


def _path(common_dir: Path, name: str) -> Path:
    return common_dir / FOLDER / f"{re.sub(r'[^a-z0-9-]', '_', name)}.json"


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector held off: loading, parsing and saving a large file makes hundreds of
    thousands of lists and values, none of them garbage in a cycle, and the collector's passes over them
    took a fifth of a 100,000-item claim."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def size_limit(text: str) -> int:
    """What a cache file of `text` may weigh: its summaries repeat the text at most once, in JSON that writes
    a character as at most 12 bytes (an astral one as two `\\u` escapes), plus line numbers, keys and
    problem messages. A file past it is not read, and the text is parsed afresh."""
    return 32 * len(text) + 2**20


def load(path: Path, limit: int = fs.MAX_FILE_BYTES) -> dict:
    try:
        data = fs.read_bytes(path, limit)  # a regular file only, opened without blocking
        stored = json.loads(data) if data is not None else None
    except (OSError, ValueError, RecursionError, fs.FileError):  # RecursionError: `[[[[…` nested deep
        return {}
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return {}
    chunks = stored.get("chunks")
    return chunks if isinstance(chunks, dict) else {}


def save(path: Path, chunks: dict) -> None:
    """Best effort: a cache that cannot be written is simply not there next time."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(exist_ok=True)
        data = json.dumps({"format": FORMAT, "chunks": chunks}, separators=(",", ":")).encode()
        fs.atomic_write(path, data, follow=False)
