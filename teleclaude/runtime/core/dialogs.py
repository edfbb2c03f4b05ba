"""Screens that are not the CLI's prompt and need an answer no detached worker can give (trust, hooks review,
login, a quota's "Keep trying / Stop"), and a CLI's refusal of a command it does not know.

Pure: the patterns are data of each AgentProfile (config/profiles.py), seen on the real CLIs
(tests/realcli/NOTES.md). A dialog is reported, never answered: typing into it would pick one of its options.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from teleclaude.config.profiles import Dialog


def find_dialog(screen: Sequence[str], dialogs: Iterable[Dialog]) -> Dialog | None:
    """The first dialog any row of the visible screen shows."""
    for dialog in dialogs:
        pattern = re.compile(dialog.pattern)
        if any(pattern.search(row) for row in screen):
            return dialog
    return None


def rejected_command(rows: Iterable[str], pattern: str) -> str | None:
    """The CLI's own words when it refused the command typed into it (`Unrecognized command '/x'`)."""
    if not pattern:
        return None
    compiled = re.compile(pattern)
    for row in rows:
        if compiled.search(row):
            return row.strip().lstrip("•✕■ ").strip()
    return None


def blocked_message(agent: str, dialog: Dialog, screen: Sequence[str]) -> str:
    last = "\n".join(row.rstrip() for row in screen if row.strip())[-600:]
    return (
        f"{agent} is waiting in its {dialog.name} dialog, which teleclaude does not answer.\n"
        f"Fix: {dialog.fix}.\nThe screen:\n{last}"
    )
