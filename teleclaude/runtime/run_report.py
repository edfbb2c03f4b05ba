"""What a `teleclaude run` shows and returns: the live status line's values (`Progress`, `Countdown`), the
run's state so far, and its report (`report`): the outcome's first line, the steps, what was delivered,
the workers left running, the next step. Its texts are pure (runtime/core/stops.py); this room reads the
session store and done/ for the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from teleclaude.config.profiles import RuntimeConfig
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import (
    Action,
)
from teleclaude.planner.core.timeparse import format_duration, format_utc
from teleclaude.runtime.api import Runtime
from teleclaude.runtime.core.loop import (
    Handled,
    Retries,
)
from teleclaude.runtime.core.sessions import Session
from teleclaude.runtime.core.stops import (
    Outcome,
    RunSettings,
    Stop,
    advice,
)

# --- what a run returns and shows --------------------------------------------------------------------------


@dataclass(frozen=True)
class RunReport:
    outcome: Outcome
    steps: int  # sessions this run started
    action: Action | None  # the planner's last answer
    session: Session | None  # the last worker session
    text: str  # the report, first line `OUTCOME:` (or the planner's `SELF:` / `ERROR: CODE`)
    history: tuple[Handled, ...] = ()
    delivered: tuple[str, ...] = ()  # archive folders that appeared during this run, e.g. "done/001-x/"
    run_id: str = ""  # its record in the session store (`teleclaude report` draws it); "" if not recorded

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code


class StatusLine(Protocol):
    """What the live status line shows: `Progress` of a worker, or a `Countdown` to an agent's reset."""

    def line(self) -> str: ...
    def key(self) -> str: ...  # the line without the clock: a plain log prints it again when this changes


@dataclass(frozen=True)
class Progress:
    """What the live status line shows about the worker being waited for."""

    step: int
    session: Session
    elapsed: float  # seconds since the session was started
    others: tuple[Session, ...] = ()  # the other workers in flight (--parallel)
    digest: str = ""  # the first line of the last digest the runtime sent about a worker
    parked: tuple[str, ...] = ()  # --parallel: the items parked, each `SLUG (its first report line)`
    computers: tuple[str, ...] = ("local",)  # the names meaning this machine ([runtime] computers)
    usage: str = ""  # the agents in use, each with its windows: `AGENT 5h 83% ↺ 19:00 · 7d 41%`
    budget: str = ""  # the last [budget] warning (80 % of a limit), runtime/spend.py

    def line(self) -> str:
        return f"{self.key()} · {format_duration(self.elapsed)}"

    def key(self) -> str:
        """The line without the clock: a plain log prints it again only when this changes."""
        s = self.session
        agent = s.agent if s.computer in self.computers else f"{s.agent}@{s.computer}"
        text = f"[{self.step}] {s.command} {s.slug} · {agent} · {s.state.value}".replace("  ", " ")
        if s.nudges:
            text += f" · {s.nudges} nudge{'s' if s.nudges > 1 else ''}"
        if s.status_text:
            text += f" · {s.status_text.splitlines()[0][:60]}"
        if self.others:
            text += " | also " + ", ".join(f"{o.command} {o.slug} ({o.state.value})" for o in self.others)
        if self.digest:
            text += f" | digest: {cut(self.digest, 80)}"
        if self.parked:
            text += " | parked: " + ", ".join(item[:60] for item in self.parked)
        if self.budget:
            text += f" | budget: {cut(self.budget, 80)}"
        if self.usage:  # last: a narrow terminal cuts it before anything above
            text += f" | usage: {self.usage}"
        return text


@dataclass(frozen=True)
class Countdown:
    """The status line while the run waits for an agent to come back from a limit."""

    step: str  # e.g. "build greeting"
    agent: str  # the first agent of the step's row to come back
    until: datetime
    left: float  # seconds

    def line(self) -> str:
        return f"{self.key()} · {format_duration(self.left)} left"

    def key(self) -> str:
        return f"waiting for {self.agent} (out until {format_utc(self.until)}) to do {self.step}"


@dataclass
class RunState:
    """What this run has done so far."""

    archived_before: tuple[str, ...]  # the folders in done/ when the run started
    steps: int = 0
    action: Action | None = None  # the planner's last answer
    session: Session | None = None  # the last worker session
    history: list[Handled] = field(default_factory=list)
    retries: Retries = field(default_factory=Retries)
    digest: str = ""  # the first line of the last digest heard, while its worker is not through
    digest_of: str = ""  # the session that digest is about
    parked: dict[str, Stop] = field(default_factory=dict)  # --parallel: item -> why it cannot go on
    starting: int = 0  # --parallel: worker starts under way in the background (count towards --max-steps)
    given_up: list[str] = field(default_factory=list)  # workers given up on a computer away (given_up.py)


# --- the report --------------------------------------------------------------------------------------------


def report(stop: Stop, settings: RunSettings, state: RunState, runtime: Runtime) -> RunReport:
    what = stop.what
    first = what if what.startswith(("SELF:", "ERROR:")) else f"{stop.outcome.value}: {what}"
    running = live(runtime, settings.root, lambda s: True)
    delivered = tuple(
        f"done/{name}/" for name in archives(settings.root) if name not in state.archived_before
    )
    lines = [
        first,
        "",
        f"steps: {state.steps} session{'s' if state.steps != 1 else ''} started",
        f"delivered: {', '.join(delivered) or 'nothing in this run'}",
        f"running: {len(running) or 'none'}",
        *(f"  {where(s, runtime.config)}" for s in running),
        *(
            [f"given up: {len(state.given_up)}", *(f"  {line}" for line in state.given_up)]
            if state.given_up
            else []
        ),
        f"next: {stop.next or advice(stop.outcome, settings)}",
    ]
    return RunReport(
        stop.outcome,
        state.steps,
        state.action,
        state.session,
        "\n".join(lines),
        tuple(state.history),
        delivered,
    )


def cut(text: str, length: int) -> str:
    """`text` cut to `length` characters, but never its NO PROGRESS (a digest's warning, at its end)."""
    if len(text) <= length:
        return text
    flag = ", NO PROGRESS"
    if flag in text:
        return text[: length - len(flag) - 1].rstrip() + "…" + flag
    return text[: length - 1] + "…"


def where(session: Session, config: RuntimeConfig) -> str:
    local, socket = not config.elsewhere(session.computer), config.socket
    tmux_session = session.tmux_session.rpartition(":")[2]  # a remote one's carries `NAME:` in front
    return (
        f"{session.id}: {session.command} {session.slug} ({session.agent}, {session.state.value}) in "
        f"{session.subfolder or 'the main checkout'}{'' if local else ' on ' + session.computer}; watch: "
        f"{'' if local else 'there, '}tmux -L {socket} attach -t {tmux_session}"
    ).replace("  ", " ")


def archives(root: Path) -> list[str]:
    """The folders in done/, e.g. 001-my-slug."""
    try:
        return sorted(p.name for p in (root / layout.DONE).iterdir() if p.is_dir())
    except OSError:
        return []


def live(runtime: Runtime, root: Path, wanted: Callable[[Session], bool]) -> list[Session]:
    """The project's sessions that are not over yet, and `wanted`."""
    return [
        s
        for s in runtime.store.sessions()
        if not s.state.is_final and _same_path(s.project, root) and wanted(s)
    ]


def _same_path(one: str, other: Path) -> bool:
    if one == str(other):  # stored resolved, as the run's root is: no lookup on disk (asked per session)
        return True
    try:
        return Path(one).resolve() == other
    except OSError:
        return False
