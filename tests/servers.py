"""Servers the tests (and the benches) start as processes: `teleclaude mcp` over HTTP or stdio, a port to
put one on, and stopping one without leaving it behind. Test modules import these from here, never from
each other."""

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
    port: int, process: subprocess.Popen, seconds: float = 30.0, log: Path | None = None
) -> None:
    """Until `process` listens on `port`; fails when it exits first (with its log) or takes too long."""
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
def http_mcp(cwd: Path, env: Mapping[str, str], log_path: Path, *args: str) -> Iterator[tuple[str, str]]:
    """A real `teleclaude mcp --http [ARGS]` on 127.0.0.1 in `cwd`, its output in `log_path`: (its URL, the
    token it made); stopped afterwards."""
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "teleclaude", "mcp", "--http", *args, "--port", str(port)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(port, process, log=log_path)
            token = (Path(env["TELECLAUDE_DB"]).parent / "http-token").read_text().strip()
            yield f"http://127.0.0.1:{port}/mcp", token
        finally:
            stop(process)


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
