"""`teleclaude lint`, `hooks`, `hook` and `status`: catch bad state where it starts, and show the roadmap."""

from __future__ import annotations

from teleclaude.cli_base import Command

COMMANDS: tuple[Command, ...] = ()
