"""The parse cache: chunk summaries of the roadmap and the plans, kept between processes.

One JSON file per parsed file under `<git common dir>/teleclaude-cache/`, mapping the hash of each chunk's
text to what the parser kept of it (see `planner.core.markdown.chunk_summaries`). An entry is found only
through the hash of the text being parsed, so a stale one is never used; a file that is missing, corrupt
or of another shape counts as empty, and deleting the folder is always safe. Writes replace the file
atomically and keep only the entries of the last parse.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

FOLDER = "teleclaude-cache"
FORMAT = 1
T = TypeVar("T")
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
        known = load(path)
        value, used = parse(text, known)
        if used.keys() != known.keys():
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


def load(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            stored = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict) or stored.get("format") != FORMAT:
        return {}
    chunks = stored.get("chunks")
    return chunks if isinstance(chunks, dict) else {}


def save(path: Path, chunks: dict) -> None:
    """Best effort: a cache that cannot be written is simply not there next time."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        temp.write_text(json.dumps({"format": FORMAT, "chunks": chunks}, separators=(",", ":")))
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)
