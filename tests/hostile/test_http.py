"""`teleclaude mcp --http` on 127.0.0.1: what a DNS-rebinding web page, a client without the token and a
client with a wrong one send is refused before any tool runs; the right token works."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from teleclaude.adapters.http_guard import HttpAccess, http_access
from teleclaude.errors import Error

from ..servers import INITIALIZE, http_board, http_mcp

MARK = {  # what a hostile page would call: it changes the database, so "nothing ran" can be checked
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "teleclaude__mark_agent_unavailable", "arguments": {"agent": "claude"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def _shared() -> Iterator[tuple[contextlib.ExitStack, dict[str, tuple[str, str, dict[str, str]]]]]:
    with contextlib.ExitStack() as stack:
        yield stack, {}


@pytest.fixture
def server(_shared, subprocess_env, tmp_path) -> tuple[str, str, dict[str, str]]:
    """A real `teleclaude mcp --http` on 127.0.0.1, shared by this module's tests (what one changes, no other
    reads; it takes a second to start), started by the first in its environment: (its URL, the token it
    made, that environment)."""
    stack, started = _shared
    if "server" not in started:
        url, token = stack.enter_context(http_mcp(tmp_path, subprocess_env, tmp_path / "http-server.log"))
        started["server"] = (url, token, subprocess_env)
    return started["server"]


def _attack(url: str, headers: dict[str, str]) -> list[int]:
    """Initialize, then call a tool that writes, with `headers`: the status of each answer."""
    statuses = []
    with httpx2.Client(timeout=10) as client:
        for message in (INITIALIZE, MARK):
            answer = client.post(url, content=json.dumps(message), headers={**ACCEPT, **headers})
            statuses.append(answer.status_code)
            if "mcp-session-id" in answer.headers:
                headers = {**headers, "mcp-session-id": answer.headers["mcp-session-id"]}
    return statuses


def _still_available(env: dict[str, str], agent: str = "claude") -> bool:
    """In the database of the server that had `env` (`teleclaude agents`, run in its HOME)."""
    agents = [sys.executable, "-m", "teleclaude", "agents"]
    done = subprocess.run(agents, cwd=env["HOME"], env=env, capture_output=True, text=True, timeout=60)
    table = done.stdout
    return any(line.split()[:2] == [agent, "available"] for line in table.splitlines())


def test_a_dns_rebinding_request_is_refused_even_with_the_token(server):
    url, token, env = server
    port = url.split(":")[2].split("/")[0]
    hostile = {
        "Host": f"evil.example:{port}",
        "Origin": "http://evil.example",
        "Authorization": f"Bearer {token}",
    }
    assert all(status in (403, 421) for status in _attack(url, hostile))
    assert _still_available(env)


def test_a_foreign_origin_is_refused_even_with_the_token(server):
    url, token, env = server
    hostile = {"Origin": "http://evil.example", "Authorization": f"Bearer {token}"}
    assert all(status == 403 for status in _attack(url, hostile))
    assert _still_available(env)


def test_a_page_on_another_loopback_port_is_refused_even_with_the_token(server):
    url, token, env = server
    port = int(url.split(":")[2].split("/")[0])
    for origin in (f"http://127.0.0.1:{port + 1}", f"http://localhost:{port}", "null"):
        assert _attack(url, {"Origin": origin, "Authorization": f"Bearer {token}"}) == [403, 403], origin
    assert _still_available(env)
    own = {"Origin": f"http://127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
    with httpx2.Client(timeout=10) as client:  # the server's own origin is let in
        answer = client.post(url, content=json.dumps(INITIALIZE), headers={**ACCEPT, **own})
    assert answer.status_code == 200


def test_the_web_boards_websocket_opens_only_from_the_boards_own_origin(repo, subprocess_env, tmp_path):
    """Browsers send a cookie to every port of its host: a page on another port must not get the board."""
    from teleclaude.board.web import COOKIE

    with http_board(repo, subprocess_env, tmp_path / "board.log") as (port, token):
        here = {"Host": f"127.0.0.1:{port}"}
        with httpx2.Client(timeout=10) as client:
            page = client.get(f"http://127.0.0.1:{port}/?token={token}", headers=here)
            assert page.status_code == 200
            cookie = {"Cookie": f"{COOKIE}={page.cookies[COOKIE]}"}
            elsewhere = f"http://127.0.0.1:{port + 1}"
            foreign = client.get(f"http://127.0.0.1:{port}/", headers={**here, **cookie, "Origin": elsewhere})
            assert foreign.status_code == 403
        for origin in (elsewhere, "http://localhost:3000", "null"):
            assert asyncio.run(_websocket_status(port, {**cookie, "Origin": origin})) == 403, origin


async def _websocket_status(port: int, headers: dict[str, str]) -> int:
    """The status of a websocket upgrade to the board (101: opened, and closed again at once)."""
    import aiohttp

    async with aiohttp.ClientSession() as client:
        try:
            async with client.ws_connect(f"ws://127.0.0.1:{port}/ws?width=80&height=24", headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as error:
            return error.status


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token-0123456789", "Basic Zm9vOmJhcg==", "Bearer"]
)
def test_a_request_without_the_right_token_is_refused(server, authorization):
    url, _, env = server
    headers = {"Authorization": authorization} if authorization else {}
    assert _attack(url, headers) == [401, 401]
    assert _still_available(env)


def test_the_official_client_with_the_token_works(server):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    url, token, env = server  # gemini: the other tests of the shared server see claude available

    async def go():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool("teleclaude__mark_agent_unavailable", {"agent": "gemini"})

    result = asyncio.run(go())
    assert result.content[0].text.startswith("OK: gemini is unavailable")
    assert not _still_available(env, "gemini")


def test_the_token_is_made_once_and_only_its_owner_can_read_it(server):
    _, token, env = server
    path = Path(env["TELECLAUDE_DB"]).parent / "http-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = http_access("127.0.0.1", token_file=path)
    assert again == HttpAccess(token)


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = tmp_path / "http-token"
    path.write_text("x" * 43 + "\n")
    path.chmod(0o644)
    refused = http_access("127.0.0.1", token_file=path)
    assert isinstance(refused, Error) and refused.code.value == "FILE_ERROR"


@pytest.mark.parametrize(
    "args",
    [
        ("--host", "0.0.0.0"),
        ("--host", "192.0.2.1", "--no-token"),
        ("--host", "0.0.0.0", "--allow-remote", "--no-token"),
    ],
)
def test_a_remote_address_needs_allow_remote_and_the_token(cli, args):
    done = cli("mcp", "--http", *args, "--port", "1", timeout=30, process=True)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "ERROR: INVALID_ARGUMENT"


def test_allow_remote_keeps_the_token(tmp_path):
    access = http_access("0.0.0.0", allow_remote=True, token_file=tmp_path / "t")
    assert isinstance(access, HttpAccess) and access.token


@pytest.mark.parametrize("port", ["70000", "-1", "0", "http"])
def test_a_port_out_of_range_is_a_usage_error(cli, port):
    done = cli("mcp", "--http", "--port", port, timeout=30, process=True)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "usage:" in done.stderr and "--port" in done.stderr.splitlines()[-1]
    assert "Traceback" not in done.stderr


def test_a_port_in_use_is_port_in_use_before_serving_is_said(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = cli("mcp", "--http", "--port", str(taken.getsockname()[1]), timeout=30, process=True)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "ERROR: PORT_IN_USE", done.stdout + done.stderr
    assert "serving" not in done.stderr
