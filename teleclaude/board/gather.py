"""The board's shell: read the facts `teleclaude status`, `sessions list` and `agents` read, build the view;
read a run from the session store, build its timeline and write its page.

Read-only: the sessions are read from the store as the runtime left them (the board never observes a pane
or changes a state); the one pane read is the selected worker's output, through the runtime's own call
(`sessions output`), from the cursor the board stored at its last read of that worker.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from teleclaude.adapters import fs, tmux
from teleclaude.adapters import git as gitx
from teleclaude.adapters.sessions_db import RunRow, SessionStore
from teleclaude.adapters.settings import load_config
from teleclaude.adapters.store import user_folder
from teleclaude.board.core.timeline import Bar, Timeline, render_html, timeline
from teleclaude.board.core.view import Tail, View, build_view, follow
from teleclaude.config.spend import SpendConfig
from teleclaude.errors import Error, ErrorCode, Failure, guard
from teleclaude.planner import checks
from teleclaude.planner.core.gate import GateRecord
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.tool_lines import tool_lines
from teleclaude.planner.gate import records
from teleclaude.runtime import spend
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.sessions import Session
from teleclaude.runtime.core.spend import Level, Total, decide

OUTPUT_LINES = 200  # of the selected worker's output, the newest kept
READ_LINES, READ_BYTES = 400, 64_000  # one read's bounds (`sessions output --max-lines --max-bytes`)
READS = 5  # reads at most per refresh while the output is truncated: a fast worker's rest comes next time


class Source:
    """One project's facts, read again on every `view()`."""

    def __init__(
        self, cwd: str | os.PathLike, store: SessionStore | None = None, runtime: Runtime | None = None
    ) -> None:
        self.root = Path(gitx.find_repo(cwd).root).resolve()
        self.store = store or SessionStore()
        self._runtime = runtime
        self._tails: dict[str, Tail] = {}  # session id -> what was read of its output, and its cursor
        # the board loads in threads, and a load that starts while another still reads must go on from the
        # cursor that one stores, not start again from the screen (the rows between would never show)
        self._tails_lock = threading.Lock()
        tmux.load()  # before the app replaces sys.stdout: the output read and `e` use tmux from its threads

    @property
    def runtime(self) -> Runtime:
        """The runtime the CLI's session commands use (opened on the first action or output read)."""
        if self._runtime is None:
            self._runtime = open_runtime(self.root)
        return self._runtime

    @guard
    def view(self) -> View | Error:
        board = checks.status_board(self.root)
        if isinstance(board, Error):
            return board
        repo = gitx.find_repo(self.root)
        rounds = {
            row.item.slug: gitx.review_rounds(repo, row.item.slug)
            for row in board.rows
            if row.worktree and row.worktree != "broken"
        }
        sessions = self.sessions()
        live = {s.id for s in sessions if not s.state.is_final}
        with self._tails_lock:
            self._tails = {sid: tail for sid, tail in self._tails.items() if sid in live}
        now = datetime.now(UTC)
        uses = self.store.recent_tool_uses(s.id for s in sessions if not s.state.is_final)
        tools = {sid: tuple(tool_lines(found, now)) for sid, found in uses.items()}
        prices = _prices(str(self.root))
        used = spend.per_session(self.store, sessions, prices)
        return build_view(board, rounds, sessions, tools, now, used, self._run_spent(prices))

    def _run_spent(self, prices: SpendConfig) -> str:
        """The latest run's total: `run 20261128-…: 1.2M tokens, $3.40 (estimate)`."""
        run = self.store.latest_run(str(self.root))
        if run is None:
            return ""
        total = spend.summed(self.store, self.store.sessions_of_run(run.id), prices)
        verdict = decide(prices.budget, Total(), total, Total())
        warned = f" · budget: {verdict.text()}" if verdict.level is not Level.OK else ""
        return f"run {run.id}: {total.text()}{warned}"

    def timeline(self) -> Timeline | Error | None:
        """The latest run's timeline (None before the project's first run)."""
        run = guard(self.store.latest_run)(str(self.root))
        if run is None or isinstance(run, Error):
            return run
        return guard(timeline_of)(run, self.store)

    def sessions(self) -> list[Session]:
        return [s for s in self.store.sessions() if _same_path(s.project, self.root)]

    def output(self, session_id: str) -> tuple[str, ...] | Error:
        """The worker's recent output, each line escaped: read as `sessions output SESSION --cursor CURSOR`
        reads it, from the cursor stored at the board's last read of it (the first read: the screen)."""
        with self._tails_lock:
            return self._read_output(session_id)

    def _read_output(self, session_id: str) -> tuple[str, ...] | Error:
        tail = self._tails.pop(session_id, None)
        for _ in range(READS):
            cursor = tail.cursor if tail else None
            read = guard(self.runtime.get_session_output)(session_id, cursor, READ_LINES, READ_BYTES)
            if isinstance(read, Error):
                if read.code is ErrorCode.INVALID_CURSOR and tail is not None:
                    tail = None  # its pane was respawned: start again from the screen
                    continue
                if tail is not None:  # a read that failed (tmux or the database busy): the next goes on
                    self._tails[session_id] = tail
                return read
            tail = follow(tail, read.chunk, OUTPUT_LINES)
            if not read.chunk.truncated:
                break
        if tail is None:
            return ()
        self._tails[session_id] = tail
        return tail.lines


