"""`teleclaude board` driven by Textual's own pilot over the demo repository with live stand-in workers in a
private tmux: lanes, workers, a countdown, attach (on tmux), marking agents, ending a session."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.token import token_path
from teleclaude.agents import PROFILES
from teleclaude.board.app import CONFIRM_SECONDS, BoardApp
from teleclaude.board.core.timeline import Timeline, render_html
from teleclaude.board.gather import Source, run_timeline
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import AgentReport, UsageWindow
from teleclaude.runtime.core.sessions import SessionState, Started, StartRequest

from ..browser import CHROMIUM, open_page
from ..servers import free_port
from .conftest import attached_client

SIZE = (180, 50)


@pytest.fixture
def workers(project, runtime, monkeypatch) -> list[str]:
    """Two live workers that keep working (they never answer), and codex out for two hours."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    ids = []
    for agent, slug in (("claude", "greeting"), ("gemini", "shouting")):
        started = runtime.run_agent_command(
            StartRequest("local", "next-build", slug, str(project), agent, "med")
        )
        assert isinstance(started, Started), started
        ids.append(started.session.id)
    app.mark_agent_unavailable("codex", "2h", "quota_exhausted", cwd=project)
    return ids


async def loaded(board: BoardApp, pilot, count: int = 1) -> None:
    goal = board.loads + count
    deadline = time.monotonic() + 20
    while board.loads < goal:
        assert time.monotonic() < deadline, "the board never loaded"
        await pilot.pause(0.05)


