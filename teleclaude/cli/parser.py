"""The `teleclaude` command line's parser and the planner's commands (`teleclaude.cli` answers `--version`
and the agent hooks before this module is imported): the same answers as the MCP tools, as text or JSON,
with exit codes.

Exit codes: 0 for an action to carry out (TOOL_CALL, SELF, PREPARED, COMPLETE, OK), 1 for `ERROR: CODE`,
2 for bad usage. The planner paths (`next-*`, `agents`) import only the library: fastmcp and
sqlite-utils are loaded by the commands (or the rare write paths) that need them.

To add a command, write `_add_<name>(parser)` and `_run_<name>(args) -> int` and list them in a `COMMANDS`
tuple: the planner's here, the others in `cli.setup` (install, init, new, trust), `cli.checks` (lint, hooks,
hook, status), `cli.sessions` (the worker runtime), `cli.run` (run, demo), `cli.board` (board, report) and
`cli.notify` (notify), whose names `FEATURES` lists. A call imports only its own command's module; wings are
imported inside the commands: see `teleclaude.cli.base`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from importlib import import_module

from teleclaude import __version__
from teleclaude.cli import configure_logging
from teleclaude.cli.base import Command, add_cwd, print_action, print_value, serving_banner, tcp_port, write
from teleclaude.errors import Error, guard

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:  # imported by `build_parser`: `teleclaude.cli` runs `next-work` without a parser
    import argparse


# --- the commands ------------------------------------------------------------------------------------


def _add_next(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("slug", nargs="?", metavar="SLUG", help="a roadmap item (default: the planner picks)")
    add_cwd(parser)
    parser.add_argument("--json", action="store_true", help="print the action as one JSON object")


def run_next_prepare(args: argparse.Namespace) -> int:
    from teleclaude.planner import api as app

    return print_action(app.next_prepare(args.slug, cwd=args.cwd), args.json)


def run_next_work(args: argparse.Namespace) -> int:
    from teleclaude.planner import api as app

    return print_action(app.next_work(args.slug, cwd=args.cwd, dry_run=args.dry_run), args.json)


def _add_next_work(parser: argparse.ArgumentParser) -> None:
    _add_next(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="say what the next step would be, and change nothing: no item claimed, no worktree made",
    )


def _add_agents(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    verbs = parser.add_subparsers(dest="agents_verb", metavar="{unavailable,available}")
    unavailable = verbs.add_parser(
        "unavailable",
        help="mark an agent unavailable (quota, rate limit, overloaded, unresponsive)",
        description="Mark an agent unavailable; the planner falls back to the next agent of each row.",
    )
    unavailable.add_argument("agent", metavar="AGENT")
    unavailable.add_argument(
        "--until",
        metavar="T",
        help="a duration (45m, 2h, 1d, 1h30m) or an ISO 8601 time (2026-11-21T17:00:00Z); default 1h",
    )
    unavailable.add_argument("--reason", metavar="R", default="", help="why, e.g. quota_exhausted")
    add_cwd(unavailable, suppress=True)
    unavailable.set_defaults(handler=_run_agents_unavailable)
    available = verbs.add_parser("available", help="mark an agent available again")
    available.add_argument("agent", metavar="AGENT")
    add_cwd(available, suppress=True)
    available.set_defaults(handler=_run_agents_available)


def _run_agents(args: argparse.Namespace) -> int:
    from teleclaude.planner import api as app

    code = print_value(app.agent_status(cwd=args.cwd))
    lines = _spend_lines(args.cwd or ".") if code == 0 else []
    if lines:
        write("\n".join(lines))
    return code


def _spend_lines(cwd: str) -> list[str]:
    """What the workers used today and in the latest run (runtime/spend.py); nothing when unreadable."""
    from teleclaude.errors import Error
    from teleclaude.planner.core.terminal import printable
    from teleclaude.runtime import spend
    from teleclaude.runtime.api import guarded

    found = guarded(spend.project_summary, cwd)
    return [] if isinstance(found, Error) else [printable(line) for line in spend.summary_lines(found)]


def _run_agents_unavailable(args: argparse.Namespace) -> int:
    from teleclaude.planner import api as app

    return print_value(app.mark_agent_unavailable(args.agent, args.until, args.reason, cwd=args.cwd))


def _run_agents_available(args: argparse.Namespace) -> int:
    from teleclaude.planner import api as app

    return print_value(app.mark_agent_available(args.agent, cwd=args.cwd))


def _add_mcp(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=tcp_port, default=8000, help="HTTP port (default 8000)")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow a non-loopback --host (the token stays required)"
    )
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        help="a Host name clients may use besides loopback ones (repeatable; e.g. with --allow-remote)",
    )
    parser.add_argument(
        "--no-token", action="store_true", help="loopback only: do not require the bearer token"
    )


def _run_mcp(args: argparse.Namespace) -> int:
    from teleclaude.adapters.http_guard import can_listen, http_access
    from teleclaude.errors import Error

    access = None
    if args.http:
        allowed = http_access(
            args.host,
            allow_remote=args.allow_remote,
            no_token=args.no_token,
            allowed_hosts=tuple(args.allowed_host),
        )
        if isinstance(allowed, Error):
            return print_value(allowed)
        refused = can_listen(args.host, args.port)  # before saying it serves there
        if refused is not None:
            return print_value(refused)
        access = allowed
        _explain_http(args, access)
    # fastmcp costs ~1 s: only this command pays for it, only once its arguments are found good, and over
    # stdio only once a client asks what the record of earlier answers lacks (mcp_answers.py)
    with contextlib.suppress(KeyboardInterrupt):
        if not args.http:
            from teleclaude import mcp_answers

            mcp_answers.serve()
            return 0
        from teleclaude import mcp as mcp_server

        mcp_server.serve(http=args.http, host=args.host, port=args.port, access=access)
    return 0


def _explain_http(args: argparse.Namespace, access) -> None:
    """On stderr: where the server listens and how a client gets in (the token itself is never printed)."""
    import shlex

    from teleclaude.adapters.token import token_path

    url, lines = serving_banner(
        args.host, args.port, "/mcp", "MCP over HTTP", "can start agents that run commands as you"
    )
    if access.token is None:
        lines.append("teleclaude: WARNING: --no-token: any local process or user can call the tools.")
    else:
        header = f"Authorization: Bearer $(cat {shlex.quote(str(token_path()))})"
        lines += [
            f"Clients must send the header Authorization: Bearer <the token in {token_path()}>, e.g.",
            f'  claude mcp add --transport http teleclaude {url} --header "{header}"',
        ]
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def _add_finalize(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("slug", metavar="SLUG", help="the approved item to merge and archive")
    add_cwd(parser)


def _run_finalize(args: argparse.Namespace) -> int:
    from teleclaude.planner.core.terminal import printable
    from teleclaude.planner.finalize import finalize
    from teleclaude.runtime.remote import clean_up_delivered

    done = finalize(args.slug, cwd=args.cwd)
    if isinstance(done, Error):
        code = print_value(done)
        _notify_refused(args.slug, done, args.cwd)
        return code
    write(done.text())
    # the project lock is released: the other computers' clones are cleaned up over ssh, which may be slow.
    # What is left there is said, and the finalize still succeeded: its merge is done.
    cleaned = guard(clean_up_delivered)(args.slug, cwd=args.cwd)
    if isinstance(cleaned, Error):
        first = cleaned.message.splitlines()[0] if cleaned.message else cleaned.code.value
        _warn(f"could not clean up {args.slug} on other computers: {printable(first)}")
        return 0
    for result in cleaned:
        if result.left:
            _warn(
                f"{printable(result.text())}. Once that is dealt with there, `teleclaude finalize "
                f"{args.slug}` again removes them"
            )
        else:
            write(result.text())
    return 0


def _notify_refused(slug: str, refused: Error, cwd: str | None) -> None:
    """`[notify]`: a finalize a worker ran (`TELECLAUDE_SESSION_ID`: nobody at its terminal) that was
    refused for what only a human fixes (a dirty main checkout) is also sent."""
    if not os.environ.get("TELECLAUDE_SESSION_ID"):
        return
    from teleclaude.runtime.core import notices

    root = _repo_root(cwd)
    notice = notices.finalize_refused(slug, refused.code.value, refused.message, root) if root else None
    if notice is not None:
        from teleclaude.adapters import notify

        guard(notify.tell)(root, notice)


def _repo_root(cwd: str | None) -> str:
    from teleclaude.adapters.git import NotAGitRepo, find_repo

    try:
        return str(find_repo(cwd or os.getcwd()).root)
    except (NotAGitRepo, OSError):
        return ""


def _warn(line: str) -> None:
    sys.stderr.write(f"teleclaude: WARNING: {line}\n")
    sys.stderr.flush()


PLANNER_COMMANDS: tuple[Command, ...] = (
    Command(
        "next-prepare", "what the next preparation step is (requirements, plan)", _add_next, run_next_prepare
    ),
    Command("next-work", "what the next build/review/finalize step is", _add_next_work, run_next_work),
    Command(
        "finalize",
        "merge an approved item into the main checkout and archive it, one finalize at a time",
        _add_finalize,
        _run_finalize,
    ),
    Command("agents", "show agent availability, or mark an agent (un)available", _add_agents, _run_agents),
    Command("mcp", "serve the teleclaude__* tools over MCP (stdio, or --http)", _add_mcp, _run_mcp),
)


# The other commands' modules (`teleclaude.cli.NAME`) and the commands each has, in the order `--help` lists
# them: a call imports its own command's module alone, so it pays only for what that module imports at its top
# (`hook tool-use` runs on every tool an agent uses). `--help` and a usage error import them all.
FEATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("setup", ("install", "init", "new", "trust")),
    ("checks", ("lint", "hooks", "hook", "check", "status")),
    ("sessions", ("sessions", "supervise")),
    ("run", ("run", "demo")),
    ("board", ("board", "report")),
    ("notify", ("notify",)),
)


# The order `--help` lists the commands in: a user's first (drive, look, set up), then what agents, hooks and
# teleclaude itself run (HELP_EPILOG says where that part starts).
HELP_ORDER = (
    "run",
    "status",
    "board",
    "report",
    "demo",
    "init",
    "new",
    "lint",
    "install",
    "trust",
    "agents",
    "hooks",
    "next-work",
    "next-prepare",
    "finalize",
    "sessions",
    "supervise",
    "mcp",
    "hook",
)
HELP_EPILOG = (
    "next-work and the commands after it are mostly run by agents (the orchestrator, the workers' role "
    "commands), their hooks and teleclaude itself; `teleclaude COMMAND --help` says more of each."
)


def commands(chosen: str | None = None) -> tuple[Command, ...]:
    """The command named `chosen` alone, when there is one; else every command, in `HELP_ORDER`."""
    for command in PLANNER_COMMANDS:
        if command.name == chosen:
            return (command,)
    for module, names in FEATURES:
        if chosen in names:
            return tuple(command for command in feature_commands(module) if command.name == chosen)
    every = PLANNER_COMMANDS + tuple(
        command for module, _ in FEATURES for command in feature_commands(module)
    )
    return tuple(
        sorted(every, key=lambda c: HELP_ORDER.index(c.name) if c.name in HELP_ORDER else len(every))
    )


def feature_commands(module: str) -> tuple[Command, ...]:
    return import_module(f"teleclaude.cli.{module}").COMMANDS


# --- the parser ----------------------------------------------------------------------------------------


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given `argv` that names a command, only that command gets a subparser (argparse builds
    a help formatter and looks up translations for every parser and argument: a CLI call pays for its own
    command's, not all fourteen). Without one, every command is there, for the help and the error."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="teleclaude",
        description="A file-derived planner that tells teams of AI coding agents exactly one next step.",
        epilog=HELP_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"teleclaude {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None) if argv is not None else None
    for command in commands(chosen):
        about = command.description or command.help
        sub = subparsers.add_parser(command.name, help=command.help, description=about)
        command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
    return parser


def run(argv: Sequence[str]) -> int:
    """`teleclaude ARGV…` (`teleclaude.cli.main` sends every call here but those it answers itself)."""
    import logging

    configure_logging(logging)
    try:
        args = build_parser(argv).parse_args(argv)
    except SystemExit as exit_:  # --help, --version (0) and bad usage (2)
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    logging.getLogger("teleclaude").debug("teleclaude %s", args)
    return args.handler(args)
