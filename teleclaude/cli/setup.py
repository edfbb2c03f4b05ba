"""`teleclaude install`, `init` and `new`: role commands, MCP registration and project scaffolding.

The setup wing is imported inside the commands: `--help` and the hooks stay fast (see `teleclaude.cli.base`).
"""

from __future__ import annotations

import argparse

from teleclaude.agents import NAMES
from teleclaude.cli import checks as cli_checks
from teleclaude.cli.base import Command, add_cwd, print_value, write
from teleclaude.errors import guard


def _add_install(parser: argparse.ArgumentParser) -> None:
    for agent in NAMES:
        parser.add_argument(
            f"--{agent}", action="store_true", help=f"set up {agent} (default: every CLI found)"
        )
    parser.add_argument(
        "--scope",
        choices=("user", "project"),
        default="user",
        help="user: into your home folder (default); project: into the repository, to commit and share",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would change and write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove what teleclaude install added")
    parser.add_argument(
        "--verbose", action="store_true", help="list every file and setting, not a line per agent CLI"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="also replace the role commands you changed with teleclaude's, keeping yours as NAME.bak",
    )
    add_cwd(parser)


def _run_install(args: argparse.Namespace) -> int:
    from teleclaude.setup import install

    agents = tuple(agent for agent in NAMES if getattr(args, agent))
    return _show(
        install.install,
        agents,
        install.Scope(args.scope),
        cwd=args.cwd,
        dry_run=args.dry_run,
        uninstall=args.uninstall,
        with_stop_hook=stop_hook_available(),
        verbose=args.verbose,
        overwrite=args.overwrite,
    )


def stop_hook_available() -> bool:
    """Whether this teleclaude has `teleclaude hook stop`; wiring a missing command would block every stop."""
    return any(command.name == "hook" for command in cli_checks.COMMANDS)


def _add_init(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)


def _run_init(args: argparse.Namespace) -> int:
    from teleclaude.setup import scaffold

    return _show(scaffold.init, args.cwd)


def _add_new(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "slug", metavar="SLUG", help="the item's name: lowercase letters, digits, single dashes"
    )
    parser.add_argument("description", nargs="?", default="", help="one line saying what the item delivers")
    parser.add_argument("--after", metavar="A,B", default="", help="slugs this item depends on")
    add_cwd(parser)


def _run_new(args: argparse.Namespace) -> int:
    from teleclaude.setup import scaffold

    after = tuple(dep.strip() for dep in args.after.split(",") if dep.strip())
    return _show(scaffold.new, args.slug, args.description, after, cwd=args.cwd)


def _add_trust(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--revoke", action="store_true", help="trust the project's file no more")
    which.add_argument(
        "--status", action="store_true", help="say whether it is trusted, and what it would allow"
    )


def _run_trust(args: argparse.Namespace) -> int:
    from teleclaude.setup import trust

    return _show(trust.trust, args.cwd, revoke=args.revoke, status=args.status)


def _show(function, *args, **kwargs) -> int:
    """Print what `function` returns; every failure becomes `ERROR: CODE` and exit status 1."""
    result = guard(function)(*args, **kwargs)
    if hasattr(result, "text"):
        write(result.text())
        return 0
    return print_value(result)


COMMANDS: tuple[Command, ...] = (
    Command(
        "install",
        f"put the role commands, MCP server and stop hook into {', '.join(NAMES)}",
        _add_install,
        _run_install,
    ),
    Command(
        "init",
        "set up todos/roadmap.md, the trees/ exclusion and git hooks in a repository",
        _add_init,
        _run_init,
    ),
    Command("new", "add a roadmap item and its todos/SLUG/ folder", _add_new, _run_new),
    Command(
        "trust",
        "let the project's teleclaude.toml, in its present content, set what starts processes",
        _add_trust,
        _run_trust,
        "A project's teleclaude.toml comes with the repository, so whoever can commit to it could make "
        "teleclaude start programs as you. Its settings that start processes (other computers and their "
        "ssh options, the agent CLIs' binaries, flags and environment) apply only once you trusted the file "
        "in its present content. Until then they are left out, and whatever would start a worker (`run`, "
        "`sessions run`) answers ERROR: UNTRUSTED_CONFIG naming them, rather than start it with your "
        "defaults in their place. `teleclaude trust` records the file's sha256 "
        "and prints the settings it lets through; any change to the file (a pull, an agent's edit) makes "
        "it untrusted again. --status shows where things stand, --revoke takes the trust back.",
    ),
)