async def until(pilot, done: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not within 20 s"
        await pilot.pause(0.05)


Steps = Callable[[BoardApp, Pilot], Awaitable[None]]


@pytest.fixture
def drive(project) -> Callable[..., None]:
    """`drive(steps)`: the board over the project in Textual's pilot; once it has read the facts `loads`
    times, `await steps(board, pilot)`."""

    def run(
        steps: Steps,
        interval: float = 0.5,
        loads: int = 1,
        size: tuple[int, int] = SIZE,
        confirm: float = CONFIRM_SECONDS,
    ) -> None:
        async def go() -> None:
            board = BoardApp(Source(project), interval=interval, confirm=confirm)
            async with board.run_test(size=size) as pilot:
                await loaded(board, pilot, loads)
                await steps(board, pilot)

        asyncio.run(go())

    return run


def cells(board: BoardApp, table_id: str) -> list[list[str]]:
    table = board.query_one(f"#{table_id}", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def agent_rows(board: BoardApp) -> dict[str, str]:
    """agent -> its availability (the first line of its row; its usage is the second)."""
    return {row[0]: row[1].split("\n")[0] for row in cells(board, "agents-table")}


def agent_usage(board: BoardApp) -> dict[str, str]:
    return {row[0]: row[1].partition("\n")[2] for row in cells(board, "agents-table")}


def text_of(board: BoardApp, widget_id: str) -> str:
    return str(board.query_one(f"#{widget_id}", Static).render())


def test_the_board_shows_lanes_live_workers_and_a_countdown(drive, project, workers):
    now = datetime.now(UTC)
    AvailabilityStore().record_usage([UsageWindow("claude", "5h", 83, now + timedelta(hours=2), now)])

    async def steps(board: BoardApp, pilot: Pilot) -> None:
        assert "farewell" in text_of(board, "lane-to_prepare")  # waits for greeting
        assert "blocked by greeting" in text_of(board, "lane-to_prepare")
        building = text_of(board, "lane-building")  # prepared, and a worker builds each
        assert "greeting" in building and "shouting" in building
        rows = cells(board, "workers-table")
        assert {row[0] for row in rows} == set(workers)
        assert {row[3] for row in rows} == {"claude@local", "gemini@local"}
        agents = agent_rows(board)
        assert agents["claude"] == "available"
        usage = agent_usage(board)
        assert usage["claude"].startswith("5h 83% ↺ ") and usage["gemini"] == ""
        assert agents["codex"].startswith("out, 1h59m") or agents["codex"].startswith("out, 2h")
        # the first worker is selected: its screen is read
        await until(
            pilot, lambda: any(w in text_of(board, "output-text").lower() for w in ("thinking", "next-build"))
        )

    drive(steps)


def test_the_agents_panel_holds_each_agents_availability_and_usage_at_160_columns(drive, project):
    now = datetime.now(UTC)
    AvailabilityStore().record_usage(
        [
            UsageWindow("claude", "5h", 83, now + timedelta(hours=2), now),
            UsageWindow("claude", "7d", 41, now + timedelta(days=3), now),
        ]
    )
    app.mark_agent_unavailable("codex", "2h", "quota_exhausted", cwd=project)

    async def steps(board: BoardApp, pilot: Pilot) -> None:
        await pilot.pause(0.2)  # laid out
        table = board.query_one("#agents-table", DataTable)
        assert " · 7d 41% ↺ " in agent_usage(board)["claude"]
        assert agent_rows(board)["codex"].endswith("(quota_exhausted)")
        assert table.max_scroll_x == 0, (table.virtual_size, table.size)  # nothing cut off at the right

    drive(steps, size=(160, 50))


def test_attach_switches_the_tmux_client_to_the_selected_worker(
    drive, project, runtime, workers, monkeypatch
):
    tmux = runtime.tmux
    tmux.cmd("new-session", "-d", "-s", "watcher", "sleep", "600")
    with attached_client(runtime.config.socket, "watcher") as client:
        deadline = time.monotonic() + 10
        while tmux.cmd("list-clients", "-F", "#{session_name}") != ["watcher"]:
            assert time.monotonic() < deadline, "the tmux client did not attach"
            time.sleep(0.05)
        socket_path, session_id = tmux.cmd(
            "display-message", "-p", "-t", "=watcher", "#{socket_path}\t#{session_id}"
        )[0].split("\t")
        monkeypatch.setenv("TMUX", f"{socket_path},{client.pid},{session_id.lstrip('$')}")
        target = runtime.store.get(workers[1])
        assert target is not None

        async def steps(board: BoardApp, pilot: Pilot) -> None:
            ids = [row[0] for row in cells(board, "workers-table")]
            board.query_one("#workers-table", DataTable).focus()
            board.query_one("#workers-table", DataTable).move_cursor(row=ids.index(workers[1]))
            await pilot.pause(0.1)
            await pilot.press("a")
            await pilot.pause(0.2)

        drive(steps)
        deadline = time.monotonic() + 10
        while tmux.cmd("list-clients", "-F", "#{session_name}") != [target.tmux_session]:
            assert time.monotonic() < deadline, tmux.cmd("list-clients", "-F", "#{session_name}")
            time.sleep(0.05)


def test_agents_are_marked_from_the_board_as_the_cli_marks_them(drive, project, workers):
    async def steps(board: BoardApp, pilot: Pilot) -> None:
        table = board.query_one("#agents-table", DataTable)
        table.focus()
        names = [row[0] for row in cells(board, "agents-table")]
        table.move_cursor(row=names.index("codex"))
        await pilot.press("v")  # a read begun before the key may end after it: wait for the one after
        await until(pilot, lambda: agent_rows(board)["codex"] == "available")
        table.move_cursor(row=names.index("gemini"))
        await pilot.press("u")
        await until(pilot, lambda: agent_rows(board)["gemini"].startswith("out, "))

    drive(steps)
    report = app.agent_status(cwd=project)
    assert isinstance(report, AgentReport)
    assert [u.agent for u in report.unavailable] == ["gemini"]


def test_a_session_ends_on_the_second_press_only(drive, project, runtime, workers):
    async def steps(board: BoardApp, pilot: Pilot) -> None:
        table = board.query_one("#workers-table", DataTable)
        table.focus()
        ids = [row[0] for row in cells(board, "workers-table")]
        table.move_cursor(row=ids.index(workers[0]))
        await pilot.pause(0.1)
        await pilot.press("e")  # a key reaches the table, then the app: taken once `ending` is set
        await until(pilot, lambda: board.ending is not None)
        assert runtime.store.get(workers[0]).state is not SessionState.CANCELLED
        await pilot.press("e")
        await until(pilot, lambda: runtime.store.get(workers[0]).state is SessionState.CANCELLED)
        await loaded(board, pilot)  # the board read again after its answer

    drive(steps, confirm=3600)  # the second press is the second however long a loaded machine takes to it
    ended = runtime.store.get(workers[0])
    assert ended is not None and ended.state is SessionState.CANCELLED
    assert ended.tmux_session not in runtime.tmux.session_names()
    still = runtime.store.get(workers[1])
    assert still is not None and not still.state.is_final


def test_worker_text_reaches_the_board_escaped(drive, project, runtime, workers):
    session = runtime.store.get(workers[0])
    assert session is not None
    from dataclasses import replace
    from datetime import UTC, datetime

    runtime.store.save(replace(session, status_text="\x1b[2Jdone\u202egnp.exe", status_at=datetime.now(UTC)))

    async def steps(board: BoardApp, pilot: Pilot) -> None:
        status = {row[0]: row[5] for row in cells(board, "workers-table")}[workers[0]]
        assert status.startswith("\\x1b[2Jdone\\u202egnp.exe")

    drive(steps)


def written_past_the_screen(runtime, session_id: str) -> list[str]:
    """More rows than the worker's screen holds, printed on its terminal as its CLI would; once shown."""
    pane_id = runtime.store.get(session_id).pane_id
    height = runtime.tmux.views()[pane_id].height
    (tty,) = runtime.tmux.cmd("display-message", "-p", "-t", pane_id, "#{pane_tty}")
    written = [f"row {i} after the cursor" for i in range(height + 10)]
    with open(tty, "w") as terminal:
        terminal.write("".join(f"{row}\r\n" for row in written))
    deadline = time.monotonic() + 20
    while written[-1] not in runtime.tmux.glance(pane_id)[1]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return written


def test_a_load_that_starts_while_another_reads_goes_on_from_its_cursor(
    project, runtime, workers, monkeypatch
):
    """The board loads in threads, one beside another when a load is slow: the second read goes on from the
    cursor the first one stores, so no row written meanwhile is left out (it once started again from the
    screen)."""
    source = Source(project, runtime=runtime)
    assert source.output(workers[0]) != ()  # the screen: the cursor stored
    written = written_past_the_screen(runtime, workers[0])
    read, first_reading = runtime.get_session_output, threading.Event()

    def slow_read(*args, **kwargs):
        done = read(*args, **kwargs)
        first_reading.set()
        time.sleep(0.5)  # a loaded machine: the next load starts meanwhile
        return done

    monkeypatch.setattr(runtime, "get_session_output", slow_read)
    shown: list[tuple[str, ...] | Error] = []
    first = threading.Thread(target=lambda: shown.append(source.output(workers[0])))
    first.start()
    first_reading.wait(20)
    shown.append(source.output(workers[0]))
    first.join()
    assert all(not isinstance(lines, Error) and written[0] in lines for lines in shown), shown


def test_a_read_that_fails_keeps_the_cursor_for_the_next(project, runtime, workers, monkeypatch):
    """A read refused for a moment (tmux or the database busy on a loaded machine) shows its error; the next
    read goes on from the stored cursor, not from the screen."""
    source = Source(project, runtime=runtime)
    assert source.output(workers[0]) != ()
    written = written_past_the_screen(runtime, workers[0])
    read = runtime.get_session_output
    busy = Error(ErrorCode.TMUX_FAILED, "tmux did not answer in time")
    monkeypatch.setattr(runtime, "get_session_output", lambda *args, **kwargs: busy)
    assert source.output(workers[0]) == busy
    monkeypatch.setattr(runtime, "get_session_output", read)
    lines = source.output(workers[0])
    assert not isinstance(lines, Error) and written[0] in lines, lines


def test_the_selected_worker_shows_its_output_since_the_cursor_escaped(drive, project, runtime, workers):
    """The first read shows the screen and stores the cursor; what the worker writes after it is shown in
    full, even more rows than its screen holds, and what a terminal would obey is escaped."""

    async def steps(board: BoardApp, pilot: Pilot) -> None:
        # the first worker selected, its screen read: the cursor stored
        session = runtime.store.get(board.selected or "")
        assert session is not None and session.id in workers
        height = runtime.tmux.views()[session.pane_id].height
        (tty,) = runtime.tmux.cmd("display-message", "-p", "-t", session.pane_id, "#{pane_tty}")
        written = [f"row {i} after the cursor" for i in range(height + 10)]
        assert "row 0 after the cursor" not in text_of(board, "output-text")
        with open(tty, "w") as terminal:  # the worker's terminal: what its CLI or a tool prints
            terminal.write("".join(f"{row}\r\n" for row in written))  # raw: no CR added
            terminal.write("\x1b[31mred\x1b[0m \u202egnp.exe\r\n")
        deadline = time.monotonic() + 20
        while "gnp.exe" not in text_of(board, "output-text"):
            assert time.monotonic() < deadline, text_of(board, "output-text")
            await pilot.pause(0.1)
        shown = text_of(board, "output-text").splitlines()
        assert written[0] in shown, shown
        start = shown.index(written[0])
        assert shown[start : start + len(written)] == written  # every row after the cursor, in order
        assert "red \\u202egnp.exe" in shown  # the colour obeyed by tmux, the override escaped
        assert not any(char in "\n".join(shown) for char in "\x1b\u202e")

    drive(steps, interval=0.3, loads=2)


def test_a_project_outside_git_is_an_error_not_a_traceback(tmp_path, teleclaude_cli):
    outside = tmp_path / "plain"
    outside.mkdir()
    process = teleclaude_cli(outside, "board")
    out, err = process.communicate(timeout=30)
    assert process.returncode == 1
    assert out.startswith("ERROR: NOT_A_GIT_REPO")
    assert "Traceback" not in err


class Page(HTMLParser):
    """The report's item rows, bars (agent -> colour) and marks."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self.bars: list[tuple[str, str]] = []
        self.marks: list[str] = []

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if tag == "g" and "item" in classes:
            self.items.append(found.get("data-slug") or "")
        if tag == "g" and "mark" in classes:
            self.marks += classes[1:]
        if tag == "rect":
            self.bars.append((found.get("data-agent") or "", found.get("fill") or ""))


def test_run_says_where_its_report_is_and_report_draws_the_run(
    project, fake_agents, teleclaude_cli, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "limit")  # greeting's builder hits a limit: claude takes over
    process = teleclaude_cli(project, "run", "greeting")
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, out + err
    where = [line.removeprefix("report: ") for line in out.splitlines() if line.startswith("report: ")]
    assert len(where) == 1 and Path(where[0]).is_file(), out
    page = Page()
    page.feed(Path(where[0]).read_text())
    assert page.items == ["greeting"]
    assert {"gemini", "claude"} <= {agent for agent, _ in page.bars}
    assert all(colour == PROFILES[agent].colour for agent, colour in page.bars)
    assert "limit" in page.marks and "fallback" in page.marks

    target = tmp_path / "out" / "timeline.html"
    if CHROMIUM:  # the page as a real browser shows it: every row drawn, nothing asked of the network
        opened = open_page(
            Path(where[0]).as_uri(), ["document.querySelectorAll('g.item rect.bar').length"], 2
        )
        assert opened.values == [len(page.bars)]
        assert all(url.startswith("file://") for url in opened.requested), opened.requested
        assert opened.png.startswith(b"\x89PNG")

    process = teleclaude_cli(project, "report", "--html", str(target))
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0 and out.startswith("OK:"), out
    again = Page()
    again.feed(target.read_text())
    assert again.items == page.items and sorted(again.bars) == sorted(page.bars)

    process = teleclaude_cli(project, "report")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "COMPLETE" in out.splitlines()[0] and "greeting:" in out and "[fallback]" in out


def seconds_of(duration: str) -> int:
    """`1m13s`, `45s`, `1h05m` (as the report spells them) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(amount) * units[unit] for amount, unit in re.findall(r"(\d+)([hms])", duration))


def test_the_report_counts_a_worker_started_ahead_from_its_command_and_no_unneeded_start(
    project, fake_agents, teleclaude_cli, monkeypatch
):
    """With 2 s steps, each step's worker is started ahead while the step before works, and the finalizer
    started ahead after greeting's first review is not needed (the review asks for changes): the report
    counts each step from its command, draws the waits at the prompt apart, and has no step nobody took."""
    monkeypatch.setenv("FAKE_AGENT", "hook")
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "2")
    monkeypatch.setenv("FAKE_AGENT_REJECT", "greeting")
    process = teleclaude_cli(project, "run", "--parallel", "2")
    out, err = process.communicate(timeout=400)
    assert process.returncode == 0, out + err
    assert "was not needed" in out  # an unneeded start happened
    process = teleclaude_cli(project, "report")
    report, _ = process.communicate(timeout=60)
    steps = re.findall(r"(next-[a-z-]+) (\w+) (\w+) (\w+)( \(started ahead, waited \w+\))?", report)
    assert steps, report
    builds = [seconds_of(taken) for step, _, taken, _, _ in steps if step == "next-build"]
    assert len(builds) == 3 and min(builds) >= 2, report  # greeting, shouting, farewell
    assert all(outcome != "cancelled" for _, _, _, outcome, _ in steps), report
    assert any(ahead for *_, ahead in steps), report  # the waits at the prompt, said apart
    per_step = dict(re.findall(r"(next-[a-z-]+) (\w+)", report.split("per step: ")[1].splitlines()[0]))
    assert seconds_of(per_step["next-build"]) >= 2 * 3, report
    # on the page too: no bar of an item's step drawn over the bar of its step before
    page = Page()
    data = run_timeline(project)
    assert isinstance(data, Timeline)
    for row in data.rows:
        for before, after in zip(row.bars, row.bars[1:], strict=False):
            assert after.work_start >= before.end, (row.slug, before, after)
    page.feed(render_html(data))
    assert len(page.bars) == len(steps)


