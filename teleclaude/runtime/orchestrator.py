"""`teleclaude run`: the orchestrator loop, unattended. Ask `next_work`, start the worker it names, wait for
the worker's events, end its session, ask again, until the roadmap is done or a human is needed.

The files decide every step; this loop only keeps the project's worker count at `--parallel` (default one)
and reacts to events (`react`, one table). It keeps no state of its own between runs: a restarted run
adopts the live sessions of the project from the runtime's database before it asks the planner anything,
so a killed run that is started again neither loses a worker nor starts a second one for the same step.

Its rooms: the rules are pure (runtime/core/loop.py, stops.py, ahead.py); serial.py carries them out for
one item after another, parallel.py for lanes side by side (`--parallel`), run_report.py shows the run and
writes its report. This module starts and records the run, and names their public values for its callers.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from teleclaude.adapters import sandbox
from teleclaude.adapters.sessions_db import RunRow
from teleclaude.config.notify import Notice
from teleclaude.errors import Error
from teleclaude.planner import mainref
from teleclaude.planner.core.render import to_text
from teleclaude.runtime.api import Runtime, guarded
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.ahead import (
    USUAL_NEXT,
    Successor,
    likely_next,
    successor_now,
    usual_next,
)
from teleclaude.runtime.core.loop import (
    LIMIT_MARGIN,
    READY_AGAIN,
    UNATTENDED,
    WAIT_ATTEMPTS,
    Handled,
    Reaction,
    Retries,
    first_back,
    implied_event,
    react,
)
from teleclaude.runtime.core.stops import (
    INTERRUPTED,
    REPEAT_LIMIT,
    Outcome,
    RunSettings,
    Stop,
    advice,
    attention_text,
    failed_twice_text,
    headline,
    parked_stop,
    repeated_text,
    resume_command,
)
from teleclaude.runtime.parallel import Lanes
from teleclaude.runtime.run_report import (
    Countdown,
    Progress,
    RunReport,
    RunState,
    StatusLine,
    archives,
    cut,
    report,
    where,
)
from teleclaude.runtime.serial import Serial

# named here for the front ends and the tests that import them from the run
__all__ = [
    "LIMIT_MARGIN",
    "READY_AGAIN",
    "REPEAT_LIMIT",
    "TICK",
    "UNATTENDED",
    "USUAL_NEXT",
    "WAIT_ATTEMPTS",
    "Countdown",
    "Handled",
    "Outcome",
    "Progress",
    "Reaction",
    "Retries",
    "RunReport",
    "RunSettings",
    "StatusLine",
    "Stop",
    "Successor",
    "advice",
    "attention_text",
    "cut",
    "failed_twice_text",
    "first_back",
    "headline",
    "implied_event",
    "likely_next",
    "parked_stop",
    "react",
    "repeated_text",
    "report",
    "resume_command",
    "run",
    "successor_now",
    "usual_next",
    "where",
]

TICK = 1.0  # seconds per wait: how often the status line is redrawn


# --- the loop ----------------------------------------------------------------------------------------------


def run(
    project: Path,
    slug: str | None,
    prepare: bool,
    max_steps: int,
    runtime: Runtime,
    show: Callable[[str], None],
    status: Callable[[StatusLine], None],
    tick: float = TICK,
    verbose: bool = False,
    parallel: int = 1,
    wait_for_limits: bool = True,
    rehearsal_of: Path | None = None,
    notify: Callable[[Notice], None] | None = None,
) -> RunReport:
    """Drive `slug` (or the whole roadmap) until COMPLETE, SELF, ERROR, a stuck worker or `max_steps`.

    `show` gets the log lines (each answer, start and event), `status` the live state of the worker being
    waited for, every `tick` seconds; `verbose` also shows the planner's full answers. Ctrl-C returns an
    INTERRUPTED report and leaves every worker running. `parallel` > 1 (without a slug) keeps up to that
    many roadmap items in flight at once (`Lanes`). When every agent that may take a step is out, the run
    waits for the first to come back (at most `[runtime] limit_wait`), unless `wait_for_limits` is False.
    `rehearsal_of` is the user's checkout when `project` is its clone (`run --stand-ins`): the report's next
    commands are for that checkout. `notify` gets the notices (`[notify]`): it must not block
    (adapters/notify.py `Notifier.post`).
    """
    began = time.monotonic()
    notify = notify or _silent
    root = _checkout_root(Path(project))
    limit_wait = runtime.config.limit_wait if wait_for_limits else 0.0
    settings = RunSettings(root, slug, prepare, max_steps, tick, verbose, parallel, limit_wait, rehearsal_of)
    state = RunState(archived_before=tuple(archives(root)))
    untrusted = guarded(runtime.config.check_trusted)
    if isinstance(untrusted, Error):  # before the planner claims an item no worker can be started for
        return report(Stop(Outcome.ERROR, to_text(untrusted)), settings, state, runtime)
    guarded(mainref.accept, root)  # main as it is now is what the run builds on (planner/mainref.py)
    show(f"sandbox: {sandbox.status_line(runtime.config, runtime.context.env)}")
    kind = Lanes if slug is None else Serial  # a whole roadmap: items go on while one is parked
    loop = kind(settings, state, runtime, show, status, notify=notify)
    run_id = _record_start(runtime, root, slug)
    try:
        with runtime.store.kept_open():
            stop = loop.go()
    except KeyboardInterrupt:
        stop = INTERRUPTED
    finally:
        runtime.context.run_id = ""
    finished = report(stop, settings, state, runtime)
    if stop.outcome is not Outcome.INTERRUPTED:  # Ctrl-C: the user is at the terminal
        elapsed = time.monotonic() - began
        notify(
            notices.run_ended(
                finished.text, state.steps, finished.delivered, elapsed, str(root), stop.outcome.value
            )
        )
    if run_id and not isinstance(
        guarded(runtime.store.end_run, run_id, runtime.clock(), stop.outcome.value), Error
    ):
        finished = replace(finished, run_id=run_id)
    return finished


def _record_start(runtime: Runtime, root: Path, slug: str | None) -> str:
    """A new run in the session store, and its id on every session it starts; "" when the store cannot
    be written (the run goes on without its timeline)."""
    now = runtime.clock()
    run_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    recorded = guarded(runtime.store.add_run, RunRow(run_id, str(root), slug or "", now))
    if isinstance(recorded, Error):
        return ""
    runtime.context.run_id = run_id
    return run_id


# --- helpers -----------------------------------------------------------------------------------------------


def _silent(notice: Notice) -> None:
    """No `[notify]` URLs: nothing is sent."""


def _checkout_root(project: Path) -> Path:
    from teleclaude.adapters.git import NotAGitRepo, find_repo

    try:
        return Path(find_repo(project).root).resolve()
    except (NotAGitRepo, OSError):
        return project.resolve()
