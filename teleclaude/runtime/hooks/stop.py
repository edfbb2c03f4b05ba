"""`teleclaude hook stop`: an agent may not end its turn with uncommitted work where the planner reads.

Each CLI runs the hook when the agent is about to stop and passes JSON on stdin: `{"cwd",
"stop_hook_active", "session_id", "hook_event_name"}` and what its driver's `Hooks` say (the event's name,
the keys only it sends, a `prompt`); to refuse, it prints `{"decision": REFUSAL, "reason": …}` and exits 0.

The stop is refused when the session's folder is a `trees/{slug}` worktree with any change, or the main
checkout with uncommitted files in a todos/{slug}/ folder (an architect's requirements or plan). The roadmap
itself is left out: next_work marks items there without committing. A stop is always let through when
`stop_hook_active` is set (the agent is already continuing because of a stop hook), so it cannot loop;
anywhere else, on bad input or on any failure the hook prints nothing and exits 0: it never breaks an agent.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from teleclaude import agents
from teleclaude.adapters import git as gitx
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import WorktreeState
from teleclaude.runtime.hooks.record import (
    end_turn_plainly,
    mark_pane,
    record,
    record_spend,
    record_transcript_usage,
    warn,
)

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import TextIO

    from teleclaude.agents.profile import AgentProfile

MAX_LISTED = 20


@dataclass(frozen=True)
class StopEvent:
    agent: str  # the driver's name
    cwd: Path
    active: bool  # stop_hook_active: this turn already continues because a stop hook refused a stop
    session_id: str = ""
    prompt: str = ""  # what the model was sent, when the CLI's stop input says (`Hooks.stop_prompt`)
    transcript: str = ""  # the CLI's record of the session (`transcript_path`): its usage, for some


@dataclass(frozen=True)
class StopDecision:
    block: bool
    reason: str = ""


LET_THROUGH = StopDecision(False)


class MalformedInput(ValueError):
    pass


def parse_event(raw: str, agent: str | None = None) -> StopEvent:
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise MalformedInput(f"stdin is not JSON ({error})") from None
    if not isinstance(data, dict):
        raise MalformedInput("stdin is not a JSON object")
    cwd = data.get("cwd", os.getcwd())
    if not isinstance(cwd, str) or not cwd:
        raise MalformedInput("`cwd` is not a path")
    driver = agents.driver(agent) if agent is not None and agent in agents.NAMES else dialect(data)
    session, prompt, transcript = data.get("session_id"), data.get("prompt"), data.get("transcript_path")
    return StopEvent(
        driver.name,
        Path(cwd),
        data.get("stop_hook_active") is True,
        session if isinstance(session, str) else "",
        prompt if driver.hooks.stop_prompt and isinstance(prompt, str) else "",
        transcript if isinstance(transcript, str) else "",
    )


def dialect(data: dict) -> AgentProfile:
    """The CLI that sent this stop input: its stop event's name, then the keys only its input has."""
    event = data.get("hook_event_name")
    fitting = [d for d in agents.PROFILES.values() if all(key in data for key in d.hooks.stop_keys)]
    return max(fitting, key=lambda d: (d.hooks.stop_event == event, len(d.hooks.stop_keys)))


def decide(event: StopEvent) -> StopDecision:
    """Block the stop (with the files and what to do) or let it through."""
    if event.active:
        return LET_THROUGH
    try:
        repo = gitx.find_repo(event.cwd)
    except gitx.NotAGitRepo:
        return LET_THROUGH
    if not (repo.root / layout.ROADMAP).is_file():
        return LET_THROUGH  # not a teleclaude project
    return _check(repo, event.cwd.absolute())


def _check(repo, cwd: Path) -> StopDecision:
    try:
        parts = cwd.relative_to(repo.root).parts
    except ValueError:
        return LET_THROUGH
    if parts[:1] == (layout.TREES,):
        if len(parts) < 2 or gitx.worktree_state(repo, parts[1]).state is not WorktreeState.PRESENT:
            return LET_THROUGH
        where = f"{layout.TREES}/{parts[1]}"
        changes = gitx.status(repo.tree(parts[1])).changes
        how = f"In {where}, commit them (`git add -A && git commit -m '<what you did>'`)"
    else:
        where = "the main checkout's todos/"
        changes = tuple(p for p in gitx.status(repo.root, layout.TODOS).changes if p.count("/") >= 2)
        how = "Commit them (`git add todos && git commit -m '<what you prepared>'`)"
    if not changes:
        return LET_THROUGH
    listed = "\n".join(f"  {path}" for path in changes[:MAX_LISTED])
    more = f"\n  … and {len(changes) - MAX_LISTED} more" if len(changes) > MAX_LISTED else ""
    return StopDecision(
        True,
        f"teleclaude: {where} has uncommitted changes:\n{listed}{more}\n"
        f"{how} before you stop: the planner decides the next step from committed files only.",
    )


def render(decision: StopDecision, agent: str) -> str:
    """The CLI's own answer on stdout: nothing to let the stop through, else its refusal object."""
    if not decision.block:
        return ""
    return json.dumps({"decision": agents.driver(agent).hooks.refusal, "reason": decision.reason})


def main(agent: str | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    try:
        event = parse_event(stdin.read(), agent)
        decision = decide(event)
    except MalformedInput as error:
        warn(f"ignoring the hook input: {error}")
        return 0
    except Exception as error:  # never break the agent: let the stop through
        warn(f"{type(error).__name__}: {error}")
        return 0
    if event.transcript:  # the usage the turn's responses reported, for a driver that reads it there
        record_transcript_usage(event.agent, event.transcript, "stop")
    record_spend(event.agent, event.transcript, event.session_id)
    if not decision.block:
        _record_turn_end(event.prompt)
        return 0
    stdout.write(render(decision, event.agent) + "\n")
    stdout.flush()
    return 0


def _record_turn_end(prompt: str = "") -> None:
    """A worker started by the runtime ended its turn: tell the runtime now, not after its idle wait (with
    the prompt, when the CLI sends it: an unknown /command reaches the model as it was typed). A worker on
    another computer (the launcher set TURN_END_TO_PANE) marks its tmux pane instead, a sandboxed one its
    channel folder, with the prompt too, sealed with its session's key, which the runtime reads (over ssh
    with the pane's output; adapters/tmux.py, runtime/core/marks.py)."""
    # TURN_END_TO_PANE of adapters/tmux.py, spelled out: every other stop stays off that module
    if os.environ.get("TELECLAUDE_TURN_END_TO_PANE") and os.environ.get("TELECLAUDE_SESSION_ID"):
        from teleclaude.adapters.tmux import TURN_END_OPTION
        from teleclaude.runtime.core.marks import turn_end_payload

        if not mark_pane(TURN_END_OPTION, turn_end_payload(time.time_ns(), prompt)):
            warn("could not mark the end of the turn on the tmux pane")
        return
    if not end_turn_plainly(prompt=prompt):
        record(
            lambda runtime, session_id: runtime.record_turn_end(session_id, prompt=prompt),
            "the end of the turn",
        )
