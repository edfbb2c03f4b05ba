"""The notices of the worker runtime (`[notify]`, config/notify.py): what happened, and the one command that
goes on. Pure: each is built from values the run or the supervisor has at hand; what a worker wrote is made
printable (no terminal controls) and cut short. Which are sent, and how often, is `NotifyConfig` and `Quiet`.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Sequence
from datetime import datetime

from teleclaude.config.notify import Notice, NotifyEvent
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration, format_utc
from teleclaude.runtime.core.sessions import Event, EventKind, Session
from teleclaude.runtime.core.supervision import NO_PROGRESS

LINE = 300  # characters of one line of a notice (a reason, a digest)


def run_ended(
    report: str, steps: int, delivered: Sequence[str], elapsed: float, root: str, outcome: str
) -> Notice:
    """`teleclaude run` stopped: its report's first line (the reason), what it did, and its `next:` line."""
    lines = report.splitlines()
    head = lines[:2] if re.fullmatch(r"(ERROR: [A-Z_]+|SELF:)", lines[0] if lines else "") else lines[:1]
    reason = _line(" ".join(head) or outcome)  # `ERROR: CODE` and `SELF:` say why on the line after
    after = next((line[len("next: ") :] for line in lines if line.startswith("next: ")), "")
    did = f"{steps} session{'s' if steps != 1 else ''} in {format_duration(elapsed)}"
    if delivered:
        items = f"{len(delivered)} item{'s' if len(delivered) != 1 else ''}"
        did += f", delivered {items}: {', '.join(delivered)}"
    body = [reason, did, *([f"next: {_line(after)}"] if after else [])]
    return Notice(NotifyEvent.RUN_ENDED, root, f"teleclaude run {outcome} ({_name(root)})", "\n".join(body))


def agents_out(step: str, agent: str, until: datetime, root: str) -> Notice:
    body = (
        f"every agent for {_line(step)} is out; the first back is {agent}, at {format_utc(until)}.\n"
        f"The run waits and goes on by itself then. To go on sooner: teleclaude agents available {agent} "
        f"--cwd {root}"
    )
    return Notice(NotifyEvent.AGENTS_OUT, f"{root}:out", f"teleclaude: every agent out ({_name(root)})", body)


def agents_back(step: str, agent: str, root: str) -> Notice:
    body = f"{agent} is back: work resumes with {_line(step)}. Nothing to do."
    return Notice(NotifyEvent.AGENTS_OUT, f"{root}:back", f"teleclaude: work resumes ({_name(root)})", body)


def parked(slug: str, headline: str, root: str, after: str) -> Notice:
    """An item that cannot go on (the others may): why, and the command that goes on once it is seen to."""
    body = f"{_line(headline)}\nnext: {_line(after)}"
    return Notice(NotifyEvent.PARKED, f"{root}:{slug}", f"teleclaude: {slug or 'the bug list'} parked", body)


def budget_warning(what: str, root: str, key: str) -> Notice:
    """An item, the run or the day passed 80 % of its `[budget]` (runtime/core/spend.py): at 100 % no other
    step is started for it."""
    body = f"{_line(what)}\nAt 100 % no further step is started for it; nothing to do yet."
    return Notice(NotifyEvent.BUDGET, f"{root}:{key}", f"teleclaude: 80 % of a budget ({_name(root)})", body)


# a finalize refused for what no worker fixes by itself (a merge conflict gets its fixer from next_work)
FINALIZE_STOPS = ("FINALIZE_REFUSED", "LOCK_TIMEOUT")


def finalize_refused(slug: str, code: str, message: str, root: str) -> Notice | None:
    """`teleclaude finalize SLUG` refused (a dirty main checkout, say): the item is stuck until a human
    looks; None for a refusal the roadmap's own steps deal with."""
    if code not in FINALIZE_STOPS:
        return None
    first = message.splitlines()[0] if message else code
    after = f"cd {root} && teleclaude finalize {slug}"
    body = f"finalize {slug} refused: ERROR: {code}: {_line(first)}\nnext: {after}"
    return Notice(NotifyEvent.PARKED, f"{root}:{slug}", f"teleclaude: {slug} not finalized", body)


def unresponsive(session_id: str, step: str, agent: str, detail: str, root: str) -> Notice:
    body = (
        f"{agent} did not answer {_line(step)} (session {session_id}): {_line(detail)}\n"
        f"Its step goes to the next agent. Look: teleclaude sessions output {session_id} --cwd {root}"
    )
    return Notice(NotifyEvent.UNRESPONSIVE, agent, f"teleclaude: {agent} unresponsive", body)


def no_progress(session_id: str, step: str, agent: str, digest: str, root: str) -> Notice:
    body = (
        f"{_line(step)} ({agent}, session {session_id}) shows no progress: {_line(digest)}\n"
        f"Look: teleclaude sessions output {session_id} --cwd {root}"
    )
    return Notice(NotifyEvent.NO_PROGRESS, session_id, f"teleclaude: no progress on {_line(step, 80)}", body)


def digest(session_id: str, step: str, text: str) -> Notice:
    """A parent digest, mirrored (`[notify] digests = true`), shortened."""
    return Notice(None, session_id, f"teleclaude: {_line(step, 80)}", _line(text))


def trial(root: str) -> Notice:
    body = f"A test message from `teleclaude notify --test` in {root}: this service is set up."
    return Notice(None, "test", "teleclaude: test", body)


def _name(root: str) -> str:
    return _line(os.path.basename(root.rstrip("/")) or root, 60)


def _line(text: str, length: int = LINE) -> str:
    one = " ".join(printable(text).split())
    return one if len(one) <= length else one[: length - 1] + "…"


def of_event(event: Event, session: Session, root: str, in_run: bool) -> Notice | None:
    """The notice one event of a worker calls for, if any: its agent marked unresponsive (or, with
    `unresponsive_pause = 0`, the worker left for a human: `in_run`, the run's own report says that), or a
    digest that found no progress (the escalation)."""
    step = f"{session.command} {session.slug}".strip()
    first = event.detail.splitlines()[0] if event.detail else ""
    match event.kind:
        case EventKind.RATE_LIMITED if first.startswith("unresponsive until"):
            return unresponsive(session.id, step, session.agent, first, root)
        case EventKind.NEEDS_ATTENTION if not in_run:
            return unresponsive(session.id, step, session.agent, first or session.last_error, root)
        case EventKind.DIGEST if first.endswith(NO_PROGRESS):
            return no_progress(session.id, step, session.agent, first, root)
    return None
