"""The `teleclaude` command line: the same answers as the MCP tools, as text or JSON, with exit codes.

Every call starts here, and this module imports nothing: the agent CLIs run `teleclaude hook …` on every tool
call, turn end and status-line refresh, most of them with nothing to record. `--version` and the agent hooks
(`hook stop|stop-failure|tool-use|prompt|statusline`, their arguments written as `teleclaude install` writes
them) run from here without argparse, and import what they record with only when they record it; so do
`next-work` and `next-prepare` (the planner's cold path). Every other call, and any of these with other
arguments (`--help`, a wrong `--agent`, an abbreviated option, `TELECLAUDE_DEBUG` set), goes to
`teleclaude.cli.parser`, which answers it as it answers every command.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

AGENT_HOOKS = ("stop", "stop-failure", "tool-use", "prompt", "statusline")
_plain: list[bool] = []  # `--version` or an agent hook answered without the parser: `finish` may end at once


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        _plain.append(True)
        return _version()
    if len(args) > 1 and args[0] == "hook" and args[1] in AGENT_HOOKS and not _debug():
        done = _agent_hook(args[1], args[2:])
        if done is not None:
            _plain.append(True)
            return done
    if args[:1] in (["next-work"], ["next-prepare"]) and not _debug():
        done = _next(args[0], args[1:])
        if done is not None:
            return done
    from teleclaude.cli.parser import run

    return run(args)


def finish(code: int) -> None:
    """The process ends with `code` (bin/teleclaude's `sys.exit`). After `--version` or an agent hook (run at
    every agent event) it ends at once, its output flushed, without the interpreter's teardown (every module
    freed and a last collection: ~9 M instructions, a fifth of Python's own start): their files and
    databases are closed as they are written. Not when anything asked to run at exit (`atexit`: logging's
    flush, methodcache.py's table), another thread runs, or the output cannot be flushed: then as always."""
    if _plain and "threading" not in sys.modules:
        import atexit

        if not atexit._ncallbacks():
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                sys.exit(code)
            os._exit(code)
    sys.exit(code)


def _version() -> int:
    from teleclaude import __version__

    try:
        sys.stdout.write(f"teleclaude {__version__}\n")
        sys.stdout.flush()
    except OSError:  # as argparse's --version: a closed stdout is not an error
        pass
    return 0


def _agent_hook(event: str, rest: list[str]) -> int | None:
    """The hook's exit code; None when its arguments are not plainly good (argparse then says what)."""
    options = _options(rest, ("--agent", "--then") if event == "statusline" else ("--agent",))
    if options is None:
        return None
    from teleclaude.runtime import hooks

    agent = options.get("--agent")
    if event == "tool-use" and not hooks.tool_use_wanted():  # nothing to record: no driver looked up
        return 0 if agent is None or hooks.runs(event, agent) else None
    if agent is None and event in hooks.FIRST_AGENT_BY_DEFAULT:
        agent = hooks.first_agent(event)  # the drivers up to it, no more
        if agent is None:
            return None
    if agent is not None and not hooks.runs(event, agent):
        return None
    from teleclaude.lazy import when_imported

    when_imported("logging", configure_logging)  # as `run` sets it up, should the hook's work log
    return hooks.run(event, agent, options.get("--then"))


def _next(command: str, rest: list[str]) -> int | None:
    """`next-work|next-prepare [SLUG] [--cwd DIR] [--json]` (`--dry-run` too for next-work), as the parser
    would read them; None for anything else. The planner's step needs no parser (argparse and what it
    imports as it builds one: gettext, locale, shutil)."""
    flags = ("--json", "--dry-run") if command == "next-work" else ("--json",)
    found: dict[str, str] = {}
    at = 0
    while at < len(rest):
        arg = rest[at]
        name, equals, value = arg.partition("=")
        if arg in flags and arg not in found:
            found[arg] = ""
        elif name == "--cwd" and name not in found:
            if not equals:
                at += 1
                if at == len(rest) or rest[at].startswith("-"):
                    return None
                value = rest[at]
            found[name] = value
        elif not arg.startswith("-") and "SLUG" not in found:
            found["SLUG"] = arg
        else:
            return None
        at += 1
    from teleclaude.lazy import when_imported

    when_imported("logging", configure_logging)  # as `run` sets it up, should the planner log
    from types import SimpleNamespace

    from teleclaude.cli import parser

    args = SimpleNamespace(
        command=command,
        slug=found.get("SLUG"),
        cwd=found.get("--cwd"),
        json="--json" in found,
        dry_run="--dry-run" in found,
    )
    run = parser.run_next_work if command == "next-work" else parser.run_next_prepare
    return run(args)  # type: ignore[arg-type]  # what the parser's Namespace would hold (typing's cast costs)


def _options(rest: list[str], names: tuple[str, ...]) -> dict[str, str] | None:
    """`--NAME VALUE` and `--NAME=VALUE`, each once, of `names`; None for anything else."""
    found: dict[str, str] = {}
    at = 0
    while at < len(rest):
        name, equals, value = rest[at].partition("=")
        if name not in names or name in found:
            return None
        if not equals:
            at += 1
            if at == len(rest) or rest[at].startswith("-"):
                return None
            value = rest[at]
        found[name] = value
        at += 1
    return found


def _debug() -> bool:
    return os.environ.get("TELECLAUDE_DEBUG", "") not in ("", "0")


def configure_logging(logging: ModuleType) -> None:
    logging.basicConfig(
        level=logging.DEBUG if _debug() else logging.WARNING,
        stream=sys.stderr,
        format="%(name)s: %(levelname)s: %(message)s",
    )
