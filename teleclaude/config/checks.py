"""`[checks]` of teleclaude.toml: what "green" is for this project.

`gate`: the commands every tree that would become main must pass (and a builder's or fixer's finished turn,
before a reviewer is started); `setup`: the commands run once in each new worktree before a worker starts
there; `timeout`: seconds per command. Each command is one string split into arguments the way a shell
would (`shlex.split`) but never given to a shell: `sh -c '…'` when a shell is wanted. `gate` and `setup`
start processes, so a project file's are applied only once the user trusts it (`teleclaude trust`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from teleclaude.errors import ErrorCode, Failure

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

CHECKS_KEYS = ("gate", "setup", "timeout")
EXECUTABLE_CHECKS_KEYS = ("gate", "setup")
DEFAULT_TIMEOUT = 900.0

EXAMPLE = """\
# [checks]: what "green" means here. `teleclaude finalize` merges an item into main only when the merged tree
# passes every `gate` command (a red gate sends the item back to be fixed); `teleclaude run` also runs the
# gate when a builder or fixer says it is done. `setup` runs once in each new worktree before a worker
# starts there. Commands are split like a shell would split them, but no shell runs them (write
# `sh -c '...'` for one). They start processes: `teleclaude trust` once you have read this file.
# [checks]
# gate = ["ruff check .", "pytest -q"]
# setup = ["uv sync"]
# timeout = 900  # seconds per command
"""


@dataclass(frozen=True)
class Checks:
    gate: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT

    @property
    def gated(self) -> bool:
        return bool(self.gate)


class ChecksError(Failure, ValueError):
    code = ErrorCode.INVALID_CONFIG
    next_step = "Fix the file, then call again."

    def __init__(self, path: str, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key}: {problem}")
        self.path = path
        self.key = key


def argv(command: str) -> list[str]:
    """A checked command's arguments (`parse_checks` made sure it splits into at least one)."""
    return shlex.split(command)


def parse_checks(path: str, value: Any, earlier: Checks | None = None) -> Checks:
    checks = earlier or Checks()
    if not isinstance(value, dict):
        raise ChecksError(path, "checks", 'must be a table: [checks] with gate = ["..."]')
    for key, item in value.items():
        where = f"checks.{key}"
        if key in EXECUTABLE_CHECKS_KEYS:
            checks = _replace(checks, key, _commands(path, where, item))
        elif key == "timeout":
            if isinstance(item, bool) or not isinstance(item, int | float) or item <= 0:
                raise ChecksError(path, where, f"must be a positive number of seconds, not {item!r}")
            checks = _replace(checks, key, float(item))
        else:
            raise ChecksError(path, where, f"unknown key; the keys are {', '.join(CHECKS_KEYS)}")
    return checks


def _replace(checks: Checks, key: str, value: Any) -> Checks:
    return replace(checks, **{key: value})


def _commands(path: str, key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ChecksError(path, key, f'must be a list of commands, e.g. ["pytest -q"], not {value!r}')
    for index, command in enumerate(value):
        try:
            words = shlex.split(command)
        except ValueError as error:
            raise ChecksError(path, f"{key}[{index}]", f"{command!r} cannot be split ({error})") from None
        if not words or "\0" in command:
            raise ChecksError(path, f"{key}[{index}]", f"{command!r} is not a command")
    return tuple(value)
