"""What the workers used, read from the session store and summed per session, item, run and day; and the
`[budget]` check `teleclaude run` makes before each step (the rules are core/spend.py's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, time
from pathlib import Path
from typing import TYPE_CHECKING

from teleclaude.adapters.records import read_use
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.agents.tokens import Tokens
from teleclaude.config.notify import Notice
from teleclaude.config.spend import Budget, SpendConfig
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.sessions import Session
from teleclaude.runtime.core.spend import (
    Level,
    Reading,
    Scope,
    Total,
    Verdict,
    decide,
    latest,
    raised,
    since,
    total,
    turns,
)

if TYPE_CHECKING:
    from teleclaude.runtime.api import Runtime
    from teleclaude.runtime.context import Context

log = logging.getLogger(__name__)


def read_again(context: Context, session: Session) -> bool:
    """Its CLI's record of the session read once more, after its stop hook read it: a CLI can write a turn's
    last answer to its transcript after its Stop hook has read it, so the turn's reading is made right when
    the record says more now (`SessionStore.amend_spend`; the readers count each message once, so a reading
    read again never counts one twice). For a local worker whose driver reads a record it knows the path
    of. True when the reading changed. Never raises."""
    profile = context.config.profiles.get(session.agent)
    if profile is None or not session.transcript or context.config.elsewhere(session.computer):
        return False
    try:
        tokens = read_use(profile.tokens, session.transcript, session.conversation)
        return tokens is not None and context.store.amend_spend(session.id, context.clock(), tokens)
    except Exception as error:  # bookkeeping never stops a worker
        log.info(
            "session %s: could not read what it used again: %s: %s", session.id, type(error).__name__, error
        )
        return False


def readings(store: SessionStore, ids: Iterable[str]) -> list[Reading]:
    return [Reading(*row) for row in store.spend_readings(ids)]


def used(store: SessionStore, sessions: Iterable[Session]) -> dict[str, Tokens]:
    """Session id -> what it used so far (sessions with no reading are left out: unknown)."""
    return latest(readings(store, [s.id for s in sessions]))


def worked(sessions: Iterable[Session]) -> list[Session]:
    """The sessions that were given a step: a worker started ahead and ended unneeded (or still at its
    prompt) used nothing of one, and is no unknown in a sum."""
    return [s for s in sessions if s.delivered_at is not None]


def summed(store: SessionStore, sessions: Iterable[Session], config: SpendConfig) -> Total:
    sessions = worked(sessions)
    return total(used(store, sessions), {s.id: s.agent for s in sessions}, config)


def per_session(store: SessionStore, sessions: Iterable[Session], config: SpendConfig) -> dict[str, Total]:
    """Session id -> what it used, priced (unknown when no reading was kept: a remote worker, a CLI that
    lacks a record)."""
    sessions = worked(sessions)
    found = used(store, sessions)
    return {s.id: Total().plus(found.get(s.id), s.agent, config) for s in sessions}


def day_start(now: datetime) -> datetime:
    """The start of `now`'s UTC day: a day's budget counts from there."""
    return datetime.combine(now.date(), time(0), tzinfo=now.tzinfo)


def day_total(store: SessionStore, now: datetime, config: SpendConfig) -> Total:
    """What every session of this user's used today (UTC), across runs and projects."""
    start = day_start(now)
    found = since((Reading(*row) for row in store.spend_readings(since=start)), start)
    agents = {s.id: s.agent for s in store.sessions(found)}
    return total(found, agents, config)


def today_by_agent(store: SessionStore, now: datetime, config: SpendConfig) -> dict[str, Total]:
    """Agent -> what its sessions used today (UTC), across runs and projects, the most expensive first."""
    start = day_start(now)
    found = since((Reading(*row) for row in store.spend_readings(since=start)), start)
    by_agent: dict[str, Total] = {}
    for session in store.sessions(found):
        by_agent[session.agent] = by_agent.get(session.agent, Total()).plus(
            found[session.id], session.agent, config
        )
    return dict(sorted(by_agent.items(), key=lambda pair: (-pair[1].usd, -pair[1].tokens, pair[0])))


def summary(store: SessionStore, project: str, now: datetime, config: SpendConfig) -> dict[str, object]:
    """What `status` and `agents` add: today's use (per agent), the project's latest run's, and the budget."""
    today = day_total(store, now, config)
    run = store.latest_run(project)
    latest = summed(store, store.sessions_of_run(run.id), config) if run else None
    verdict = decide(config.budget, Total(), latest or Total(), today)
    return {
        "today": today,
        "agents": today_by_agent(store, now, config),
        "run": (run.id, latest) if run and latest else None,
        "budget": verdict if verdict.level is not Level.OK else None,
    }


def summary_lines(found: dict[str, object]) -> list[str]:
    today, agents, run, verdict = found["today"], found["agents"], found["run"], found["budget"]
    assert isinstance(today, Total) and isinstance(agents, dict)
    if not today.sessions and run is None:
        return []  # nothing was ever spent here: nothing to say
    lines = [f"spend today (UTC): {today.text()}"]
    if agents:
        lines.append("  " + "; ".join(f"{agent} {total.text()}" for agent, total in agents.items()))
    if isinstance(run, tuple):
        lines.append(f"latest run {run[0]}: {run[1].text()}")
    if isinstance(verdict, Verdict):
        lines.append(f"budget: {verdict.level.value}: {verdict.text()}")
    return lines


