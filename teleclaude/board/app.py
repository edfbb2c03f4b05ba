"""`teleclaude board`: the Textual app, a thin shell over `board.core.view` and `board.gather`.

It reads the facts again every `interval` seconds in a worker thread and redraws; keys act on the selected
worker or agent through the library calls the CLI makes (`agents available|unavailable`, `sessions end`),
and show their answer as the CLI would print it (`ERROR: CODE` first).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from teleclaude.board.core.timeline import Timeline, colours
from teleclaude.board.core.view import Lane, View, Worker
from teleclaude.board.gather import Source
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import AgentMarked
from teleclaude.planner.core.render import to_text
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration

SERVER_PID = "TELECLAUDE_BOARD_SERVER"  # set by `board --web` (web.py) for the apps it starts
INTERVAL = 2.0  # seconds between reads of the files, git and the stores
CONFIRM_SECONDS = 5.0  # `e` ends the selected session when pressed again within this time
UNAVAILABLE_REASON = "marked on the board"

_STATE_STYLE = {
    "rate-limited": "bold red",
    "stalled": "yellow",
    "needs attention": "bold red",
    "waiting on API": "magenta",
    "working": "green",
    "waiting": "dim",
    "turn ended": "cyan",
    "errored": "red",
}


class BoardApp(App[None]):
    TITLE = "teleclaude board"
    CSS = """
    #lanes { height: auto; max-height: 40%; }
    .lane { width: 1fr; height: auto; border: round $primary-darken-2; padding: 0 1; }
    #middle { height: auto; max-height: 60%; }
    #workers { width: 2fr; height: auto; }
    #workers-table { height: auto; max-height: 16; }
    #side { width: 1fr; min-width: 36; height: auto; }
    #agents-table { height: auto; max-height: 13; }
    #tools { height: auto; border: round $primary-darken-2; padding: 0 1; }
    #timeline { height: auto; border: round $primary-darken-2; padding: 0 1; }
    #output { height: 1fr; min-height: 6; border: round $primary-darken-2; padding: 0 1; }
    """
    BINDINGS = [
        Binding("a", "attach", "attach"),
        Binding("e", "end_session", "end session"),
        Binding("u", "mark_unavailable", "agent out (1h)"),
        Binding("v", "mark_available", "agent back"),
        Binding("r", "reload", "refresh"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self, source: Source, interval: float = INTERVAL, web: bool = False, confirm: float = CONFIRM_SECONDS
    ) -> None:
        super().__init__()
        self.source = source
        self.interval = interval
        self.confirm = confirm  # seconds within which a second `e` ends the session
        self.web = web
        # under `board --web`: its server's pid (textual-serve leaves its apps running when it is stopped)
        server = os.environ.get(SERVER_PID, "") if web else ""
        self.server = int(server) if server.isdecimal() else None
        self.view: View | None = None
        self.workers_shown: tuple[Worker, ...] = ()
        self.ending: tuple[str, float] | None = None  # (session id, when `e` was first pressed)
        self.selected: str | None = None
        self.loads = 0  # finished reads (tests wait on it)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=True)
        with Horizontal(id="lanes"):
            for lane in Lane:
                yield Static(id=f"lane-{lane.name.lower()}", classes="lane")
        with Horizontal(id="middle"):
            with Vertical(id="workers"):
                yield DataTable(id="workers-table", cursor_type="row", zebra_stripes=True)
                yield Static(id="timeline")
            with Vertical(id="side"):
                yield DataTable(id="agents-table", cursor_type="row")
                yield Static(id="tools")
        yield VerticalScroll(Static(id="output-text"), id="output")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = str(self.source.root)
        workers = self.query_one("#workers-table", DataTable)
        workers.add_columns("session", "item", "step", "agent", "activity", "status", "reminders", "used")
        self.query_one("#agents-table", DataTable).add_columns("agent", "availability / usage")
        for lane in Lane:
            self.query_one(f"#lane-{lane.name.lower()}", Static).border_title = lane.value
        self.query_one("#output", VerticalScroll).border_title = "output"
        self.query_one("#timeline", Static).border_title = "this run"
        self.query_one("#tools", Static).border_title = "last tools"
        self.action_reload()
        self.set_interval(self.interval, self.action_reload)

    # --- reading -----------------------------------------------------------------------------------------

    def action_reload(self) -> None:
        if self.server is not None and not _alive(self.server):
            self.exit()  # `board --web` was stopped: nobody reads this screen any more
            return
        self._load(self.selected)

    @work(thread=True, exclusive=True, group="load")
    def _load(self, selected: str | None) -> None:
        view = self.source.view()
        live = None if isinstance(view, Error) else next((w for w in view.workers if w.id == selected), None)
        output = self.source.output(live.id) if live is not None and live.live else None
        self.call_from_thread(self._show, view, output, self.source.timeline(), selected)

    def _show(
        self,
        view: View | Error,
        output: tuple[str, ...] | Error | None,
        timeline: Timeline | Error | None,
        selected: str | None,  # the worker whose output this is
    ) -> None:
        if not self.is_running:  # the board is closing and its widgets may be gone: a late read shows nothing
            return
        if isinstance(view, Error):
            self.query_one("#output-text", Static).update(Text(to_text(view)))
            self.loads += 1
            return
        self.view = view
        self.sub_title = " · ".join(part for part in (str(self.source.root), view.gated, view.spent) if part)
        for lane, cards in view.lanes:
            self.query_one(f"#lane-{lane.name.lower()}", Static).update(_lane_text(cards))
        for lane in Lane:
            shown = any(lane is shown_lane for shown_lane, _ in view.lanes)
            self.query_one(f"#lane-{lane.name.lower()}", Static).display = shown
        self._fill_workers(view)
        self._fill_agents(view)
        if selected == self.selected:  # else another worker was selected meanwhile: its load shows its output
            self._fill_side(output)
        self.query_one("#timeline", Static).update(
            _timeline_text(timeline)
            if isinstance(timeline, Timeline)
            else Text("no run recorded", style="dim")
        )
        self.loads += 1

    def _fill_workers(self, view: View) -> None:
        ids = [w.id for w in view.workers]
        rebuilt = _fill(
            self.query_one("#workers-table", DataTable),
            [
                (
                    w.id,
                    (
                        w.id,
                        w.slug,
                        f"{w.step} ({w.began})" if w.began else w.step,
                        w.where,
                        Text(w.activity, style=_STATE_STYLE.get(w.activity, "")),
                        f"{w.status} ({w.status_age})" if w.status else "",
                        str(w.reminders or ""),
                        w.used,
                    ),
                )
                for w in view.workers
            ],
        )
        self.workers_shown = view.workers
        if ids and self.selected not in ids:
            self.selected = ids[0]
            self.action_reload()  # with its output
        elif rebuilt and self.selected in ids:
            self.query_one("#workers-table", DataTable).move_cursor(row=ids.index(self.selected))

    def _fill_agents(self, view: View) -> None:
        rows = []
        for line in view.agents:  # two lines each: the usage under the availability, so the side holds both
            text = "available" if line.available else f"out, {line.left} left"
            text += f" ({line.reason})" if line.reason else ""
            cell = Text()
            cell.append(text, style="" if line.available else "red")
            cell.append(f"\n{line.usage}")
            rows.append((line.agent, (line.agent, cell)))
        _fill(self.query_one("#agents-table", DataTable), rows, height=2)

    def _fill_side(self, output: tuple[str, ...] | Error | None) -> None:
        worker = self._worker()
        tools = "\n".join(worker.tools) if worker and worker.tools else "(none)"
        self.query_one("#tools", Static).update(Text(tools))
        if isinstance(output, Error):
            text = to_text(output)
        elif output is None:
            text = "(select a live worker to see its output)"
        else:
            text = "\n".join(output)
        box = self.query_one("#output", VerticalScroll)
        box.border_title = f"output of {worker.id}" if worker else "output"
        following = box.scroll_y >= box.max_scroll_y  # at the newest rows: stay (else the user scrolled up)
        self.query_one("#output-text", Static).update(Text(text))
        if following:
            self.call_after_refresh(box.scroll_end, animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "workers-table" or event.cursor_row != event.data_table.cursor_row:
            return  # a redraw's highlight of the first row, arriving after the cursor was put back
        if event.row_key.value != self.selected:
            self.selected = event.row_key.value
            self.action_reload()

    def _worker(self) -> Worker | None:
        return next((w for w in self.workers_shown if w.id == self.selected), None)

    def _agent(self) -> str | None:
        table = self.query_one("#agents-table", DataTable)
        if self.view is None or not self.view.agents:
            return None
        return self.view.agents[min(table.cursor_row, len(self.view.agents) - 1)].agent

    # --- acting ------------------------------------------------------------------------------------------

    def _answer(self, value: Error | AgentMarked | str) -> None:
        """The CLI's answer, as a notification (an error as an error)."""
        text = value if isinstance(value, str) else to_text(value)
        self.notify(
            printable(text, keep_newlines=True),
            severity="error" if isinstance(value, Error) else "information",
        )
        self.action_reload()

    def action_mark_unavailable(self) -> None:
        agent = self._agent()
        if agent:
            self._answer(app.mark_agent_unavailable(agent, None, UNAVAILABLE_REASON, cwd=self.source.root))

    def action_mark_available(self) -> None:
        agent = self._agent()
        if agent:
            self._answer(app.mark_agent_available(agent, cwd=self.source.root))

    def action_end_session(self) -> None:
        worker = self._worker()
        if worker is None or not worker.live:
            self.notify("select a live worker first", severity="warning")
            return
        now = time.monotonic()
        if self.ending is None or self.ending[0] != worker.id or now - self.ending[1] > self.confirm:
            self.ending = (worker.id, now)
            self.notify(f"press e again to end {worker.id} ({worker.step} {worker.slug})", severity="warning")
            return
        self.ending = None
        from teleclaude.runtime.api import guarded

        ended = guarded(self.source.runtime.end_session, worker.id)
        self._answer(ended if isinstance(ended, Error) else f"OK: ended {worker.id}")

    def action_attach(self) -> None:
        worker = self._worker()
        if worker is None or not worker.live:
            self.notify("select a live worker first", severity="warning")
            return
        runtime = self.source.runtime
        socket, name = runtime.config.socket, worker.tmux_session.rpartition(":")[2]
        command = f"tmux -L {socket} attach -t {name}"
        if runtime.config.elsewhere(worker.computer):
            self.notify(f"{worker.id} runs on {printable(worker.computer)}: there, {command}")
            return
        if _inside(socket, os.environ.get("TMUX", "")):  # this board runs in the workers' tmux: go there
            from teleclaude.runtime.api import guarded

            switched = guarded(runtime.tmux.cmd, "switch-client", "-t", f"={name}")
            if isinstance(switched, Error):
                self._answer(switched)
            return
        if self.web:
            self.notify(f"in a terminal: {command}")
            return
        with self.suspend():
            subprocess.run(["tmux", "-L", socket, "attach", "-t", f"={name}"], check=False)


