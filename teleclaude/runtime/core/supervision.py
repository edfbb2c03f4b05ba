"""Supervision: when a quiet worker is reminded, when it needs attention, when its orchestrator hears of it,
and what a worker that reported its step is told next.

Pure: every answer is computed from the session's stored timestamps and `now`, so a restarted supervisor
neither loses nor postpones a timer. Progress (new output, a hook event, a status report) resets the count.

A worker with no progress gets reminder 1 after `soft_remind` (typed at its next idle, without interrupting),
then a reminder every `hard_remind - soft_remind` (interrupting once `hard_remind` has passed), and after
`max_nudges` unanswered reminders it needs attention (`unresponsive_after`). With the defaults: 3m30s soft,
7m and 10m30s hard, needs attention at 14m.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import Decision, Dispatch, RunYourself, Step
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration
from teleclaude.runtime.core.sessions import Activity, Change, Event, Session, SessionState, transition

MARK = "[teleclaude]"  # starts every line the supervisor types, so its echo never counts as progress
STATUS_SHOWN = 160  # characters of a worker's own status words in a digest
NO_PROGRESS = ", NO PROGRESS"  # ends a digest's first line when it found no progress (the escalation)
_SUPERVISED = (SessionState.RUNNING, SessionState.STALLED)
_DIGESTED = (SessionState.RUNNING, SessionState.STALLED, SessionState.NEEDS_ATTENTION)
_INTERRUPTED = re.compile(r"^\W*(interrupted|request cancelled|conversation interrupted)\b", re.IGNORECASE)
_TOOL_ROW = re.compile(r"^\s*[⏺●•]\s*\w[\w ]*\(|^\s*(Running|Executing|Shell|\$ )\b")


# --- progress and activity ---------------------------------------------------------------------------------


def is_progress(rows: list[str]) -> bool:
    """New rows of output count as progress, except the echo of what the supervisor typed and a CLI saying
    that the Escape of an interrupting reminder stopped it."""
    return any(row.strip() and MARK not in row and not _INTERRUPTED.search(row) for row in rows)


def progressed(session: Session, now: datetime) -> tuple[Session, tuple[Event, ...]]:
    """The worker moved: the reminder count starts again, and a stalled worker is running again (an event)."""
    moved, events = transition(session, Change.PROGRESS, now)
    return replace(moved, last_progress_at=now, nudges=0, last_nudge_at=None), events


def resumed(
    session: Session, now: datetime, change: Change = Change.TYPED, detail: str = ""
) -> tuple[Session, tuple[Event, ...]]:
    """Someone typed into the worker (`TYPED`, or the cycle's `DIRECTED`): it works again, and its next
    quiet prompt ends a new turn."""
    typed, events = transition(session, change, now, detail)
    fresh = replace(
        typed,
        last_progress_at=now,
        nudges=0,
        last_nudge_at=None,
        delivered_at=now,
        screen_hash="",  # the first look after typing counts as a change
        prompt_polls=0,
        cycle_started_at=None,
        parent_told=False,  # a new turn: its end is told to the parent again
    )
    return fresh, events


def activity_of(
    session: Session, screen: list[str], now: datetime, idle_seconds: float, retry: str = ""
) -> Activity:
    """What the pane shows: a retry countdown (`retry`, the profile's pattern), a tool running, output, or
    nothing new for `idle_seconds`."""
    retrying, tool = _screen_signs(tuple(screen), retry)
    if retrying:
        return Activity.WAITING_API
    if session.last_change_at and (now - session.last_change_at).total_seconds() >= idle_seconds:
        return Activity.QUIET
    return Activity.TOOL if tool else Activity.WORKING


@lru_cache(maxsize=256)  # a busy worker's screen is mostly the one seen at the last look
def _screen_signs(screen: tuple[str, ...], retry: str) -> tuple[bool, bool]:
    """(a retry countdown, a tool row) in the screen's last eight rows that are not blank."""
    tail = [row for row in screen if row.strip()][-8:]
    retrying = bool(retry) and any(re.search(retry, row) for row in tail)
    return retrying, any(_TOOL_ROW.search(row) for row in tail)


def silent_since(session: Session) -> datetime | None:
    return session.last_progress_at or session.delivered_at


# --- reminders ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reminder:
    number: int  # 1-based
    interrupt: bool
    text: str


@dataclass(frozen=True)
class NeedsAttention:
    detail: str


def nudge(
    session: Session, now: datetime, config: RuntimeConfig, quiet: bool
) -> Reminder | NeedsAttention | None:
    """The reminder due now, if any; `quiet`: the screen has not changed for the idle threshold."""
    since = silent_since(session)
    if session.state not in _SUPERVISED or since is None or _cycle_running(session, now, config):
        return None
    silent = (now - since).total_seconds()
    gap = _reminder_gap(config)
    waited = session.last_nudge_at is None or (now - session.last_nudge_at).total_seconds() >= gap
    if silent < config.soft_remind + session.nudges * gap or not waited:
        return None
    if session.nudges >= config.max_nudges:
        return NeedsAttention(
            f"no progress for {format_duration(silent)} and {session.nudges} reminders went unanswered"
        )
    interrupt = silent >= config.hard_remind
    if not interrupt and not quiet:
        return None  # a soft reminder waits for the worker's next idle moment
    number = session.nudges + 1
    return Reminder(number, interrupt, reminder_text(number, config.max_nudges, silent, interrupt))


def _reminder_gap(config: RuntimeConfig) -> float:
    return max(config.hard_remind - config.soft_remind, 1.0)


def unresponsive_after(config: RuntimeConfig) -> float:
    """Seconds without progress after which a worker's `max_nudges` reminders went unanswered: it needs
    attention, and its agent counts as unresponsive."""
    return config.soft_remind + config.max_nudges * _reminder_gap(config)


def _spoken(seconds: float) -> str:
    return format_duration(seconds, "m").removesuffix("00m")  # 14m, 1h, 1h30m


def unresponsive_rule(config: RuntimeConfig) -> str:
    """The one statement of that rule for an orchestrator's texts (the MCP server's tool descriptions)."""
    after = f"{_spoken(unresponsive_after(config))} without progress"
    unanswered = f"{config.max_nudges} reminders unanswered"
    if config.unresponsive_pause <= 0:
        return f"after {after} ({unanswered}) a worker needs attention (state needs_attention)"
    pause = _spoken(config.unresponsive_pause)
    return (
        f"after {after} ({unanswered}) teleclaude marks the worker's agent unavailable for {pause} itself "
        "(reason unresponsive; the worker ends rate_limited)"
    )


def digest_rule(config: RuntimeConfig) -> str:
    """How often an orchestrator hears of a working worker, as its texts say it."""
    quiet = _spoken(config.digest_period_quiet)
    return f"every {_spoken(config.digest_period)} ({quiet} once it shows no progress)"


def _cycle_running(session: Session, now: datetime, config: RuntimeConfig) -> bool:
    """A post-report cycle is checking the worker (one that outlived its own limits does not count)."""
    return session.cycle_started_at is not None and not cycle_expired(session, now, config)


def cycle_expired(session: Session, now: datetime, config: RuntimeConfig) -> bool:
    """A post-report cycle ran past its wait_cmd and quiet-pane limits: its process died."""
    if session.cycle_started_at is None:
        return False
    return (now - session.cycle_started_at).total_seconds() >= config.wait_timeout + config.spin_max + 60


def reminder_text(number: int, of: int, silent: float, interrupt: bool) -> str:
    """One short line, whatever the slug: its echo must fit one screen row, or the wrapped rest would
    look like the worker's output."""
    advice = "Background long commands, report" if interrupt else "Report"
    return (
        f"{MARK} reminder {number}/{of}: no progress for {format_duration(silent)}. "
        f"{advice} with teleclaude__report_status, then finish your step and commit."
    )


def reminded(session: Session, now: datetime, reminder: Reminder) -> tuple[Session, tuple[Event, ...]]:
    kind = "hard (interrupting)" if reminder.interrupt else "soft"
    detail = f"{kind} reminder {reminder.number}: {reminder.text}"
    stalled, events = transition(session, Change.REMINDED, now, detail)
    return replace(stalled, nudges=session.nudges + 1, last_nudge_at=now), events


# --- digests -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Digest:
    session_id: str
    state: SessionState
    running_for: float  # seconds since the session started
    status: str
    status_age: float | None  # seconds since the last report_status; None: it never reported
    nudges: int
    last_lines: tuple[str, ...]
    no_progress: bool  # no report_status since the last digest (since the dispatch, for the first)
    tools: tuple[
        str, ...
    ] = ()  # its latest tool uses, `Read: src/x.py (1m ago)` (planner/core/tool_lines.py)
    status_unchanged: bool = False  # no report_status since the last digest (seed 003 §C)
    hard_reminded: float | None = None  # seconds since the interrupting reminder went out; None: none yet

    def text(self) -> str:
        head = (
            f"running {format_duration(self.running_for)}, state {self.state.value}, "
            f"status {self._status()}, {self.nudges} reminder(s) sent"
            + (NO_PROGRESS if self.no_progress else "")
        )
        tools = ["  recent tools:", *(f"    {line}" for line in self.tools)] if self.tools else []
        return "\n".join([head, *tools, *(f"  | {line}" for line in self.last_lines)])

    def _status(self) -> str:
        if self.status_age is None:
            return "never"
        said = self.status if len(self.status) <= STATUS_SHOWN else self.status[: STATUS_SHOWN - 1] + "…"
        return f'"{said}" ({format_duration(self.status_age)} ago)'

    def wake(self, worker: str, final: str = "") -> str:
        """The digest as one line for the parent's pane (seed 003 §C): who, how long, its status and its
        age, NO PROGRESS DETECTED with how long ago the hard reminder went out, and its recent tools; a
        `final` one says how the worker's turn ended instead. Escaped: a terminal obeys none of it."""
        parts = [f"{MARK} worker {self.session_id} ({worker})"]
        if final:
            parts.append(f"{final} after {format_duration(self.running_for)}")
        else:
            alarm = " - NO PROGRESS DETECTED" if self.no_progress else ""
            parts[0] += alarm
            parts.append(f"running {format_duration(self.running_for)}, state {self.state.value}")
        status = f"status {self._status()}" + (
            ", unchanged since the last digest" if self.status_unchanged else ""
        )
        parts.append(status)
        if self.no_progress and not final:
            hard = (
                f"hard reminder sent {format_duration(self.hard_reminded)} ago"
                if self.hard_reminded is not None
                else f"{self.nudges} reminder(s) sent"
            )
            parts.append(
                f"no status update for {format_duration(self.status_age)}, {hard}"
                if self.status_age is not None
                else f"no status update yet, {hard}"
            )
        if self.tools:
            parts.append("recent: " + "; ".join(self.tools))
        next_step = (
            "ask teleclaude__next_work what comes next" if final else "nothing to do unless it is stuck"
        )
        parts.append(next_step)
        return printable(" | ".join(parts))


def digest_due(session: Session, now: datetime, config: RuntimeConfig) -> bool:
    """Every digest_period; every digest_period_quiet once a digest found the worker without progress
    (seed 003 §B: the first comes after digest_period, the escalation is decided at a digest)."""
    since = session.last_digest_at or session.delivered_at
    if session.state not in _DIGESTED or since is None:
        return False
    age = (now - since).total_seconds()
    return age >= (config.digest_period_quiet if session.digest_escalated else config.digest_period)


def digest(
    session: Session,
    now: datetime,
    screen: list[str],
    config: RuntimeConfig,
    lines: int = 5,
    tools: tuple[str, ...] = (),
) -> tuple[Session, Digest]:
    # seed 003 §B: no progress is no report_status since the last digest (since the dispatch, for the first)
    before = session.last_digest_at
    since = before or session.delivered_at or session.created_at
    no_progress = session.status_at is None or session.status_at <= since
    report = Digest(
        session.id,
        session.state,
        (now - session.created_at).total_seconds(),
        session.status_text,
        (now - session.status_at).total_seconds() if session.status_at else None,
        session.nudges,
        tuple(row.rstrip() for row in screen if row.strip())[-lines:],
        no_progress,
        tools,
        status_unchanged=before is not None and no_progress,
        hard_reminded=_hard_reminded(session, now),
    )
    escalated = session.digest_escalated or no_progress  # one-way: a worker that went silent stays watched
    return replace(session, last_digest_at=now, digest_escalated=escalated), report


def _hard_reminded(session: Session, now: datetime) -> float | None:
    """Seconds since the last interrupting reminder: from the second reminder on each one interrupts (the
    reminders come every `hard_remind - soft_remind` after `soft_remind`)."""
    if session.nudges < 2 or session.last_nudge_at is None:
        return None
    return (now - session.last_nudge_at).total_seconds()


# --- the parent's wake-ups ---------------------------------------------------------------------------------

# how a worker's turn ended, as its parent's final digest says it
_ENDED = {
    SessionState.TURN_ENDED: "turn ended",
    SessionState.RATE_LIMITED: "rate-limited",
    SessionState.DONE: "done",
    SessionState.ERRORED: "errored",
}


def final_due(session: Session) -> bool:
    """The worker's turn ended (its Stop hook, an exit, a limit, an error) and its parent has not been told:
    a final digest. A session ended or killed by end_session (cancelled) is not told about."""
    return bool(session.parent) and not session.parent_told and session.state in _ENDED


def final_digest(session: Session, now: datetime, config: RuntimeConfig, tools: tuple[str, ...]) -> str:
    """The parent's last digest of a turn: how it ended (with the error that ended it) and the digest."""
    _, report = digest(session, now, [], config, tools=tools)
    ended = _ENDED[session.state]
    if session.last_error and session.state is not SessionState.TURN_ENDED:
        ended += ": " + session.last_error.splitlines()[0][:160]
    return report.wake(worker_name(session), ended)


def worker_name(session: Session) -> str:
    return f"{session.agent} /{bare_command(session.command)} {session.args}".strip()


# --- the post-report cycle ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    reason: str


@dataclass(frozen=True)
class Directive:
    text: str
    failed_wait: bool = False  # the worker is sent back because its wait_cmd failed


@dataclass(frozen=True)
class WaitOutcome:
    """How a post-report cycle's wait_cmd ended."""

    command: str  # its program, e.g. "pytest"
    code: int | None  # None: it could not run, or was stopped after wait_timeout
    tail: tuple[str, ...] = ()  # its last non-blank lines of output
    why: str = ""  # for a None code: what happened instead

    @property
    def failed(self) -> bool:
        return self.code != 0

    def ended(self) -> str:
        return f"{self.command} " + (f"exited {self.code}" if self.code is not None else self.why)

    def summary(self) -> str:
        return self.ended() + (f": {self.tail[-1][:200]}" if self.tail else "")


def assess(
    command: str,
    slug: str,
    decision: Decision,
    open_tasks: int = 0,
    commits_ahead: int = 0,
    wait: WaitOutcome | None = None,
    sent_back: int = 0,
    max_sent_back: int = 3,
) -> Finished | Directive:
    """Is the worker's step done, by the files? If not, the one thing to tell it. A failed `wait` sends the
    worker back to fix what it reports (seed 000: "continue when tests fail"), `max_sent_back` times in a row
    at most; after that the files alone decide."""
    step = step_of(command)
    action = decision.action
    asked = action.step if isinstance(action, Dispatch | RunYourself) else None
    if asked is Step.COMMIT and getattr(action, "slug", slug) == slug:
        return Directive(f"{MARK} Commit your changes: the files you changed are not committed yet.")
    if step in _CHANGING_CODE and wait is not None and wait.failed and sent_back < max_sent_back:
        return Directive(_wait_failed(wait), failed_wait=True)
    if step is None or asked is not step or getattr(action, "slug", slug) != slug:
        summary = "another step" if asked is None else f"/{asked.command}"
        return Finished(f"/{command} {slug} is done by the files; the planner moves on to {summary}")
    return Directive(_unfinished(step, slug, open_tasks, commits_ahead))


# the steps whose worker changes the code its check tests (a reviewer's failing check is a finding)
_CHANGING_CODE = (Step.BUGS, Step.BUILD, Step.FIX, Step.FIX_MERGE)


def _wait_failed(wait: WaitOutcome) -> str:
    """One line to type: what failed and its last lines, escaped (a terminal obeys none of it)."""
    lines = " | ".join(line.strip()[:160] for line in wait.tail[-3:])
    said = f"; its last lines: {lines}" if lines else ""
    return printable(
        f"{MARK} Your check failed: {wait.ended()}{said}. Fix what it reports, commit, "
        "then report again with the same wait_cmd."
    )


def _unfinished(step: Step, slug: str, open_tasks: int, commits_ahead: int) -> str:
    plan = layout.item_file(slug, layout.PLAN)
    if step is Step.BUILD and commits_ahead and open_tasks:
        return f"{MARK} Tick the tasks you finished in {plan} ({open_tasks} still open), then commit."
    texts = {
        Step.BUILD: f"The build is not finished: {open_tasks} task(s) in Groups 1-4 of {plan} are open. "
        "Do them, tick each one and commit.",
        Step.REVIEW: f"The review is not finished: write todos/{slug}/review-findings.md with a ticked "
        "verdict and commit it.",
        Step.FIX: f"The fixes are not finished: address the findings in todos/{slug}/review-findings.md, "
        "then follow next-fix-review to the end and commit.",
        Step.FIX_MERGE: f"The merge is not finished: merge main into {slug} in trees/{slug}, resolve every "
        "conflict keeping both sides' intent, and commit the merge.",
        Step.FINALIZE: f"The finalize is not finished: merge {slug} into main, archive it and mark it [x] "
        "in todos/roadmap.md, then commit.",
    }
    return f"{MARK} " + texts.get(
        step, f"/{step.command} {slug} is not finished by the files: finish it and commit."
    )


def bare_command(command: str) -> str:
    """next-build for both next-build and prompts:next-build (an old name, in sessions stored before)."""
    return command.removeprefix("prompts:")


def step_of(command: str) -> Step | None:
    name = bare_command(command)
    return next((step for step in Step if step.command == name), None)
