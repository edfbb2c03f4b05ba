"""How `teleclaude run` ends: its outcomes, the `Stop` value the loop returns and the texts a stop carries
(its first line, the next step a report advises). Pure: runtime/core/loop.py decides, runtime/run_report.py
writes the report.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from teleclaude.errors import ErrorCode
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.core.sessions import EventKind, Session

REPEAT_LIMIT = 3  # the same step ending its turn this many times in a row without the files moving on


class Outcome(Enum):
    COMPLETE = "COMPLETE"  # the item (or, without a slug, the whole roadmap) is delivered
    SELF = "SELF"  # no agent is available for a step: a human (or an agent orchestrator) does it
    ERROR = "ERROR"  # the planner or the runtime said ERROR: a human decides
    NEEDS_ATTENTION = "NEEDS_ATTENTION"  # a worker is stuck: it is left running for a human to look at
    MAX_STEPS = "MAX_STEPS"
    PARKED = "PARKED"  # --parallel: items that could not go on were parked, and nothing else can proceed
    INTERRUPTED = "INTERRUPTED"  # Ctrl-C: the workers keep running; `teleclaude run` again resumes

    @property
    def exit_code(self) -> int:
        return {Outcome.COMPLETE: 0, Outcome.INTERRUPTED: 130}.get(self, 1)


@dataclass(frozen=True)
class RunSettings:
    """What the run was asked to do; `root` is the checkout root of the project given."""

    root: Path
    slug: str | None
    prepare: bool
    max_steps: int
    tick: float
    verbose: bool
    parallel: int = 1
    limit_wait: float = 0.0  # seconds: the longest wait for an agent's reset; 0: stop (SELF) at once
    # `run --stand-ins`: the user's checkout `root` is a clone of, where a plain `run` starts the real CLIs
    rehearsal_of: Path | None = None


@dataclass(frozen=True)
class Stop:
    """Why the loop ends, and the first line of its report (without the `OUTCOME:` prefix)."""

    outcome: Outcome
    what: str
    next: str | None = None  # the report's `next:` line, when it is not the outcome's usual advice
    whole_run: bool = False  # the run's stop, never only its item's (a run's or a day's [budget])


INTERRUPTED = Stop(Outcome.INTERRUPTED, "stopped by Ctrl-C; the workers keep running")


def ends_the_run(stop: Stop) -> bool:
    """A stop that is the whole run's even with lanes (--max-steps, Ctrl-C, a run's or a day's [budget]); any
    other parks one item."""
    return stop.outcome in (Outcome.MAX_STEPS, Outcome.INTERRUPTED) or stop.whole_run


# --- texts the loop's values carry --------------------------------------------------------------------------


def item(slug: str) -> str:
    return slug or "the bug list"


def headline(stop: Stop) -> str:
    """The first line a report of `stop` would have."""
    first = stop.what.splitlines()[0] if stop.what else ""
    return first if first.startswith(("SELF:", "ERROR:")) else f"{stop.outcome.value}: {first}"


def parked_stop(parked: Mapping[str, Stop]) -> Stop:
    """The end of a parallel run whose other items are through: each parked item, its error and next step."""
    count = f"{len(parked)} item{'s' if len(parked) != 1 else ''}"
    lines = [f"{count} could not go on: " + ", ".join(item(slug) for slug in parked)]
    for slug, stop in parked.items():
        lines.append(f"- {item(slug)}: {headline(stop)}")
        lines += [f"    {line}" for line in stop.what.splitlines()[1:]]
    return Stop(Outcome.PARKED, "\n".join(lines))


def resume_command(settings: RunSettings, real: bool = False) -> str:
    """The run again. A rehearsal's is the rehearsal again in the user's checkout (never a plain `run` in its
    clone, which would start the real CLIs), or with `real` the run for real there."""
    words = ["teleclaude", "run", *([settings.slug] if settings.slug else [])]
    words += ["--prepare"] if settings.prepare else []
    words += ["--parallel", str(settings.parallel)] if settings.parallel > 1 else []
    words += ["--stand-ins"] if settings.rehearsal_of is not None and not real else []
    return f"cd {shlex.quote(str(settings.rehearsal_of or settings.root))} && {shlex.join(words)}"


def advice(outcome: Outcome, settings: RunSettings) -> str:
    again = resume_command(settings)
    match outcome:
        case Outcome.COMPLETE if settings.rehearsal_of is not None:
            real = resume_command(settings, real=True)
            return f"the rehearsal went through; for real, with your agent CLIs: {real}"
        case Outcome.COMPLETE if settings.slug is None:
            return "add items to todos/roadmap.md (teleclaude new SLUG ...), then run it again: " + again
        case Outcome.COMPLETE:
            return f"the rest of the roadmap: cd {shlex.quote(str(settings.root))} && teleclaude run"
        case Outcome.SELF:
            return f"do that step yourself (or wait until an agent is available), then: {again}"
        case Outcome.ERROR:
            return f"do what the error says, then: {again}"
        case Outcome.NEEDS_ATTENTION:
            return f"look at the worker, then end it or send it a message, then: {again}"
        case Outcome.PARKED:
            return f"do what each parked item's lines say, then: {again}"
        case _:
            return f"resume with: {again}"


def repeated_text(action: Dispatch) -> str:
    # its workers have ended, their panes with them: point at what can still answer
    by_hand = (
        f"run `teleclaude finalize {action.slug}` to see why it refuses"
        if action.step is Step.FINALIZE
        else f"do {action.command} {action.slug} by hand"
    )
    return (
        f"{action.command} {action.slug} ended its turn {REPEAT_LIMIT} times in a row and the files "
        f"did not move on.\nIts workers have ended; {by_hand}, fix what blocks it, then run again."
    )


def failed_twice_text(session: Session, kind: EventKind, detail: str, works_elsewhere: bool = False) -> str:
    """`works_elsewhere`: the agent did other items' steps in this run, so taking it away from every item
    (marking it unavailable) is not the advice."""
    last = (
        f"{session.agent} did other items' steps in this run: read what it said (teleclaude sessions list), "
        "then do the step by hand or fix what makes it fail."
        if works_elsewhere
        else f"Or mark it unavailable (teleclaude agents unavailable {session.agent}) so the planner picks "
        "another."
    )
    return (
        f"ERROR: {ErrorCode.WORKER_FAILED.value}\n"
        f"{session.command} {session.slug} failed twice in a row "
        f"({session.agent}: {detail or session.last_error or kind.value}).\n"
        f"Run the agent by hand in {session.workdir} to see why. {last}"
    )


def attention_text(session: Session, detail: str, root: Path, socket: str) -> str:
    return (
        f"{session.command} {session.slug} ({session.agent}, session {session.id}) needs a human: "
        f"{detail or session.last_error or 'no progress'}\n"
        f"Look at it from {root}: teleclaude sessions output {session.id}"
        f"  (or: tmux -L {socket} attach -t {session.tmux_session})\n"
        f"Then answer it (teleclaude sessions send {session.id} TEXT) or end it "
        f"(teleclaude sessions end {session.id})."
    )