def _fill(table: DataTable, rows: Sequence[tuple[str, tuple[object, ...]]], height: int = 1) -> bool:
    """Show `rows` (key, cells): in place when the keys are those shown, so the cursor stays where the user
    put it; True when the table was rebuilt (its cursor back on the same row number)."""
    keys = [key for key, _ in rows]
    if [row.value for row in table.rows] == keys:
        columns = list(table.columns)
        for key, values in rows:
            for column, value in zip(columns, values, strict=True):
                table.update_cell(key, column, value, update_width=True)
        return False
    row = table.cursor_row
    table.clear()
    for key, values in rows:
        table.add_row(*values, key=key, height=height)
    if rows:
        table.move_cursor(row=min(row, len(rows) - 1))
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _inside(socket: str, tmux_env: str) -> bool:
    """$TMUX (`/tmp/tmux-1000/NAME,PID,SESSION`) names the server on `socket`."""
    path = tmux_env.split(",")[0]
    return bool(path) and (Path(path).name == socket or path == socket)


def _lane_text(cards) -> Text:
    text = Text()
    for card in cards:
        if text:
            text.append("\n")
        text.append(("▶ " if card.current else "") + card.slug, style="bold" if card.current else "")
        detail = [card.phase] if card.phase else []
        if card.rounds:
            detail.append(f"{card.rounds} round{'s' if card.rounds > 1 else ''}")
        if card.after and not card.phase.startswith("blocked"):  # blocked already names them
            detail.append("after " + ", ".join(card.after))
        if card.worktree and card.worktree != "clean":
            detail.append(card.worktree)
        if card.used:
            detail.append(card.used)
        detail += [f"{step.removeprefix('next-')} worker waiting" for step in card.waiting]
        if detail:
            text.append("\n  " + " · ".join(detail), style="dim")
        if card.gate:
            text.append("\n  " + card.gate, style="red" if "red" in card.gate.split(",")[-1] else "dim")
    return text or Text("—", style="dim")


