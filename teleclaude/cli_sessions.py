"""`teleclaude sessions …`: start, observe and end agent workers in tmux."""

from __future__ import annotations

from teleclaude.cli_base import Command

COMMANDS: tuple[Command, ...] = ()
