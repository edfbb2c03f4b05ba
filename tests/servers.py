"""Servers the tests (and the benches) start as processes: `teleclaude mcp` over HTTP or stdio, the board
in a browser, a port to put one on, and stopping one without leaving it behind. Test modules import these
from here, never from each other."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

INITIALIZE = {  # an MCP client's first message
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "a test", "version": "1"},
    },
}


def free_port() -> int:
    """A port nothing listens on (until someone binds it): for a server, or a computer that is gone."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(
    port: int, process: subprocess.Popen, seconds: float = 300.0, log: Path | None = None
) -> None:
    """Until `process` listens on `port`; fails when it exits first (with its log) or never listens. The
    bound is only for a server that hangs: `mcp --http` takes ~4 s to listen on a quiet machine, and over
    30 s with both cores busy and four test workers beside it."""
    deadline = time.monotonic() + seconds
    while not listening(port):
        if process.poll() is not None:
            raise AssertionError(
                f"the server exited with {process.returncode}" + (f":\n{log.read_text()}" if log else "")
            )
        assert time.monotonic() < deadline, f"nothing listens on port {port} after {seconds} s"
        time.sleep(0.1)


def stop(process: subprocess.Popen, seconds: float = 10.0) -> None:
    """Ask `process` to end (SIGTERM; a stdio server: its input closed), then kill it if it will not."""
    if process.stdin is not None and not process.stdin.closed:
        process.stdin.close()
    else:
        process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def _served(cwd: Path, env: Mapping[str, str], log_path: Path, *command: str) -> Iterator[tuple[int, str]]:
    """`teleclaude COMMAND --port P` on 127.0.0.1 in `cwd`, its output in `log_path`: (P, the token it
    uses) once it listens; stopped afterwards."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "teleclaude", *command, "--port", str(port)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, process, log=log_path)
            yield port, (Path(env["TELECLAUDE_DB"]).parent / "http-token").read_text().strip()
        finally:
            stop(process)


@contextmanager
def http_mcp(cwd: Path, env: Mapping[str, str], log_path: Path, *args: str) -> Iterator[tuple[str, str]]:
    """A real `teleclaude mcp --http [ARGS]` on 127.0.0.1 in `cwd`, its output in `log_path`: (its URL, the
    token it made); stopped afterwards."""
    with _served(cwd, env, log_path, "mcp", "--http", *args) as (port, token):
        yield f"http://127.0.0.1:{port}/mcp", token


@contextmanager
def http_board(cwd: Path, env: Mapping[str, str], log_path: Path) -> Iterator[tuple[int, str]]:
    """A real `teleclaude board --web` on 127.0.0.1 in the project `cwd`, its output in `log_path`: (its port,
    the token it uses); stopped afterwards."""
    with _served(cwd, env, log_path, "board", "--web") as served:
        yield served


@contextmanager
def stdio_mcp(cwd: Path, env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`teleclaude mcp` as an MCP client starts it, its stdin and stdout pipes; stopped afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-m", "teleclaude", "mcp"],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        stop(process)
        assert process.stdout is not None
        process.stdout.close()


class Receiver:
    """A real HTTP receiver on 127.0.0.1 for Apprise's `json://` target: it keeps each message POSTed to it.
    `answer`: "ok" (200), "fail" (500) or "hang" (never answers until it is stopped)."""

    def __init__(self, answer: str = "ok") -> None:
        import http.server
        import json
        import threading

        self.answer = answer
        self.messages: list[dict] = []
        self.paths: list[str] = []
        self.arrived = threading.Condition()
        self.released = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.arrived:
                    receiver.messages.append(json.loads(body or b"{}"))
                    receiver.paths.append(self.path)
                    receiver.arrived.notify_all()
                if receiver.answer == "hang":
                    receiver.released.wait()
                    return
                self.send_response(500 if receiver.answer == "fail" else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, secret: str = "s3cret-path") -> str:
        """A json:// URL to this receiver whose path stands for a service's secret."""
        return f"json://127.0.0.1:{self.port}/{secret}"

    def wait_for(self, count: int, seconds: float = 30.0) -> list[dict]:
        """The messages once `count` have arrived (fails after `seconds`)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.messages) >= count, seconds), self.messages
            return list(self.messages)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