def test_report_without_a_run_is_an_error(project, teleclaude_cli):
    process = teleclaude_cli(project, "report")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1 and out.startswith("ERROR: NO_WORK"), out + err


def web_board(teleclaude_cli, project: Path, *args: str) -> tuple[subprocess.Popen, int]:
    """`teleclaude board --web ARGS` on a free port, once it answers: (its process, the port)."""
    port = free_port()
    process = teleclaude_cli(project, "board", "--web", "--port", str(port), *args)
    deadline = time.monotonic() + 30
    while get_or_none(port) is None:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the board's server did not start"
        time.sleep(0.1)
    return process, port


def get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode(errors="replace")
    finally:
        connection.close()


def test_the_web_board_wants_a_loopback_host_its_own_origin_and_the_token(project, teleclaude_cli):
    process, port = web_board(teleclaude_cli, project)
    token = token_path().read_text().strip()
    here = {"Host": f"127.0.0.1:{port}"}
    assert get(port, f"/?token={token}", {"Host": f"evil.example:{port}"})[0] == 421
    assert get(port, "/", here)[0] == 401
    assert get(port, "/?token=wrong", here)[0] == 401
    foreign = {**here, "Origin": "http://evil.example"}
    assert get(port, f"/?token={token}", foreign)[0] == 403
    status, headers, body = get(port, f"/?token={token}", {**here, "Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and "teleclaude board" in body
    assert "default-src 'self'" in headers["Content-Security-Policy"]  # no font or script from elsewhere
    cookie = headers["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    assert get(port, "/", {**here, "Cookie": cookie})[0] == 200
    assert get(port, "/", {"Host": f"localhost:{port}", "Cookie": cookie})[0] == 200
    assert asyncio.run(drawn(port, {"Cookie": cookie}))  # the app itself, over the page's websocket
    with pytest.raises(aiohttp.WSServerHandshakeError):
        asyncio.run(drawn(port, {}))
    process.terminate()
    process.communicate(timeout=10)


async def drawn(port: int, headers: dict[str, str]) -> bool:
    """The board's first screens over the websocket the page opens show the roadmap."""
    seen = b""
    async with aiohttp.ClientSession() as client:
        url = f"ws://127.0.0.1:{port}/ws?width=120&height=40"
        async with client.ws_connect(url, headers={**headers, "Origin": f"http://127.0.0.1:{port}"}) as ws:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    async for message in ws:
                        seen += (
                            message.data if isinstance(message.data, bytes) else str(message.data).encode()
                        )
                        if b"greeting" in seen:
                            break
    return b"greeting" in seen


def get_or_none(port: int) -> int | None:
    try:
        return get(port, "/", {"Host": f"127.0.0.1:{port}"})[0]
    except OSError:
        return None


def test_the_web_board_refuses_a_remote_address_without_allow_remote(project, teleclaude_cli):
    process = teleclaude_cli(project, "board", "--web", "--host", "0.0.0.0")
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 1 and out.startswith("ERROR: INVALID_ARGUMENT"), out


def test_a_database_that_cannot_be_read_is_shown_as_its_error_and_the_board_stays_up(
    drive, project, tmp_path, monkeypatch
):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    monkeypatch.setenv("TELECLAUDE_DB", str(folder))

    async def steps(board: BoardApp, pilot: Pilot) -> None:
        assert text_of(board, "output-text").startswith("ERROR: STORE_UNAVAILABLE")
        assert board.is_running

    drive(steps, interval=0.3, loads=2)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
@pytest.mark.skipif(
    "FAKETIME" in os.environ,  # scripts/year-ahead; not diagnosed further: it is no date of ours
    reason="under libfaketime the page loads but textual-serve's websocket never brings the app's screen",
)
def test_the_web_board_opens_in_headless_chromium_shows_a_workers_output_and_loads_nothing_from_outside(
    project, runtime, workers, teleclaude_cli, tmp_path
):
    newest = runtime.store.get(workers[1])  # selected first
    (tty,) = runtime.tmux.cmd("display-message", "-p", "-t", newest.pane_id, "#{pane_tty}")
    with open(tty, "w") as terminal:
        terminal.write(f"printed by {newest.id}\r\n")
    process, port = web_board(teleclaude_cli, project)
    token = token_path().read_text().strip()
    shown = f"printed by {newest.id}".encode()  # the selected worker's output, on the board
    url = f"http://127.0.0.1:{port}/?token={token}"
    opened = open_page(url, ["document.body.className"], seconds=60, until_received=shown)
    assert "-first-byte" in opened.values[0]  # the app's screen arrived over the websocket
    (tmp_path / "web-board.png").write_bytes(opened.png)
    assert shown in opened.received
    assert b"ERROR" not in opened.received
    # every request to this server (its page, scripts, font, websocket), none refused, none elsewhere
    assert opened.blocked == [], opened.blocked
    assert {urlsplit(url).netloc for url in opened.requested} == {f"127.0.0.1:{port}"}, opened.requested
    refused = open_page(f"http://127.0.0.1:{port}/", ["document.body.innerText"], seconds=2)
    assert refused.values[0].startswith("Unauthorized")
    process.terminate()
    process.communicate(timeout=10)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_the_apps_of_a_killed_web_board_quit_too(project, teleclaude_cli):
    process, port = web_board(teleclaude_cli, project, "--interval", "0.5")
    cookie = get(port, f"/?token={token_path().read_text().strip()}", {"Host": f"127.0.0.1:{port}"})[1]
    headers = {"Cookie": cookie["Set-Cookie"].split(";")[0], "Origin": f"http://127.0.0.1:{port}"}

    async def kill_while_open() -> list[int]:
        async with aiohttp.ClientSession() as client:
            url = f"ws://127.0.0.1:{port}/ws?width=120&height=40"
            async with client.ws_connect(url, headers=headers) as ws:
                seen = b""
                async for message in ws:  # the app runs and draws
                    seen += message.data if isinstance(message.data, bytes) else str(message.data).encode()
                    if b"greeting" in seen:
                        break
                apps = [pid for child in _children(process.pid) for pid in [child, *_children(child)]]
                process.kill()  # no shutdown of its own, the browser still there: the apps notice
                process.communicate()
                return apps

    apps = asyncio.run(kill_while_open())
    assert apps
    try:
        deadline = time.monotonic() + 15
        while any(_running(pid) for pid in apps):
            assert time.monotonic() < deadline, "an app of the killed server is still running"
            time.sleep(0.1)
    finally:
        for pid in filter(_running, apps):
            os.kill(pid, signal.SIGKILL)


# --- the real `teleclaude board`, in a terminal, as a user drives it ---------------------------------------


class Terminal:
    """`teleclaude board` running in a pane of the workers' tmux server (another session of it, $TMUX unset
    as in a terminal of its own), its screen read and keys pressed as a user's."""

    def __init__(self, runtime, project: Path) -> None:
        self.tmux = runtime.tmux
        # the test's environment (its HOME, database, stand-ins first on PATH), in a terminal of its own
        unset = ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")
        board = ["env", *(part for name in unset for part in ("-u", name))]
        board += [f"{k}={v}" for k, v in os.environ.items() if k not in (*unset, "TERM")]  # tmux's TERM
        board += [sys.executable, "-m", "teleclaude", "board", "--interval", "0.3"]
        width, height = SIZE
        (self.pane,) = self.tmux.cmd(
            *("new-session", "-d", "-s", "user", "-x", str(width), "-y", str(height), "-c", str(project)),
            *("-P", "-F", "#{pane_id}", *board),
        )

    def screen(self) -> str:
        return "\n".join(self.tmux.glance(self.pane)[1])

    def until(self, shown: Callable[[str], bool], seconds: float = 30) -> str:
        deadline = time.monotonic() + seconds
        while not shown(screen := self.screen()):
            if time.monotonic() > deadline:
                pytest.fail(f"not on the board's screen:\n{screen}")
            time.sleep(0.1)
        return screen

    def press(self, *keys: str) -> None:
        self.tmux.cmd("send-keys", "-t", self.pane, *keys)


def test_the_board_in_a_terminal_shows_a_workers_output_ends_it_and_attaches(project, runtime, workers):
    """The real `teleclaude board` in a terminal: the user selects a worker and reads its output, attaches
    to it and comes back, and ends it with `e` twice; nothing on the screen is an error."""
    for session_id in workers:  # what each worker's CLI printed last
        pane_id = runtime.store.get(session_id).pane_id
        (tty,) = runtime.tmux.cmd("display-message", "-p", "-t", pane_id, "#{pane_tty}")
        with open(tty, "w") as terminal:
            terminal.write(f"printed by {session_id}\r\n")
    board = Terminal(runtime, project)
    first, other = workers[1], workers[0]  # the newest first
    board.until(lambda screen: f"output of {first}" in screen and f"printed by {first}" in screen)
    board.press("Down")  # the next worker
    screen = board.until(lambda screen: f"output of {other}" in screen and f"printed by {other}" in screen)
    assert "ERROR" not in screen and f"printed by {first}" not in screen

    board.press("a")  # the worker's own screen, in this terminal
    session = runtime.store.get(other)
    attached = time.monotonic() + 30
    while (clients := runtime.tmux.cmd("list-clients", "-F", "#{session_name}")) != [session.tmux_session]:
        if time.monotonic() > attached:
            pytest.fail(f"attached: {clients}; the board's screen:\n{board.screen()}")
        time.sleep(0.1)
    board.until(lambda screen: f"printed by {other}" in screen and "output of" not in screen)
    board.press("C-b", "d")  # tmux's own detach: back on the board
    screen = board.until(lambda screen: f"output of {other}" in screen)
    assert "ERROR" not in screen

    board.press("e")
    board.until(lambda screen: "press e again" in screen)
    board.press("e")
    ended = time.monotonic() + 30
    while runtime.store.get(other).state is not SessionState.CANCELLED:
        if time.monotonic() > ended:
            pytest.fail(f"not ended; the board's screen:\n{board.screen()}")
        time.sleep(0.1)
    screen = board.until(lambda screen: f"ended {other}" in screen)
    assert "ERROR" not in screen
    assert session.tmux_session not in runtime.tmux.session_names()


def test_a_load_that_ends_while_the_board_closes_is_dropped(project):
    """A read that ends after the board began closing, when its widgets are gone, shows nothing instead of
    failing the board's exit (a read started by selecting the first worker once outlived a quick session)."""
    lane: list[Static] = []

    class LateSource(Source):
        reads = 0

        def view(self):
            self.reads += 1
            if self.reads > 1:  # every later read ends only once the board has taken its lanes down
                deadline = time.monotonic() + 20
                while not lane or lane[0].parent is not None:
                    assert time.monotonic() < deadline, "the board never closed"
                    time.sleep(0.01)
            return super().view()

    failed: list[Exception] = []

    class WatchedBoard(BoardApp):
        def _show(self, *args) -> None:
            try:
                super()._show(*args)
            except Exception as error:  # raised on the board's loop, where the closing board would drop it
                failed.append(error)
                raise

    async def go() -> None:
        source = LateSource(project)
        board = WatchedBoard(source, interval=3600)
        async with board.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: board.loads >= 1)
            lane.append(board.query_one("#lane-to_prepare", Static))
            board.action_reload()
            while source.reads < 2:
                await pilot.pause(0.01)

    asyncio.run(go())
    assert failed == []
