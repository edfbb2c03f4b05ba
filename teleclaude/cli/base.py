"""What every `teleclaude` command shares: the `Command` record, `--cwd`, and printing values with exit codes.

Feature modules (`cli.setup`, `cli.checks`, `cli.sessions`, `cli.run`) list their commands in a `COMMANDS`
tuple that `teleclaude.cli` joins. At the top they import only argparse, the standard library, this module
and `teleclaude.errors`; each command imports the wing it calls (planner, runtime, setup, demo) when it runs.
That keeps `--help` and the hooks git and the agent CLIs run on every commit and stop at ~50 ms, not ~200 ms.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from teleclaude.errors import Error

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:  # argparse itself when a parser is built: `teleclaude next-work` goes without (cli/)
    import argparse


@dataclass(frozen=True)
class Command:
    name: str
    help: str  # its line in `teleclaude --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""  # what `teleclaude NAME --help` says, when more than `help` is needed


def add_cwd(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    import argparse

    parser.add_argument(
        "--cwd",
        metavar="DIR",
        # a verb's --cwd must not overwrite one given before the verb (`agents --cwd X unavailable A`)
        default=argparse.SUPPRESS if suppress else None,
        help="the project (any folder inside its repository; default: the current directory)",
    )


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535 (`mcp --port`, `board --port`)."""
    import argparse

    port = int(text) if text.isascii() and text.isdecimal() else 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give a number from 1 to 65535")
    return port


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
    return 1 if isinstance(value, Error) else 0


def write(text: str) -> None:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `teleclaude agents | head -1`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def serving_banner(host: str, port: int, path: str, what: str, holder_can: str) -> tuple[str, list[str]]:
    """The URL a `--host`/`--port` server answers on, and its first lines for stderr: where it listens and,
    off loopback, who can reach it (`holder_can`: what whoever holds the token can do)."""
    from teleclaude.adapters.http_guard import is_loopback

    url = f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"
    lines = [f"teleclaude: serving {what} on {url}"]
    if not is_loopback(host):
        lines.append(
            f"teleclaude: WARNING: {host} is reachable from other machines; whoever holds the token "
            f"{holder_can}. Plain HTTP: use it only on a network you trust."
        )
    return url, lines
