"""A stdio MCP call whose arguments hold a lone surrogate (`"\\ud800"`: valid JSON, not UTF-8 text) is
answered with `ERROR: INVALID_ARGUMENT`, and the server goes on answering; it used to drop the request.

Issue 39.8: one huge line (50 MB of garbage) stalled the server: it answered nothing for minutes and did not
exit when its input closed (each read copied the rest of the line). A line over the limit is read past
without being held: a request's line is answered with a JSON-RPC error, `ERROR: INVALID_ARGUMENT`, under its
own id, and the server goes on answering and exits when its input ends."""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..servers import INITIALIZE, stdio_mcp

FIFTY_MB = 50 * 1024 * 1024


@contextlib.contextmanager
def initialized(cwd: Path, env: dict[str, str]) -> Iterator[Lines]:
    """`teleclaude mcp` as an MCP client starts it, spoken to in raw JSON-RPC lines; initialized."""
    with stdio_mcp(cwd, env) as process:
        server = Lines(process)
        server.send(json.dumps(INITIALIZE))
        assert server.answer()["id"] == 1
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield server


@pytest.fixture(scope="module")
def _shared() -> Iterator[tuple[contextlib.ExitStack, dict[str, tuple[Lines, dict[str, str]]]]]:
    with contextlib.ExitStack() as stack:
        yield stack, {}


@pytest.fixture
def shared_server(_shared, subprocess_env, tmp_path) -> tuple[Lines, dict[str, str]]:
    """One stdio server for this module's tests whose calls change nothing the others read (it takes a
    second to start), started by the first in its environment: (the server, that environment)."""
    stack, started = _shared
    if "server" not in started:
        started["server"] = (stack.enter_context(initialized(tmp_path, subprocess_env)), subprocess_env)
    return started["server"]


class Lines:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin, self.stdout = process.stdin, process.stdout

    def send(self, line: str) -> None:
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()

    def answer(self, seconds: float = 30) -> dict:
        ready, _, _ = select.select([self.stdout], [], [], seconds)
        assert ready, "no answer"
        return json.loads(self.stdout.readline())


def call(request_id: int, tool: str, arguments_json: str) -> str:
    """A tools/call line with the arguments as written (json.dumps would escape the backslash)."""
    head = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool}}
    return json.dumps(head)[:-2] + f', "arguments": {arguments_json}}}}}'


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("teleclaude__mark_agent_unavailable", r'{"agent": "claude", "reason": "\ud800"}'),
        ("teleclaude__next_work", r'{"slug": "a\udfffb"}'),
        ("teleclaude__next_work", r'{"cwd": "\ud800\ud800"}'),
    ],
)
def test_a_lone_surrogate_in_an_argument_is_answered_invalid_argument(shared_server, tool, arguments):
    stdio_server, env = shared_server
    stdio_server.send(call(2, tool, arguments))
    answer = stdio_server.answer()
    assert answer["id"] == 2
    assert answer["result"]["content"][0]["text"].splitlines()[0] == "ERROR: INVALID_ARGUMENT"
    stdio_server.send(call(3, "teleclaude__agent_status", "{}"))  # the server goes on answering
    assert stdio_server.answer()["id"] == 3
    agents = [sys.executable, "-m", "teleclaude", "agents"]
    done = subprocess.run(agents, cwd=env["HOME"], env=env, capture_output=True, text=True, timeout=60)
    assert ["claude", "available"] in [line.split()[:2] for line in done.stdout.splitlines()]  # none marked


def test_a_surrogate_pair_is_text_and_reaches_the_tool(shared_server):
    stdio_server, env = shared_server  # gemini: the other tests of the shared server see claude available
    stdio_server.send(
        call(2, "teleclaude__mark_agent_unavailable", r'{"agent": "gemini", "reason": "\ud83d\ude00"}')
    )
    assert stdio_server.answer()["result"]["content"][0]["text"].startswith("OK:")
    agents = [sys.executable, "-m", "teleclaude", "agents"]
    done = subprocess.run(agents, cwd=env["HOME"], env=env, capture_output=True, text=True, timeout=60)
    assert "\U0001f600" in done.stdout


# --- issue 39.8: a line over the limit -----------------------------------------------------------------


def _send_in_background(server: Lines, data: bytes) -> threading.Thread:
    """Write `data` on a thread: the server reads it as it answers, and a pipe holds only 64 KB."""

    def write() -> None:
        try:
            server.stdin.write(data)
            server.stdin.flush()
        except BrokenPipeError:  # the server ended: the test says why
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def _error_text(answer: dict) -> str:
    return answer["error"]["message"].splitlines()[0]


@pytest.mark.parametrize(
    "line",
    [
        b"x" * FIFTY_MB + b"\n",  # garbage: no id to answer, so no answer; the server goes on
        # a request as the Python SDK writes it (its id first) and as the TypeScript SDK does (its id last)
        call(7, "teleclaude__next_work", json.dumps({"slug": "x" * FIFTY_MB})).encode() + b"\n",
        json.dumps(
            {
                "method": "tools/call",
                "params": {"name": "teleclaude__next_work", "arguments": {"slug": "x" * FIFTY_MB}},
                "jsonrpc": "2.0",
                "id": "seven",
            }
        ).encode()
        + b"\n",
    ],
    ids=["garbage", "id-first", "id-last"],
)
def test_a_line_over_the_limit_is_refused_and_the_server_goes_on(shared_server, line):
    server, _ = shared_server
    writer = _send_in_background(server, line)
    if not line.startswith(b"x"):
        answer = server.answer()
        assert answer["id"] in (7, "seven") and _error_text(answer) == "ERROR: INVALID_ARGUMENT"
    writer.join(timeout=60)
    assert not writer.is_alive(), "the server did not read the line"
    server.send(call(3, "teleclaude__agent_status", "{}"))
    assert server.answer()["id"] == 3  # the next request is answered


def test_the_server_exits_when_its_input_ends_in_the_middle_of_a_huge_line(subprocess_env, tmp_path):
    with stdio_mcp(tmp_path, subprocess_env) as process:
        server = Lines(process)
        writer = _send_in_background(server, b"{" + b"x" * FIFTY_MB)
        writer.join(timeout=60)
        assert not writer.is_alive(), "the server did not read the line"
        server.stdin.close()
        assert process.wait(timeout=60) == 0
