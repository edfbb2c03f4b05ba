"""What every `teleclaude` command shares: the `Command` record, `--cwd`, and printing values with exit codes.

Feature modules (`cli_setup`, `cli_checks`, `cli_sessions`) list their commands in a `COMMANDS` tuple that
`teleclaude.cli` joins; they import only this module and argparse at the top, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def add_cwd(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    parser.add_argument(
        "--cwd",
        metavar="DIR",
        # a verb's --cwd must not overwrite one given before the verb (`agents --cwd X unavailable A`)
        default=argparse.SUPPRESS if suppress else None,
        help="the project (any folder inside its repository; default: the current directory)",
    )


# --- output ------------------------------------------------------------------------------------------


def print_action(action, as_json: bool) -> int:
    if not as_json:
        return print_value(action)
    from teleclaude.planner.core.render import to_dict

    write(json.dumps(to_dict(action)))
    return exit_code(action)


def print_value(value) -> int:
    from teleclaude.planner.core.render import to_text

    write(to_text(value))
    return exit_code(value)


def exit_code(value) -> int:
    from teleclaude.errors import Error

    return 1 if isinstance(value, Error) else 0


def write(text: str) -> None:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `teleclaude agents | head -1`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
