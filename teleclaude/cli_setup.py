"""`teleclaude install`, `init` and `new`: role commands, MCP registration and project scaffolding."""

from __future__ import annotations

from teleclaude.cli_base import Command

COMMANDS: tuple[Command, ...] = ()