def _same_path(one: str, root: Path) -> bool:
    try:
        return Path(one).resolve() == root
    except OSError:
        return False


# --- a run's timeline -------------------------------------------------------------------------------------


@guard
def run_timeline(
    cwd: str | os.PathLike, run_id: str | None = None, store: SessionStore | None = None
) -> Timeline | Error:
    """The timeline of run `run_id` (default: the project's latest)."""
    store = store or SessionStore()
    root = str(Path(gitx.find_repo(cwd).root).resolve())
    run = store.run(run_id) if run_id else store.latest_run(root)
    if run is None:
        which = f"run {printable(run_id)} is not" if run_id else f"no `teleclaude run` of {root} is"
        return Error(
            ErrorCode.NO_WORK,
            f"{which} recorded in {store.path}.\nStart one with `teleclaude run`, then ask again.",
        )
    return timeline_of(run, store)


def timeline_of(run: RunRow, store: SessionStore) -> Timeline:
    sessions = store.sessions_of_run(run.id)
    events = store.events(s.id for s in sessions)
    gates = _gate_records(run.project)
    return timeline(
        run.id,
        run.project,
        run.started_at,
        run.ended_at,
        run.outcome,
        sessions,
        events,
        datetime.now(UTC),
        gates,
        spend.used(store, sessions),
        _prices(run.project),
    )


def report_json(data: Timeline) -> dict[str, object]:
    """`teleclaude report --json`: the run, its steps with what each used, and the sums (unknown is null)."""

    def used(bar: Bar) -> dict[str, object]:
        return Total().plus(bar.tokens, bar.agent, data.prices).as_json()

    return {
        "run": data.run_id,
        "project": data.project,
        "outcome": data.outcome or None,
        "started_at": data.start.isoformat(),
        "ended_at": data.end.isoformat(),
        "items": [
            {
                "slug": row.slug,
                "steps": [
                    {"session": bar.session_id, "step": bar.step, "agent": bar.agent, "outcome": bar.outcome}
                    | {"seconds": round(bar.seconds, 1), "spend": used(bar)}
                    for bar in row.bars
                ],
                "fix_rounds": data.rounds(row.slug)[0],
                "fix_spend": data.rounds(row.slug)[1].as_json(),
            }
            for row in data.rows
        ],
        "spend": data.spent().as_json(),
        "spend_per_item": {name: total.as_json() for name, total in data.spend("item")},
        "spend_per_agent": {name: total.as_json() for name, total in data.spend("agent")},
        "spend_per_step": {name: total.as_json() for name, total in data.spend("step")},
    }


def cost_lines(run_id: str) -> list[str]:
    """The lines `teleclaude run`'s report ends with: what the run used, and its most expensive item."""
    store = SessionStore()
    run = store.run(run_id)
    if run is None:
        return []
    data = timeline_of(run, store)
    lines = [f"cost: {data.spent().text()}"]
    items = data.spend("item")
    if items and items[0][1].known:
        slug, spent = items[0]
        rounds = data.rounds(slug)[0]
        fixed = f", {rounds} fix round{'s' if rounds != 1 else ''}" if rounds else ""
        lines.append(f"most expensive: {slug or '(bugs)'} ({spent.text()}{fixed})")
    return lines


def _prices(project: str) -> SpendConfig:
    """The project's [prices] (the shipped table when its teleclaude.toml cannot be read)."""
    try:
        return load_config(project).spend
    except Failure:
        return SpendConfig()


def _gate_records(project: str) -> dict[str, tuple[GateRecord, ...]]:
    """The project's [checks] gate runs, per item; none when its repository cannot be read."""
    try:
        return records(gitx.find_repo(project).common_dir)
    except Failure:
        return {}


def report_path(run_id: str) -> Path:
    """Where `teleclaude run` leaves its report: beside the database, one page per run."""
    return user_folder() / "reports" / f"run-{run_id}.html"


@guard
def write_report(data: Timeline, target: str | os.PathLike) -> Path | Error:
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fs.atomic_write(path, render_html(data).encode())
    return path


@guard
def write_run_report(run_id: str, folder: Path | None = None) -> Path | Error:
    """The report of a run just ended, in `report_path(run_id)` (or `folder`: a rehearsal's, in its own)."""
    store = SessionStore()
    run = store.run(run_id)
    if run is None:
        return Error(ErrorCode.NO_WORK, f"run {printable(run_id)} is not recorded in {store.path}.")
    target = report_path(run_id) if folder is None else folder / report_path(run_id).name
    return write_report(timeline_of(run, store), target)


def report_line(run_id: str, folder: Path | None = None) -> str:
    """The `report:` line `teleclaude run` ends with: where its report was written, or why it was not."""
    written = write_run_report(run_id, folder)
    if isinstance(written, Path):
        return f"report: {written}"
    return f"report: not written ({written.code.value})"
