"""`teleclaude lint`, `hooks`, `hook`, `check` and `status`: catch bad state where it starts, run the gate,
and show the roadmap.

Exit codes: `lint` 1 when any error is found (warnings alone exit 0); `hook …` always 0 (a hook must never
break a commit or an agent); the others 0, or 1 with `ERROR: CODE`. The planner and setup wings are imported
inside the commands: `--help` and the hooks stay fast (see `teleclaude.cli.base`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys

from teleclaude.cli.base import Command, add_cwd, print_value, write
from teleclaude.errors import Error

# --- lint --------------------------------------------------------------------------------------------


def _add_lint(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="*", metavar="FILES", help="files to check (default: all of todos/ and done/)"
    )
    add_cwd(parser)
    parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    parser.add_argument(
        "--staged",
        action="store_true",
        help="check the staged versions of the todos/ and done/ files being committed (the pre-commit hook)",
    )


def _run_lint(args: argparse.Namespace) -> int:
    from teleclaude.planner import checks
    from teleclaude.planner.core.lint import has_errors

    cwd = args.cwd or os.getcwd()
    findings = checks.lint_staged(cwd) if args.staged else checks.lint_files(cwd, args.files)
    if isinstance(findings, Error):
        code = print_value(findings)
        return 0 if args.staged else code  # a broken check must not refuse every commit
    if args.json:
        write(json.dumps([finding.to_dict() for finding in findings]))
    elif findings or not args.staged:
        write(checks.lint_text(findings) if findings else "OK: no problems found.")
    failed = has_errors(findings)
    if failed and args.staged and not args.json:
        write(checks.STAGED_HELP)
    if not args.staged and _notify_wrong(cwd):
        return 1
    return 1 if failed else 0


def _notify_wrong(cwd: str) -> bool:
    """`[notify]` checked as `teleclaude run` checks it at its start (Apprise only when URLs are set)."""
    from teleclaude.adapters import git as gitx
    from teleclaude.adapters import notify
    from teleclaude.errors import guard

    checked = guard(lambda: notify.checked(gitx.find_repo(cwd).root))()
    if isinstance(checked, Error):
        print_value(checked)
        return True
    return False


# --- hooks -------------------------------------------------------------------------------------------


def _add_hooks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("install", "uninstall", "status"),
        default="status",
        help="install the git hooks, remove them (restoring your own), or show them (default)",
    )
    add_cwd(parser)


def _run_hooks(args: argparse.Namespace) -> int:
    from teleclaude.errors import Error, guard
    from teleclaude.setup import githooks

    cwd = args.cwd or os.getcwd()

    def lines() -> list[str]:
        if args.action != "status":
            return getattr(githooks, args.action)(cwd)
        return [
            *(f"{hook.name:<12} {hook.describe()}" for hook in githooks.status(cwd)),
            f"(in {githooks.hooks_dir(cwd)})",
        ]

    done = guard(lines)()
    if isinstance(done, Error):
        return print_value(done)
    write("\n".join(done))
    return 0


# --- hook (called by git and by the agent CLIs) ------------------------------------------------------


def _add_hook(parser: argparse.ArgumentParser) -> None:
    from teleclaude.runtime.hooks import FIRST_AGENT_BY_DEFAULT, agents

    events = parser.add_subparsers(
        dest="event", metavar="{stop,stop-failure,tool-use,prompt,statusline,post-commit}", required=True
    )
    about = {
        "stop": (
            "an agent CLI's stop hook: refuse to stop with uncommitted work (hook JSON on stdin)",
            "Read the agent CLI's stop-hook JSON on stdin; print a refusal when work is uncommitted.",
        ),
        "stop-failure": (
            "an agent CLI's StopFailure hook: an API error ended the turn (rate limit, billing, …)",
            "Read the StopFailure hook JSON on stdin and record a limit or an error on the worker's "
            "session (TELECLAUDE_SESSION_ID); prints nothing.",
        ),
        "tool-use": (
            "an agent CLI's tool hook (PreToolUse, BeforeTool): record the tool for the session",
            "Record the tool use (hook JSON on stdin) for $TELECLAUDE_SESSION_ID; prints nothing.",
        ),
        "prompt": (
            "an agent CLI's UserPromptSubmit hook: keep the session's rollout file (its API errors)",
            "Read the UserPromptSubmit hook JSON on stdin and keep its transcript_path on the "
            "worker's session (TELECLAUDE_SESSION_ID); prints nothing.",
        ),
        "statusline": (
            "an agent CLI's status-line command: record the usage it reports, print a status line",
            "Read the status-line JSON on stdin, record the rate-limit usage in it and print a "
            "status line: the output of --then's command when given (the user's own), else ours.",
        ),
    }
    for event, (help, description) in about.items():
        hook = events.add_parser(event, help=help, description=description)
        choices = agents(event)
        if event in FIRST_AGENT_BY_DEFAULT:
            hook.add_argument(
                "--agent", choices=choices, default=choices[0], help=f"the CLI (default: {choices[0]})"
            )
        else:
            about_agent = "the CLI" if event == "tool-use" else "the CLI (default: from the input)"
            hook.add_argument("--agent", choices=choices, help=about_agent)
        if event == "statusline":
            hook.add_argument(
                "--then", metavar="COMMAND", help="the status line to show, run with the same stdin (yours)"
            )
        hook.set_defaults(handler=_run_agent_hook)
    post = events.add_parser(
        "post-commit", help="git post-commit: print the planner's next step (changes nothing)"
    )
    add_cwd(post)
    post.set_defaults(handler=_run_hook_post_commit)


def _run_hook(args: argparse.Namespace) -> int:  # argparse requires an event, so this is never reached
    return 2


def _run_agent_hook(args: argparse.Namespace) -> int:
    from teleclaude.runtime import hooks

    return hooks.run(args.event, args.agent, getattr(args, "then", None))


def _run_hook_post_commit(args: argparse.Namespace) -> int:
    try:
        from teleclaude.planner import checks

        text = checks.next_preview(args.cwd or os.getcwd())
        if isinstance(text, Error):
            text = "teleclaude: " + checks.describe(text)
    except Exception as error:  # never fail or clutter a commit: one line, no traceback
        logging.getLogger("teleclaude").debug("post-commit preview failed", exc_info=True)
        text = f"teleclaude: no next step shown ({type(error).__name__}: {error})".splitlines()[0]
    if text:
        write(text)
    return 0


# --- status ------------------------------------------------------------------------------------------


def _add_status(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    parser.add_argument("--json", action="store_true", help="print the board as one JSON object")
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=2.0,
        metavar="SECONDS",
        help="redraw every SECONDS (default 2) until Ctrl-C",
    )


def _run_status(args: argparse.Namespace) -> int:
    from teleclaude.planner import checks
    from teleclaude.planner.core.phase import board_dict, render_board
    from teleclaude.planner.core.terminal import printable

    cwd = args.cwd or os.getcwd()
    tty = sys.stdout.isatty()
    color = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    width = shutil.get_terminal_size((80, 24)).columns if tty else 80

    def frame() -> tuple[str, int]:
        board = checks.status_board(cwd)
        if isinstance(board, Error):
            from teleclaude.planner.core.render import to_text

            return to_text(board), 1
        from teleclaude.runtime import spend
        from teleclaude.runtime.api import guarded

        spent = guarded(spend.project_summary, cwd)
        if args.json:
            found = board_dict(board) | (
                {} if isinstance(spent, Error) else {"spend": spend.summary_json(spent)}
            )
            return json.dumps(found), 0
        from teleclaude.runtime.given_up import kept_lines

        lines = [] if isinstance(spent, Error) else spend.summary_lines(spent)
        lines += kept_lines(board.project)
        return "\n".join([render_board(board, width, color), *map(printable, lines)]), 0

    if args.watch is None:
        text, code = frame()
        write(text if args.json or code else f"{text.rstrip()}\n{_sandbox_line(cwd)}")
        return code
    interval = max(0.2, args.watch)
    return checks.watch(lambda: frame()[0], interval, write, clear=tty and not args.json)


def _sandbox_line(cwd: str) -> str:
    """Whether this project's workers start sandboxed here (adapters/sandbox.py), with the fix if not."""
    from teleclaude.adapters.git import find_repo
    from teleclaude.adapters.sandbox import status_line
    from teleclaude.adapters.settings import load_config
    from teleclaude.config.profiles import RuntimeConfig

    try:
        runtime = load_config(find_repo(cwd).root).runtime or RuntimeConfig()
    except Exception:  # the board said what is wrong with the files
        runtime = RuntimeConfig()
    return f"sandbox: {status_line(runtime, os.environ)}"


