"""`teleclaude mcp` over stdio answers the handshake and the lists from the record of an earlier server's
answers, without loading the MCP SDK, and hands a request the record lacks (a tool call) over to it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from teleclaude import mcp_answers

from ..hostile.test_stdio import Lines
from ..servers import INITIALIZE, stdio_mcp

TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def sdk_loaded(pid: int) -> bool:
    """Whether the process has pydantic's compiled core mapped: the SDK and fastmcp import it."""
    return "pydantic_core" in Path(f"/proc/{pid}/maps").read_text()


def handshake(server: Lines) -> tuple[dict, dict]:
    server.send(json.dumps(INITIALIZE))
    initialized = server.answer()
    server.send(json.dumps(INITIALIZED))
    server.send(json.dumps(TOOLS_LIST))
    return initialized, server.answer()


def test_a_second_server_answers_the_handshake_from_the_record_and_a_tool_call_through_the_sdk(
    subprocess_env, tmp_path
):
    env = {key: value for key, value in subprocess_env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    with stdio_mcp(tmp_path, env) as first:  # answers (and records, unless a server did already)
        answered = handshake(Lines(first))
    with stdio_mcp(tmp_path, env) as second:
        server = Lines(second)
        assert handshake(server) == answered
        assert answered[0]["id"] == 1 and answered[1]["id"] == 2
        assert not sdk_loaded(second.pid)
        call = {"name": "teleclaude__agent_status", "arguments": {}}
        server.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
        called = server.answer()  # not the SDK's answer to the initialize it was given again
        assert called["id"] == 3 and called["result"]["content"][0]["text"].startswith("AGENT"), called
        assert sdk_loaded(second.pid)


def test_a_record_of_other_code_is_not_used(tmp_path, monkeypatch):
    kept = tmp_path / "mcp-answers.json"
    kept.write_text(json.dumps({"format": 1, "fingerprint": "older code", "answers": {"k": {}}}))
    monkeypatch.setattr(mcp_answers, "_path", lambda: str(kept))
    assert mcp_answers.Record.load().answers == {}


def test_only_the_handshake_and_the_lists_are_answered_from_a_record(tmp_path):
    """From the record: an initialize, then the lists of that session; anything else (a call, a list before
    the initialize, a line that is no request) goes to the SDK with the handshake before it."""
    initialize_key = mcp_answers.request_key(INITIALIZE, "")
    assert initialize_key is not None
    list_key = mcp_answers.request_key(TOOLS_LIST, initialize_key)
    assert list_key is not None and list_key != mcp_answers.request_key(TOOLS_LIST, "another session")
    record = mcp_answers.Record(None, "", {initialize_key: {"server": "recorded"}, list_key: {"tools": []}})
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}
    lines = [json.dumps(m).encode() + b"\n" for m in (INITIALIZE, INITIALIZED, TOOLS_LIST, call)]
    left, answers = _answered(record, lines, tmp_path)
    assert [json.loads(line) for line in answers] == [
        {"jsonrpc": "2.0", "id": 1, "result": {"server": "recorded"}},
        {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}},
    ]
    assert left == (lines[0] + lines[1] + lines[3], {"1"})  # the handshake again, then the call
    for first in (TOOLS_LIST, {"id": 1, "method": "initialize"}):  # before an initialize; no JSON-RPC
        line = json.dumps(first).encode() + b"\n"
        assert _answered(record, [line], tmp_path) == ((line, set()), [])
    assert _answered(record, [], tmp_path) == ((None, set()), [])  # the client closed its end


def _answered(
    record, lines: list[bytes], tmp_path: Path
) -> tuple[tuple[bytes | None, set[str]], list[bytes]]:
    source = tmp_path / "client"
    source.write_bytes(b"".join(lines))
    read, write = os.pipe()
    with source.open("rb") as wire_in:
        left = mcp_answers.answer_from(record, wire_in, write)
    os.close(write)
    with os.fdopen(read, "rb") as wire_out:
        return left, wire_out.read().splitlines()


def test_a_tool_served_through_the_wire_finds_stdout_a_text_stream(monkeypatch, capsys):
    """Served through the wire (fd 1 pointed at stderr), `sys.stdout` is still a whole text stream: starting a
    worker read its `encoding` (libtmux), and every run_agent_command over stdio answered `ERROR: INTERNAL`
    with the worker left pending."""
    import io
    import sys

    from teleclaude import mcp

    read, write = os.pipe()
    try:
        wire: io.RawIOBase = io.FileIO(write, "w", closefd=False)  # as mcp_answers passes its wire
        monkeypatch.setattr(sys, "stdout", mcp._Stdout(io.BufferedWriter(wire)))
        assert sys.stdout.encoding == sys.stderr.encoding and sys.stdout.errors == sys.stderr.errors
        print("a stray print")  # to stderr, never the wire
        sys.stdout.buffer.write(b"{}\n")
        sys.stdout.buffer.flush()
        assert os.read(read, 100) == b"{}\n"
    finally:
        monkeypatch.undo()
        os.close(read)
        os.close(write)
    assert "a stray print" in capsys.readouterr().err
