"""`teleclaude run` (the unattended orchestrator) and `teleclaude demo` (it, on a throwaway repository).

The runtime and the demo are imported inside the commands: `--help` and the hooks stay fast (see
`teleclaude.cli.base`).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from teleclaude.agents import NAMES
from teleclaude.cli.base import Command, add_cwd, print_value, write
from teleclaude.errors import Error, guard
from teleclaude.planner.core.terminal import printable

if TYPE_CHECKING:
    from teleclaude.config.spend import Budget

DEFAULT_MAX_STEPS = 100


def _add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "slug", nargs="?", metavar="SLUG", help="one roadmap item (default: the whole roadmap, in order)"
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="also start the architects (requirements, plan) for items that are not prepared, unattended",
    )
    parser.add_argument(
        "--max-steps",
        type=_positive,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"stop before starting worker session N+1 (default {DEFAULT_MAX_STEPS})",
    )
    parser.add_argument(
        "--parallel",
        type=_positive,
        default=1,
        metavar="N",
        help="keep up to N roadmap items in flight at once, each in its own trees/SLUG (default 1)",
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="stop (SELF) when every agent for a step is rate-limited, instead of waiting for the first to "
        "come back ([runtime] limit_wait, default 12 h)",
    )
    parser.add_argument(
        "--stand-ins",
        action="store_true",
        help="rehearse: the run on a temporary clone of the project's last commit, with the stand-in CLIs "
        "(no model; your checkout, sessions and settings are not touched; the clone is kept until the next "
        "rehearsal of the project)",
    )
    parser.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [budget] limit for this run instead of teleclaude.toml's, e.g. item_usd=10 or "
        "run_tokens=5000000 (repeatable)",
    )
    add_cwd(parser)


def _budget(project: Path, pairs: list[str]) -> Budget | Error | None:
    """`--budget KEY=VALUE …` over the project's [budget]; None without any."""
    if not pairs:
        return None
    from teleclaude.adapters.settings import load_config
    from teleclaude.config.spend import parse_budget
    from teleclaude.runtime.api import guarded

    table: dict[str, object] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            table[key.strip()] = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            table[key.strip()] = value
    return guarded(lambda: parse_budget("--budget", table, load_config(project).spend).budget)


def _run_run(args: argparse.Namespace) -> int:
    from teleclaude.runtime import orchestrator
    from teleclaude.runtime.api import guarded, open_runtime

    console = Console()
    if args.stand_ins:
        from teleclaude.demo import scenario

        project = Path(args.cwd or ".").resolve()
        return scenario.rehearse(project, args.slug, args.prepare, args.max_steps, args.parallel, console)
    project = Path(args.cwd or ".").resolve()
    notifier = _notifier(project)  # its URLs checked before anything starts, not at 3 a.m.
    if isinstance(notifier, Error):
        return print_value(notifier)
    try:
        runtime = guarded(open_runtime, project)  # a file that is not valid: INVALID_CONFIG, as elsewhere
        if isinstance(runtime, Error):
            return print_value(runtime)
        budget = _budget(project, args.budget)
        if isinstance(budget, Error):
            return print_value(budget)
        runtime.context.budget = budget
        report = orchestrator.run(
            project,
            args.slug,
            args.prepare,
            args.max_steps,
            runtime,
            console.show,
            console.status,
            parallel=args.parallel,
            wait_for_limits=not args.no_wait,
            notify=notifier.post if notifier else None,
        )
    except KeyboardInterrupt:  # before the loop started: nothing was dispatched
        console.clear()
        return 130
    console.clear()
    write("\n" + report.text)
    if notifier is not None:
        notifier.close()  # the run's last notice: at most [notify] timeout
    if report.run_id:
        from teleclaude.board.gather import cost_lines, report_line

        costs = guarded(cost_lines, report.run_id)  # a store that cannot be read: no cost lines
        for line in costs if isinstance(costs, list) else []:
            write(printable(line))
        write(report_line(report.run_id))
    return report.exit_code


def _notifier(project: Path):
    """The run's `Notifier` when `[notify]` has URLs (Apprise is imported then only), else None; an Error
    when a URL or a notify file is not right."""
    from teleclaude.adapters import git as gitx
    from teleclaude.adapters import notify

    def make():
        try:
            root = gitx.find_repo(project).root
        except gitx.NotAGitRepo:  # the run says so itself
            return None
        return notify.notifier_for(notify.checked(root))

    return guard(make)()


def _add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", action="store_true", help="keep the demo repository instead of deleting it")
    parser.add_argument("--verbose", action="store_true", help="print the full text of every planner answer")
    parser.add_argument(
        "--real",
        metavar="AGENT",
        choices=NAMES,
        help="one item through real CLIs on a scripted model server, instead of the stand-ins "
        "(some with a rate limit that moves a step to another agent)",
    )
    parser.add_argument(
        "--stand-ins",
        metavar="DIR",
        help=f"instead of a demo: put the stand-in CLIs ({', '.join(NAMES)}) into DIR, to rehearse "
        "`teleclaude run` on a copy of your own project with DIR first on PATH",
    )


def _run_demo(args: argparse.Namespace) -> int:
    from teleclaude.demo import scenario as demo

    if args.stand_ins:
        return _install_stand_ins(Path(args.stand_ins).resolve())
    if args.real:
        from teleclaude.demo import real

        return real.run(Console(), args.real, keep=args.keep, verbose=args.verbose)
    return demo.run(Console(), keep=args.keep, verbose=args.verbose)


def _install_stand_ins(folder: Path) -> int:
    from teleclaude.demo import stand_in

    installed = guard(stand_in.install)(folder)
    if isinstance(installed, Error):
        return print_value(installed)
    path = shlex.quote(str(installed))
    write(
        f"OK: the stand-in CLIs {', '.join(NAMES)} are in {installed}.\n"
        "They do each step on the files and commit, with no model: rehearse on a copy of your project,\n"
        f"  git clone YOUR-PROJECT /tmp/rehearsal && cd /tmp/rehearsal\n"
        f"  PATH={path}:$PATH teleclaude run --prepare\n"
        "(`teleclaude run --stand-ins` does all of this for you, on a temporary clone)"
    )
    return 0


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return number


class Console:
    """Log lines on stdout; the live status line on stderr, rewritten in place on a terminal, else printed
    as a plain line whenever something other than the clock changed."""

    def __init__(self, err=None) -> None:
        self.err = err or sys.stderr
        self.live = self.err.isatty()
        self.drawn = False  # a status line is on the terminal
        self.last = ""

    def show(self, text: str) -> None:
        self.clear()
        write(printable(text, keep_newlines=True))

    def status(self, progress) -> None:
        if self.live:
            width = shutil.get_terminal_size().columns
            self.err.write("\r\x1b[K" + printable(progress.line())[: max(width - 1, 20)])
            self.err.flush()
            self.drawn = True
        elif progress.key() != self.last:
            self.last = progress.key()
            self.err.write(printable(progress.line()) + "\n")
            self.err.flush()

    def clear(self) -> None:
        if self.drawn:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self.drawn = False


COMMANDS: tuple[Command, ...] = (
    Command(
        "run",
        "drive the roadmap unattended: ask the planner for the next step, run its worker in tmux, wait, "
        "repeat",
        _add_run,
        _run_run,
    ),
    Command(
        "demo",
        "a throwaway repository driven to done/ by `teleclaude run` with fake agent CLIs in tmux",
        _add_demo,
        _run_demo,
    ),
)
