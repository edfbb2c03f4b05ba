"""A real headless Chromium (Debian's `chromium`), driven over its DevTools protocol: open a page, wait,
evaluate expressions, take a screenshot, list every URL the page asked for, and keep what its websockets
brought."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

import aiohttp

from .servers import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Opened:
    values: list[Any]  # the expressions' values, in order
    png: bytes
    requested: list[str]  # every URL the page loaded or tried to, but those the browser blocked
    blocked: list[str]  # the URLs the browser refused to ask for (the page's Content-Security-Policy)
    received: bytes = b""  # every websocket message the page received, one after another


def open_page(
    url: str, expressions: list[str], seconds: float = 8.0, size=(1400, 800), until_received: bytes = b""
) -> Opened:
    """The page at `url`, looked at after `seconds` (or, with `until_received`, once its websockets brought
    those bytes, at most `seconds`)."""
    return asyncio.run(_open(url, expressions, seconds, size, until_received))


async def _open(
    url: str, expressions: list[str], seconds: float, size: tuple[int, int], until: bytes
) -> Opened:
    assert CHROMIUM, "chromium is not installed"
    port = free_port()
    # its helper processes may still write the profile while it is removed: never an error
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [
                CHROMIUM,
                *("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"),
                f"--remote-debugging-port={port}",
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return await _drive(port, url, expressions, seconds, until)
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # chromium and every helper process it started
            process.wait()


async def _drive(port: int, url: str, expressions: list[str], seconds: float, until: bytes) -> Opened:
    async with aiohttp.ClientSession() as http:
        pages: list[dict[str, Any]] = []
        for _ in range(200):
            try:
                async with http.get(f"http://127.0.0.1:{port}/json/list") as answer:
                    pages = [p for p in await answer.json() if p["type"] == "page"]
            except aiohttp.ClientError:
                pass
            if pages:
                break
            await asyncio.sleep(0.1)
        requested: dict[str, str] = {}  # request id -> URL
        blocked: list[str] = []
        received: list[bytes] = []
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            counter = 0

            async def call(method: str, **params: Any) -> dict[str, Any]:
                nonlocal counter
                counter += 1
                mine = counter
                await ws.send_json({"id": mine, "method": method, "params": params})
                async for message in ws:
                    data = json.loads(message.data)
                    event, params = data.get("method"), data.get("params", {})
                    if event == "Network.requestWillBeSent":
                        requested[params["requestId"]] = params["request"]["url"]
                    if event == "Network.loadingFailed" and params.get("blockedReason"):
                        blocked.append(requested.pop(params["requestId"], ""))
                    if event == "Network.webSocketCreated":
                        requested[params["requestId"]] = params["url"]
                    if event == "Network.webSocketFrameReceived":
                        frame = params["response"]
                        payload = frame["payloadData"]  # a binary frame's in base64
                        received.append(
                            base64.b64decode(payload) if frame["opcode"] == 2 else payload.encode()
                        )
                    if data.get("id") == mine:
                        return data.get("result", {})
                raise AssertionError("chromium closed the DevTools connection")

            await call("Network.enable")
            await call("Page.enable")
            await call("Page.navigate", url=url)
            deadline = asyncio.get_running_loop().time() + seconds
            while asyncio.get_running_loop().time() < deadline:  # keep reading events meanwhile
                await call("Runtime.evaluate", expression="1")
                if until and until in b"".join(received):
                    break
                await asyncio.sleep(0.2)
            values = []
            for expression in expressions:
                found = await call("Runtime.evaluate", expression=expression, returnByValue=True)
                values.append(found.get("result", {}).get("value"))
            shot = await call("Page.captureScreenshot", format="png")
            return Opened(
                values, base64.b64decode(shot["data"]), list(requested.values()), blocked, b"".join(received)
            )
