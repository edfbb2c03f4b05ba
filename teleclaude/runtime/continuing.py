"""A step taken up again: the facts `core/continuation.py` decides on, and the start it decides.

`Runtime.start` (a `teleclaude run` dispatch) asks `continued` for the request to start: its conversation
resumed when the same agent takes up the step its worker left, a continuation note (core/handover.py) in its
arguments when another agent does, else the request as it came.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
from collections.abc import Sequence
from contextlib import closing
from dataclasses import replace
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.agents.profile import Resume
from teleclaude.planner.core import layout
from teleclaude.runtime.context import Context
from teleclaude.runtime.core import handover
from teleclaude.runtime.core.continuation import How, decide, left_step, resume_line, step_began, stopped
from teleclaude.runtime.core.sessions import EventKind, Session, StartRequest

log = logging.getLogger("teleclaude.runtime")

TOOLS = 3  # the previous worker's last tool uses named in a note
ARGS_LIMIT = 500  # a start's args (launcher.py): the note goes after the slug


def continued(context: Context, request: StartRequest) -> StartRequest:
    """`request` as a resume or a hand-over of the step its item's last worker left; as it came otherwise
    (one log line says why a resume was not possible)."""
    project = str(Path(request.project).resolve())
    slug = request.args.split()[0] if request.args.split() else ""
    sessions = [s for s in context.store.sessions() if s.project == project]
    previous = left_step(sessions, request.command, slug)
    if previous is None:
        return request
    profile = context.config.profiles.get(request.agent)
    resume = profile.resume if profile else None
    local = request.computer == previous.computer and request.computer not in context.config.remotes
    recorded = local and on_record(context, resume, previous)
    live = any(
        s.conversation == previous.conversation and not s.state.is_final and s.id != previous.id
        for s in sessions
        if previous.conversation
    )
    decision = decide(
        previous, request.agent, resume.id_pattern if resume else None, recorded, live, here=local
    )
    events = [event.kind for event in context.store.events([previous.id])]
    if decision.how is How.RESUME and profile is not None:
        command = profile.slash_command(request.command, request.args)
        log.info("%s %s: resuming %s's conversation", request.command, slug, previous.id)
        return replace(
            request,
            resumed_from=previous.id,
            conversation=previous.conversation,
            told=resume_line(previous, command, events),
        )
    if decision.how is How.HAND_OVER:
        began = step_began(sessions, previous)
        room = min(handover.LIMIT, ARGS_LIMIT - len(request.args) - 1)
        text = handover.note(facts(context, previous, began, slug, request.subfolder, events), room)
        log.info("%s %s: handed over from %s (%s)", request.command, slug, previous.id, previous.agent)
        return replace(request, args=f"{request.args} {text}", handed_over_from=previous.id)
    if decision.why:
        log.warning("%s %s: a fresh start: %s", request.command, slug, decision.why)
    return request


def on_record(context: Context, resume: Resume | None, previous: Session) -> bool:
    """The CLI's record of `previous`'s conversation is still there: its transcript file, or its row in the
    CLI's database (`Resume.database`, read only)."""
    if resume is None or not resume.database:
        return bool(previous.transcript) and Path(previous.transcript).is_file()
    database = Path(context.env.get("HOME", "~")).expanduser() / resume.database
    if not database.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=5)) as connection:
            found = connection.execute("SELECT 1 FROM session WHERE id = ?", (previous.conversation,))
            return found.fetchone() is not None
    except sqlite3.Error as error:  # a database of another form: nothing to resume from
        log.info("%s: its CLI's database was not read: %s", previous.id, error)
        return False


def facts(
    context: Context,
    previous: Session,
    began: Session,
    slug: str,
    subfolder: str | None,
    events: Sequence[EventKind] = (),
) -> handover.Facts:
    """What the note says: read from the item's worktree, the plan there and the session store."""
    workdir = Path(previous.project) / subfolder if subfolder else Path(previous.project)
    since = began.created_at.isoformat()
    commits = _git(["log", "--oneline", "--no-decorate", f"--since={since}", "HEAD"], workdir).splitlines()
    plan = layout.item_file(slug, layout.PLAN)
    base = _git(["rev-list", "-1", f"--before={since}", "HEAD"], workdir).strip()
    before = _git(["show", f"{base}:{plan}"], workdir) if base else ""
    try:
        now = (workdir / plan).read_text(encoding="utf-8", errors="replace")
    except OSError:
        now = ""
    uses = context.store.recent_tool_uses([previous.id], TOOLS).get(previous.id, ())
    return handover.Facts(
        previous.agent,
        previous.id,
        stopped(previous, events),
        commits=tuple(commits),
        ticked=handover.ticked_since(before, now) if now else (),
        status=previous.status_text,
        tools=tuple(f"{use.tool}: {use.target}" if use.target else use.tool for use in uses),
    )


def _git(args: list[str], cwd: Path) -> str:
    """git's answer, "" when it fails (no commit before the step, a folder gone): the note says less."""
    try:
        return gitx.run_git(args, cwd)
    except (subprocess.CalledProcessError, OSError):
        return ""
