"""What `teleclaude board` shows, as values: the roadmap in lanes, the workers, the agents.

Pure: built from the status board (`planner/core/phase.py`, the planner's own decision order), the session
records and the agent report the CLI prints; it names what it is given and decides nothing of its own. The
lanes group the status board's stages for the eye; an item whose worker is at work on a step stays in that
step's lane until the worker is done (the planner reads git, where a worker commits before its turn ends),
and a worker started ahead of its step waits at its prompt: it is shown waiting, never as the step under
way. Every text from a worker or a file is escaped here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from teleclaude.planner.core.gate import verdicts
from teleclaude.planner.core.model import AgentReport, Step
from teleclaude.planner.core.phase import Board, Phase, Stage
from teleclaude.planner.core.render import usage_by_agent, usage_text
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration
from teleclaude.planner.core.tool_lines import ago
from teleclaude.runtime.core.sessions import Activity, Chunk, Session, SessionState
from teleclaude.runtime.core.spend import Total, merged
from teleclaude.runtime.core.supervision import bare_command

SHOWN_FINISHED = 6  # finished sessions shown under the live ones, newest first


class Lane(Enum):
    TO_PREPARE = "to prepare"
    READY = "ready"
    BUILDING = "building"
    IN_REVIEW = "in review"
    FIXING = "fixing"
    FINALIZING = "finalizing"
    DONE = "done"
    STUCK = "stuck"  # shown only when an item is in it: the planner answers with an error a human resolves


LANE_OF = {
    Stage.NEEDS_REQUIREMENTS: Lane.TO_PREPARE,
    Stage.NEEDS_PLAN: Lane.TO_PREPARE,
    Stage.BLOCKED: Lane.TO_PREPARE,
    Stage.PREPARED: Lane.READY,
    Stage.BUILDING: Lane.BUILDING,
    Stage.NEEDS_COMMIT: Lane.BUILDING,
    Stage.REVIEWING: Lane.IN_REVIEW,
    Stage.FIXING: Lane.FIXING,
    Stage.FINALIZING: Lane.FINALIZING,
    Stage.DONE: Lane.DONE,
    Stage.STUCK: Lane.STUCK,
}


# an item's stage while its worker is at work on a step of it
STAGE_OF_STEP = {
    Step.BUILD.command: Stage.BUILDING,
    Step.COMMIT.command: Stage.NEEDS_COMMIT,
    Step.REVIEW.command: Stage.REVIEWING,
    Step.FIX.command: Stage.FIXING,
    Step.FIX_MERGE.command: Stage.FIXING,
    Step.FINALIZE.command: Stage.FINALIZING,
}


@dataclass(frozen=True)
class Card:
    """One roadmap item in its lane."""

    slug: str
    phase: str  # the status board's label: "building 2/5", "blocked by a, b", "stuck REVIEW_ROUND_LIMIT"
    after: tuple[str, ...]  # its dependencies
    rounds: int  # review rounds so far
    worktree: str  # "", "clean", "3 changed", "broken"
    current: bool  # a worker is at work on it
    gate: str = ""  # its [checks] gate runs, `gate: red 3.1s (turn), green 2.2s (finalize)`, escaped
    waiting: tuple[str, ...] = ()  # the steps (next-review, …) of its workers started ahead, at their prompts
    used: str = ""  # what its workers used (core/spend.py `Total.text`); "" when none ran


@dataclass(frozen=True)
class Worker:
    """One worker session, as the board lists it."""

    id: str
    slug: str
    step: str  # next-build, next-review, …
    where: str  # agent@computer
    state: SessionState
    activity: str  # working, waiting on API, stalled, rate-limited, turn ended, …
    status: str  # the worker's last report_status, first line, escaped
    status_age: str  # "3m ago", "" without a status
    tools: tuple[str, ...]  # `Read: src/x.py (1m ago)`, escaped
    reminders: int
    tmux_session: str
    computer: str
    used: str = ""  # what it used so far, `12k tokens, $0.05 (estimate)` or `unknown`
    # "resumed from tc-…" (it went on in that worker's conversation), "handed over from tc-…", or "" (fresh)
    began: str = ""

    @property
    def live(self) -> bool:
        return not self.state.is_final


@dataclass(frozen=True)
class AgentLine:
    agent: str
    out_until: datetime | None  # None: available
    left: str  # the countdown, "1h05m"; "" when available
    reason: str
    usage: str = ""  # its windows as `agents` shows them, `5h 83% ↺ 19:00 · 7d 41%`; "" when none is known

    @property
    def available(self) -> bool:
        return self.out_until is None


@dataclass(frozen=True)
class View:
    project: str
    lanes: tuple[tuple[Lane, tuple[Card, ...]], ...]
    workers: tuple[Worker, ...]  # live ones first, then the latest finished
    agents: tuple[AgentLine, ...]
    problems: int  # roadmap lines the planner cannot read
    now: datetime
    gated: str = ""  # whether merges into main are gated by [checks], escaped
    spent: str = ""  # the latest run's total, and a [budget] warning, `run: 1.2M tokens, $3.40 (estimate)`


def build_view(
    board: Board,
    rounds: Mapping[str, int],
    sessions: Sequence[Session],
    tools: Mapping[str, Sequence[str]],  # session id -> its tool lines (`tool_lines`)
    now: datetime,
    used: Mapping[str, Total] | None = None,  # session id -> what it used
    spent: str = "",
) -> View:
    """The board of `board` (the status board) and the project's `sessions`."""
    working: dict[str, str] = {}  # slug -> the step its worker is at work on
    waiting: dict[str, list[str]] = {}  # slug -> the steps of its workers started ahead
    for session in sorted(sessions, key=lambda s: (s.created_at, s.id)):
        if session.state is SessionState.PENDING:  # its command not typed yet
            waiting.setdefault(session.slug, []).append(printable(bare_command(session.command)))
        elif not session.state.is_final and session.state is not SessionState.TURN_ENDED:
            working[session.slug] = bare_command(session.command)
    cards: dict[Lane, list[Card]] = {lane: [] for lane in Lane}
    for row in board.rows:
        slug = row.item.slug
        phase = row.phase
        stage = STAGE_OF_STEP.get(working.get(slug, ""))
        if stage is not None and stage is not phase.stage and phase.stage is not Stage.STUCK:
            phase = Phase(stage)  # git is a step ahead of the worker still at work
        cards[LANE_OF[phase.stage]].append(
            Card(
                printable(slug),
                printable(phase.label),
                tuple(printable(dep) for dep in row.item.after),
                rounds.get(slug, 0),
                printable(row.worktree),
                slug in working,
                printable(verdicts(row.gates)),
                tuple(waiting.get(slug, ())),
                _item_used(slug, sessions, used or {}),
            )
        )
    lanes = tuple((lane, tuple(cards[lane])) for lane in Lane if lane is not Lane.STUCK or cards[lane])
    return View(
        board.project,
        lanes,
        _workers(sessions, tools, now, used or {}),
        agent_lines(board.agents, now) if board.agents else (),
        board.problems,
        now,
        printable(board.gated),
        printable(spent),
    )


