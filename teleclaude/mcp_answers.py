"""`teleclaude mcp` over stdio answers a client's handshake without importing fastmcp.

Every agent CLI starts a `teleclaude mcp` of its own for each session, and most sessions (workers) never call
a tool: they only initialize and list what the server offers. fastmcp and the MCP SDK cost ~1.4 s of CPU to
import and ~60 MB to hold, for answers that depend on nothing but the code and the request. So a server that
imported them records its answers to those requests (`_Wire`); a later server answers the same requests from
the record, and imports fastmcp only when a request comes that the record lacks (a tool call, a ping, another
protocol version): it then hands the stream over (`serve`): the SDK reads the client's `initialize` and
`notifications/initialized` again (its answer to them is dropped: the client has it) and then the rest, as if
it had served from the start. A list the record answered is not read again: it changes no state.

The record is kept beside the package's bytecode (`__pycache__/mcp-answers.<python tag>.json`), as
methodcache's table is: written only where bytecode may be written, replaced atomically, used only while
its fingerprint matches (this Python, the stat of every teleclaude module and of the SDK packages), and safe
to delete. Nothing a client sends is written into it but the request's method and parameters, as its key.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

# what a server answers the same way every time: the handshake (or a stateless client's discovery), the
# lists of what it offers, a ping
ANSWERED = frozenset(
    {
        "initialize",
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "ping",
    }
)
# a request of the stateless protocol revisions carries its version here (and no session is set up)
VERSION = "io.modelcontextprotocol/protocolVersion"
# the packages whose code makes the answers, besides teleclaude
SDK = ("fastmcp", "mcp", "mcp_types", "pydantic", "pydantic_core")
FORMAT = 1
MAX_LINE = 1 << 20  # as mcp_stdio.MAX_LINE: a longer line is left to it


def serve() -> None:
    """Serve MCP over stdio: from the record while it has every answer asked for, then through fastmcp."""
    wire_in = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a child process (git, tmux) never eats the client's bytes
    os.close(null)
    wire_out = os.dup(1)
    os.dup2(2, 1)  # a stray print never reaches the wire
    record = Record.load()
    read: bytes | None = b""
    dropped: set[str] = set()
    if record.answers:
        read, dropped = answer_from(record, wire_in, wire_out)
    if read is None:
        return  # the client closed its end
    from teleclaude import mcp as server

    wire = _Wire(wire_out, record, dropped)
    server.serve_stdio(_Replayed(read, wire_in, wire), wire)  # type: ignore[arg-type]  # reads as a BinaryIO


def answer_from(record: Record, wire_in: BinaryIO, wire_out: int) -> tuple[bytes | None, set[str]]:
    """Answer the client's requests from `record` until one it lacks: (the bytes the SDK must read first, the
    id of its answer to drop: the initialize's); None for the bytes when the client closed its end first."""
    handshake, session, first = b"", "", ""
    while True:
        line = wire_in.readline(MAX_LINE + 1)
        if not line:
            return None, set()
        message = _message(line)
        method = message.get("method") if message else None
        if session and method == "notifications/initialized":
            handshake += line
            continue
        key = request_key(message, session) if message is not None and "id" in message else None
        stateless = _version(message) is not None and not session
        if key is None or key not in record.answers or (method == "initialize") == bool(session or stateless):
            return handshake + line, {first} if first else set()
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": record.answers[key]}  # type: ignore[index]
        _write_all(wire_out, json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
        if method == "initialize":
            handshake, session, first = line, key, _id(message)


def request_key(message: dict, session: str) -> str | None:
    """The record's key of a request the server answers the same way every time, else None: its method and
    parameters (an initialize's protocol version alone: the SDK's answer depends on nothing else of it; no
    `_meta`), and for a list or a ping the session's initialize."""
    method, params = message.get("method"), message.get("params", {})
    if method not in ANSWERED or not isinstance(params, dict):
        return None
    if method == "initialize":
        kept, session = {"protocolVersion": params.get("protocolVersion")}, ""
    else:
        kept = {k: v for k, v in params.items() if k != "_meta"}
    text = json.dumps([method, kept, session, _version(message)], sort_keys=True)
    return hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()


def warm(versions: tuple[str, ...] | None = None) -> None:
    """Have a server answer a handshake and the lists in each protocol version the SDK negotiates, so that
    workers find them in the record (the real-CLI tests' first step): a sandboxed worker's server
    reads the record but cannot write it. Nothing when the record has them, cannot be written, or another
    process is recording them (a lock: nobody waits for it)."""
    import fcntl
    import subprocess
    import tempfile

    stateless: frozenset[str] = frozenset()
    record = Record.load()
    if record.path is None or sys.dont_write_bytecode or record.answers.get(WARMED):
        return
    try:
        os.makedirs(os.path.dirname(record.path), exist_ok=True)
        lock = os.open(record.path + ".warm-lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return
    with os.fdopen(lock) as held, tempfile.TemporaryDirectory() as cwd:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process records them: nobody waits for it
            return
        if Record.load().answers.get(WARMED):
            return
        if versions is None:
            from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

            versions = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
            stateless = frozenset(MODERN_PROTOCOL_VERSIONS)
        for version in versions:
            asked: list[dict] = []
            if version in stateless:  # no session: each request says who asks, in which version
                meta = {
                    VERSION: version,
                    f"{_ENVELOPE}/clientInfo": _CLIENT,
                    f"{_ENVELOPE}/clientCapabilities": {},
                }
                methods = sorted(ANSWERED - {"initialize"})
                asked += [
                    {"jsonrpc": "2.0", "id": n, "method": m, "params": {"_meta": meta}}
                    for n, m in enumerate(methods, 1)
                ]
            else:
                params = {"protocolVersion": version, "capabilities": {}, "clientInfo": _CLIENT}
                asked += [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}]
                asked += [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
                methods = sorted(ANSWERED - {"initialize", "server/discover"})
                asked += [{"jsonrpc": "2.0", "id": n, "method": m} for n, m in enumerate(methods, 2)]
            argv = [sys.executable, "-m", "teleclaude", "mcp"]
            server = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            assert server.stdin is not None and server.stdout is not None
            with server:
                for request in asked:
                    server.stdin.write(json.dumps(request).encode() + b"\n")
                    server.stdin.flush()
                    if "id" in request and not server.stdout.readline():
                        break  # it ended: what it answered is recorded
                server.stdin.close()
        Record.load().add(WARMED, list(versions))


_CLIENT = {"name": "teleclaude", "version": "0"}
_ENVELOPE = "io.modelcontextprotocol"
WARMED = "warmed"  # the record's entry that says warm() was done (the versions)


def _version(message: dict | None) -> str | None:
    """The protocol version a request of a stateless revision carries in its `_meta`, else None."""
    params = message.get("params") if message else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _message(line: bytes) -> dict | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else None


def _id(message: dict | None) -> str:
    return json.dumps(message.get("id")) if message else ""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Record:
    """The recorded answers (key -> result) and where they are kept."""

    def __init__(self, path: str | None, mark: str, answers: dict[str, object]) -> None:
        self.path, self.mark, self.answers = path, mark, answers

    @classmethod
    def load(cls, path: str | None = None) -> Record:
        path, mark = path or _path(), fingerprint()
        answers: dict[str, object] = {}
        try:
            with open(path or "", "rb") as handle:
                kept = json.loads(handle.read())
            if (
                isinstance(kept, dict)
                and kept.get("fingerprint") == mark
                and isinstance(kept.get("answers"), dict)
            ):
                answers = kept["answers"]
        except (OSError, ValueError):
            pass
        return cls(path, mark, answers)

    def add(self, key: str, result: object) -> None:
        """Keep an answer the SDK gave, written at once (a client may end the server any moment)."""
        self.answers[key] = result
        if self.path is None or sys.dont_write_bytecode:
            return
        import fcntl
        from pathlib import Path

        from teleclaude.adapters import fs

        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path + ".add-lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # with what other servers kept meanwhile, read again
                self.answers = {**Record.load(self.path).answers, **self.answers}
                data = {"format": FORMAT, "fingerprint": self.mark, "answers": self.answers}
                mode = os.stat(__file__).st_mode & 0o666  # as a `.pyc`: readable by whoever reads the source
                fs.atomic_write(Path(self.path), json.dumps(data).encode(), follow=False, mode=mode)
        except OSError:  # a read-only install: fastmcp answers every time, as without the record
            pass


def fingerprint() -> str:
    """What the answers are made of: this Python, the stat of each teleclaude module and each SDK package."""
    from importlib.util import find_spec

    parts = [sys.version, str(FORMAT)]
    root = os.path.dirname(os.path.abspath(__file__))
    for folder, folders, files in os.walk(root):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                stat = os.stat(os.path.join(folder, name))
                parts.append(f"{folder}/{name} {stat.st_mtime_ns} {stat.st_size}")
    for package in SDK:
        spec = find_spec(package)
        origin = spec.origin if spec is not None else None
        stat_of = os.stat(origin) if origin and os.path.exists(origin) else None
        parts.append(f"{package} {origin} {stat_of.st_mtime_ns if stat_of else ''}")
    return hashlib.sha256("\n".join(parts).encode(errors="surrogatepass")).hexdigest()


def _path() -> str | None:
    from teleclaude.methodcache import beside_bytecode

    return beside_bytecode("mcp-answers", ".json")


class _Replayed:
    """The client's lines as the SDK's reader (mcp_stdio) reads them: `first` (what was answered from the
    record and the line it lacked), then the wire; each line shown to `wire` (what it records)."""

    def __init__(self, first: bytes, source: BinaryIO, wire: _Wire) -> None:
        self.first, self.source, self.wire = io.BytesIO(first), source, wire

    def readline(self, size: int = -1) -> bytes:
        line = self.first.readline(size) or self.source.readline(size)
        self.wire.asked(line)
        return line


class _Wire(io.RawIOBase):
    """The SDK's answers on their way to the client: those to the replayed handshake dropped (the client has
    them from the record), those the record lacks to a request it keeps added to it."""

    def __init__(self, fd: int, record: Record, dropped: set[str]) -> None:
        self.fd, self.record, self.dropped = fd, record, set(dropped)
        self.waiting: dict[str, str] = {}  # a request's id -> its key, until its answer is kept
        self.session, self.partial = "", b""

    def writable(self) -> bool:
        return True

    def asked(self, line: bytes) -> None:
        """A line of the client's, as the SDK reads it."""
        message = (
            _message(line) if line[:1] == b"{" and line.endswith(b"\n") and len(line) < 1 << 16 else None
        )
        if message is None or "id" not in message:
            return
        key = request_key(message, self.session)
        if key is None:
            return
        if message.get("method") == "initialize":
            self.session = key
        if key not in self.record.answers:
            self.waiting[_id(message)] = key

    def write(self, data) -> int:
        data = bytes(data)
        self.partial += data
        while b"\n" in self.partial:
            line, self.partial = self.partial.split(b"\n", 1)
            self._send(line + b"\n")
        return len(data)

    def _send(self, line: bytes) -> None:
        if self.dropped or self.waiting:
            message = _message(line) or {}
            ident = _id(message) if "id" in message and "method" not in message else ""
            if ident in self.dropped:
                self.dropped.discard(ident)
                return
            if ident in self.waiting and "result" in message:
                self.record.add(self.waiting.pop(ident), message["result"])
        _write_all(self.fd, line)