# --- check -------------------------------------------------------------------------------------------


def _add_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "slug",
        nargs="?",
        metavar="SLUG",
        help="gate main merged into this item's branch, as finalize does (default: the checkout you are in)",
    )
    parser.add_argument(
        "--setup",
        action="store_true",
        help="run the item's [checks] setup in its worktree again (what `teleclaude run` needs to pass)",
    )
    add_cwd(parser)


def _run_check(args: argparse.Namespace) -> int:
    if args.setup:
        if not args.slug:
            write("ERROR: INVALID_ARGUMENT\n--setup needs the item's SLUG.")
            return 1
        from teleclaude.runtime import gating

        checked = gating.setup_by_hand(args.slug, cwd=args.cwd)
    else:
        from teleclaude.planner import gate

        checked = gate.check(args.slug, cwd=args.cwd)
    if isinstance(checked, Error):
        return print_value(checked)
    write(checked.text())
    return 0 if checked.run is None or checked.run.passed else 1


COMMANDS: tuple[Command, ...] = (
    Command("lint", "check todos/ and done/ with the planner's own parsers", _add_lint, _run_lint),
    Command(
        "hooks",
        "install, remove or show the git hooks (pre-commit lint, post-commit next step)",
        _add_hooks,
        _run_hooks,
    ),
    Command("hook", "run a hook: `stop` for agent CLIs, `post-commit` for git", _add_hook, _run_hook),
    Command(
        "check",
        "run the [checks] gate by hand, as finalize runs it, and show each command's result",
        _add_check,
        _run_check,
    ),
    Command(
        "status",
        "one line per roadmap item: its phase, its worktree, and agent availability",
        _add_status,
        _run_status,
    ),
)