def _item_used(slug: str, sessions: Sequence[Session], used: Mapping[str, Total]) -> str:
    found = [used[s.id] for s in sessions if s.slug == slug and s.id in used]
    if not found:
        return ""
    return merged(found).text()


def _workers(
    sessions: Sequence[Session], tools: Mapping[str, Sequence[str]], now: datetime, used: Mapping[str, Total]
) -> tuple[Worker, ...]:
    newest = sorted(sessions, key=lambda s: (s.created_at, s.id), reverse=True)
    live = [s for s in newest if not s.state.is_final]
    finished = [s for s in newest if s.state.is_final][:SHOWN_FINISHED]
    return tuple(
        worker(s, tuple(tools.get(s.id, ())), now, used[s.id].text() if s.id in used else "")
        for s in live + finished
    )


def worker(session: Session, tools: tuple[str, ...], now: datetime, used: str = "") -> Worker:
    status = session.status_text.splitlines()[0] if session.status_text.strip() else ""
    return Worker(
        session.id,
        printable(session.slug),
        printable(bare_command(session.command)),
        printable(f"{session.agent}@{session.computer}"),
        session.state,
        activity(session),
        printable(status),
        ago(now, session.status_at) if status and session.status_at else "",
        tools,
        session.nudges,
        session.tmux_session,
        session.computer,
        used,
        f"resumed from tc-{session.resumed_from}"
        if session.resumed_from
        else f"handed over from tc-{session.handed_over_from}"
        if session.handed_over_from
        else "",
    )


_BY_STATE = {
    SessionState.RATE_LIMITED: "rate-limited",
    SessionState.STALLED: "stalled",
    SessionState.NEEDS_ATTENTION: "needs attention",
    SessionState.TURN_ENDED: "turn ended",
    SessionState.PENDING: "waiting",  # at its prompt (or on its way there), its command not typed
}
_BY_ACTIVITY = {
    Activity.WAITING_API: "waiting on API",
    Activity.TOOL: "working",
    Activity.WORKING: "working",
    Activity.QUIET: "quiet",
    Activity.UNREACHABLE: "unreachable",
}


def activity(session: Session) -> str:
    """What the worker is doing, in the words the board uses: its state when that says more than the pane's
    look (the runtime's `Activity`), which is display only."""
    if session.state.is_final:
        return session.state.value
    return _BY_STATE.get(session.state) or _BY_ACTIVITY[session.activity]


def agent_lines(report: AgentReport, now: datetime) -> tuple[AgentLine, ...]:
    out = {u.agent: u for u in report.unavailable}
    usage = usage_by_agent(report)
    lines = []
    for agent in report.agents:
        gone = out.get(agent)
        used = usage_text(usage.get(agent, ()), now, report.zone)
        if gone is None:
            lines.append(AgentLine(printable(agent), None, "", "", used))
        else:
            left = format_duration((gone.until - now).total_seconds())
            lines.append(AgentLine(printable(agent), gone.until, left, printable(gone.reason), used))
    return tuple(lines)


@dataclass(frozen=True)
class Tail:
    """A worker's recent output as the board follows it: the rows read so far (the screen at the first read,
    then what came after), the newest kept, escaped; and the cursor the next read starts from, as
    `sessions output SESSION --cursor CURSOR` takes it."""

    cursor: str
    rows: tuple[str, ...] = ()
    partial: str = ""  # the unfinished row under the terminal cursor: shown last, until it is finished

    @property
    def lines(self) -> tuple[str, ...]:
        return (*self.rows, self.partial) if self.partial else self.rows


def follow(tail: Tail | None, chunk: Chunk, keep: int) -> Tail:
    """`tail` and the rows of `chunk`, read from its cursor (the first read: `tail` None). An alternate
    screen has no history and is read whole when it changed: its rows replace those kept. Rows that
    scrolled away before they were read are said where they were."""
    rows = tail.rows if tail else ()
    fresh = tuple(printable(row) for row in chunk.rows)
    if chunk.alternate_screen:
        rows = fresh or rows
    else:
        if tail is not None and chunk.lines_missed != 0:
            missed = "some" if chunk.lines_missed is None else str(chunk.lines_missed)
            rows += (f"[{missed} rows scrolled away before the board read them]",)
        rows += fresh
    partial = "" if chunk.truncated else printable(chunk.partial)
    return Tail(chunk.cursor.encode(), rows[-keep:], partial)