def summary_json(found: dict[str, object]) -> dict[str, object]:
    today, agents, run, verdict = found["today"], found["agents"], found["run"], found["budget"]
    assert isinstance(today, Total) and isinstance(agents, dict)
    return {
        "today": today.as_json(),
        "agents": {agent: total.as_json() for agent, total in agents.items()},
        "latest_run": {"id": run[0], **run[1].as_json()} if isinstance(run, tuple) else None,
        "budget": {
            "level": verdict.level.value,
            "key": verdict.key,
            "spent": verdict.spent,
            "limit": verdict.limit,
        }
        if isinstance(verdict, Verdict)
        else None,
    }


def project_summary(cwd: str) -> dict[str, object]:
    """`summary` of the project at `cwd`, with its [prices] and [budget]."""
    from datetime import UTC

    from teleclaude.adapters import git as gitx
    from teleclaude.adapters.settings import load_config

    root = Path(gitx.find_repo(cwd).root).resolve()
    return summary(SessionStore(), str(root), datetime.now(UTC), load_config(root).spend)


def of_item(sessions: Iterable[Session], project: str, slug: str) -> list[Session]:
    return [s for s in sessions if s.slug == slug and Path(s.project) == Path(project)]


def turn_rows(store: SessionStore, session: Session) -> list[Reading]:
    """What each turn of `session` used (the differences between its readings)."""
    return turns(readings(store, [session.id]))


def verdict_for(
    store: SessionStore,
    budget: Budget,
    config: SpendConfig,
    project: str,
    slug: str,
    run_id: str,
    now: datetime,
) -> Verdict:
    """The budget verdict for a step of `slug` in run `run_id` now (core/spend.py `decide`)."""
    everyone = store.sessions()
    item = summed(store, of_item(everyone, project, slug), config)
    run = summed(store, [s for s in everyone if run_id and s.run_id == run_id], config)
    day = day_total(store, now, config) if budget.day_tokens or budget.day_usd else Total()
    return decide(budget, item, run, day)


def out_of_budget(runtime: Runtime, config: SpendConfig, session: Session) -> bool:
    """A worker past its item's, the run's or the day's budget finishes its turn and is given no other
    (a red gate does not send it back): the next step is then held back (`held_back`). Never raises."""
    budget = runtime.context.budget or config.budget
    if not budget.any:
        return False
    try:
        verdict = verdict_for(
            runtime.store,
            budget,
            config,
            session.project,
            session.slug,
            runtime.context.run_id,
            runtime.clock(),
        )
    except Exception as error:  # bookkeeping never stops a run
        log.warning("budget: could not read what was spent: %s: %s", type(error).__name__, error)
        return False
    return verdict.level is Level.OVER


@dataclass
class BudgetWatch:
    """`teleclaude run`'s budget check before each step; it warns once per limit past 80 %."""

    warned: set[str] = field(default_factory=set)  # the limits warned of (an item's, per item)
    warning: str = ""  # the last warning, for the run's status line

    def check(
        self,
        store: SessionStore,
        budget: Budget,
        config: SpendConfig,
        action: Dispatch,
        run_id: str,
        now: datetime,
        show: Callable[[str], None],
        notify: Callable[[Notice], None],
    ) -> Verdict | None:
        """The verdict that holds `action` back (OVER), else None. A finalize (a merge) is never held back:
        it delivers what was paid for, and a run never stops in the middle of one."""
        if not budget.any:
            return None
        verdict = verdict_for(store, budget, config, action.project, action.slug, run_id, now)
        limit = verdict.key + (f" {action.slug}" if verdict.scope is Scope.ITEM else "")
        if verdict.level is Level.WARN and limit not in self.warned:
            self.warned.add(limit)
            what = _what(verdict, action.slug)
            self.warning = what
            log.warning("budget: %s", what)
            show(f"    budget: 80 % reached: {what}")
            notify(notices.budget_warning(what, action.project, verdict.key))
        if verdict.level is not Level.OVER or action.step is Step.FINALIZE:
            return None
        return verdict


def _what(verdict: Verdict, slug: str) -> str:
    text = verdict.text()
    return f"{slug or 'the bug list'}: {text}" if verdict.scope is Scope.ITEM else f"this {text}"


def over_text(verdict: Verdict, slug: str, rerun: str) -> tuple[str, str]:
    """The stop's lines and its next step: what was spent, and the command that raises the limit."""
    raise_it = f"{rerun} --budget {raised(verdict)}"
    what = f"BUDGET: {_what(verdict, slug)}\nraise it in [budget] of teleclaude.toml, or once: {raise_it}"
    return what, raise_it


def held_back(
    watch: BudgetWatch,
    runtime: Runtime,
    config: SpendConfig,
    action: Dispatch,
    rerun: str,
    show: Callable[[str], None],
    notify: Callable[[Notice], None],
) -> tuple[bool, str, str] | None:
    """`teleclaude run`, before it starts `action`'s worker: None when the budget lets it, else (whether
    the whole run stops, not only the item; the stop's text; its next step). Never raises: a store that
    cannot be read holds nothing back."""
    budget = runtime.context.budget or config.budget
    try:
        verdict = watch.check(
            runtime.store, budget, config, action, runtime.context.run_id, runtime.clock(), show, notify
        )
    except Exception as error:  # bookkeeping never stops a run
        log.warning("budget: could not read what was spent: %s: %s", type(error).__name__, error)
        return None
    if verdict is None:
        return None
    what, after = over_text(verdict, action.slug, rerun)
    return verdict.scope is not Scope.ITEM, what, after