TIMELINE_WIDTH = 60


def _timeline_text(data: Timeline) -> Text:
    painted = colours(data.agents)
    span = max(1.0, (data.end - data.start).total_seconds())
    label = max((len(row.slug) for row in data.rows), default=4)
    text = Text(f"run {data.run_id} · {format_duration(span)} · {data.outcome or 'running'}\n")

    def column(moment: datetime) -> int:
        return min(TIMELINE_WIDTH - 1, int(TIMELINE_WIDTH * (moment - data.start).total_seconds() / span))

    for row in data.rows:
        cells: list[tuple[str, str]] = [("·", "dim")] * TIMELINE_WIDTH
        for start, end in row.waits:
            for i in range(column(start), column(end) + 1):
                cells[i] = ("-", "dim")
        for bar in row.bars:  # started ahead: it waited at its prompt (under the bars of its item's steps)
            for i in range(column(bar.start), column(bar.work_start)):
                cells[i] = ("░", "dim")
        for bar in row.bars:
            for i in range(column(bar.work_start), column(bar.end) + 1):
                cells[i] = ("█", painted[bar.agent])
            for mark in bar.marks:
                cells[column(mark.at)] = (
                    {"limit": "▼", "fallback": "▲"}.get(mark.kind.value, "•"),
                    "bold red",
                )
        text.append(f"{printable(row.slug or '(bugs)'):<{label}} ")
        for char, style in cells:
            text.append(char, style=style)
        text.append("\n")
    text.append("  ".join(f"■ {agent}" for agent in painted), style="dim")
    for agent, colour in painted.items():
        text.highlight_words([f"■ {agent}"], style=colour)
    return text
