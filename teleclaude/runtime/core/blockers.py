"""Recognise what keeps an agent CLI from working on its own: a dialog waiting for an answer (workspace trust,
the bypass-permissions warning, project MCP approval, a custom API key, hooks review, login, the rate-limit
options), a refusal to start (as root), or a refusal of the command typed into it (`Unrecognized command
'/x'`: the step never ran). Each is reported at once with the fix, never answered by
typing into it.

Pure. Each CLI's rows are in its driver (`blockers`, `dialog_footer` in teleclaude/agents/); the wordings are
the pinned CLIs' own (tests/realcli/NOTES.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from teleclaude.agents import PROFILES
from teleclaude.agents.profile import Blocker, Kind


def find_blocker(agent: str, rows: Iterable[str], exited: bool = False) -> Blocker | None:
    """The agent's dialog open on the screen `rows` (its footer among the last rows), or, once the CLI
    `exited`, the refusal it printed."""
    rows = [row for row in rows if row.strip()]
    profile = PROFILES.get(agent)
    footer = profile.dialog_footer if profile else ""
    dialog = not footer or any(re.search(footer, row) for row in rows[-3:])
    for blocker in _blockers(agent):
        shown = {Kind.DIALOG: dialog, Kind.EXIT: exited, Kind.COMMAND: False, Kind.NOTICE: not exited}
        where = rows[-NOTICE_ROWS:] if blocker.kind is Kind.NOTICE else rows
        if shown[blocker.kind] and any(re.search(blocker.pattern, row) for row in where):
            return blocker
    return None


NOTICE_ROWS = 6  # a notice stands above the footer's last rows (model, mode, a status line)


def refused_command(agent: str, rows: Iterable[str]) -> str | None:
    """The CLI's own words when it refused the command typed into it (`Unrecognized command '/x'`)."""
    patterns = [b.pattern for b in _blockers(agent) if b.kind is Kind.COMMAND]
    for row in rows:
        if any(re.search(pattern, row) for pattern in patterns):
            return row.strip().lstrip("•✕■ ").strip()
    return None


SESSION_CONTEXT = re.compile(r"\A\s*<session_context>.*?</session_context>", re.DOTALL)


def refusal_text(agent: str, words: str) -> str:
    """A refused command explained: the CLI's words, that nothing reached the model, and the table's fix."""
    fix = next((b.fix for b in _blockers(agent) if b.kind is Kind.COMMAND), "")
    return f"{agent} refused the command: {words}\nNothing reached the model. {fix}".rstrip()


def unexpanded_command(prompt: str, typed: str) -> bool:
    """The prompt the CLI sent its model is the command line exactly as it was typed, with nothing but
    the CLI's session context before it: the CLI did not know the command (one sends an unknown `/x args`
    to the model as a plain prompt once its MCP servers are connected), so the role command never ran. A
    known command without `{{args}}` also ends with the typed line (appended to the command's text), so
    text before the line means the command was expanded."""
    return bool(typed.strip()) and SESSION_CONTEXT.sub("", prompt).strip() == typed.strip()


def blocked_text(agent: str, blocker: Blocker, workdir: str, rows: Iterable[str]) -> str:
    """The message under `ERROR: WORKER_BLOCKED`: what stops the worker, the fix, and the screen."""
    shown = "\n".join(row.rstrip() for row in last_rows(rows))
    fix = blocker.fix.replace("{workdir}", workdir)
    return (
        f"{agent} is stopped by {blocker.name} in {workdir}; teleclaude does not answer it.\n"
        f"{fix}\n"
        f"The screen:\n{shown}"
    )


def last_rows(rows: Iterable[str], count: int = 15) -> list[str]:
    """The last non-blank rows of a screen, without tmux's own "Pane is dead" line."""
    kept = [row for row in rows if row.strip() and not row.startswith("Pane is dead")]
    return kept[-count:]


def _blockers(agent: str) -> tuple[Blocker, ...]:
    profile = PROFILES.get(agent)
    return profile.blockers if profile else ()
