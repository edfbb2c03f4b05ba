"""`teleclaude board` (the live board, in a terminal or a browser) and `teleclaude report` (a run's timeline).

Textual, textual-serve and aiohttp are imported inside these commands only: every other command keeps its
start time (see `teleclaude.cli.base`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys

from teleclaude.cli.base import Command, add_cwd, print_value, serving_banner, tcp_port, write
from teleclaude.errors import Error, guard


def _add_board(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    parser.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="read the facts again every SECONDS"
    )
    parser.add_argument("--web", action="store_true", help="serve the board to a browser instead")
    parser.add_argument("--host", default="127.0.0.1", help="--web: the address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=tcp_port, default=8010, help="--web: the port (default 8010)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="--web: allow a non-loopback --host (the token stays required)",
    )
    parser.add_argument(
        "--allowed-host",
        metavar="NAME",
        action="append",
        default=[],
        help="--web: a Host name browsers may use besides loopback ones (repeatable)",
    )


def _run_board(args: argparse.Namespace) -> int:
    from teleclaude.board.gather import Source

    source = guard(Source)(args.cwd or os.getcwd())
    if isinstance(source, Error):
        return print_value(source)
    if args.web:
        return _serve(args, source.root)
    from teleclaude.board.app import BoardApp

    web = os.environ.get("TEXTUAL_DRIVER", "").endswith("WebDriver")  # started by `board --web`
    BoardApp(source, interval=max(0.2, args.interval), web=web).run()
    return 0


def _serve(args: argparse.Namespace, root) -> int:
    from teleclaude.adapters.http_guard import can_listen, http_access
    from teleclaude.adapters.token import token_path
    from teleclaude.board import web

    access = http_access(args.host, allow_remote=args.allow_remote, allowed_hosts=tuple(args.allowed_host))
    if isinstance(access, Error):
        return print_value(access)
    refused = can_listen(args.host, args.port)
    if refused is not None:
        return print_value(refused)
    url, lines = serving_banner(
        args.host, args.port, "/", f"the board of {root}", "can end sessions and mark agents"
    )
    lines.append(
        f'Open it with the token once, e.g. xdg-open "{url}?token=$(cat {shlex.quote(str(token_path()))})"'
    )
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt):
        web.serve(root, args.host, args.port, access)
    return 0


def _add_report(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    parser.add_argument("--run", metavar="ID", help="the run (default: the project's latest)")
    parser.add_argument("--html", metavar="FILE", help="write the timeline as one HTML page to FILE")
    parser.add_argument("--json", action="store_true", help="the run's steps and what each used, as JSON")


def _run_report(args: argparse.Namespace) -> int:
    from teleclaude.board.core.timeline import Timeline
    from teleclaude.board.gather import report_json, run_timeline, write_report
    from teleclaude.planner.core.terminal import printable
    from teleclaude.planner.core.timeparse import format_duration, format_utc
    from teleclaude.runtime.core.spend import Total

    data = run_timeline(args.cwd or os.getcwd(), args.run)
    if isinstance(data, Error):
        return print_value(data)
    assert isinstance(data, Timeline)
    if args.html:
        written = write_report(data, args.html)
        if isinstance(written, Error):
            return print_value(written)
        write(f"OK: wrote the timeline of run {data.run_id} to {written}")
        return 0
    if args.json:
        write(json.dumps(report_json(data), indent=2))
        return 0
    span = (data.end - data.start).total_seconds()
    lines = [
        f"run {data.run_id}: {data.outcome or 'running'}, started {format_utc(data.start)}, "
        f"{format_duration(span)}"
    ]
    for row in data.rows:
        steps = ", ".join(
            f"{bar.step} {bar.agent} {format_duration(bar.seconds)} {bar.outcome}"
            + "".join(f" [{mark.kind.value}]" for mark in bar.marks)
            + (f" (started ahead, waited {format_duration(bar.ahead)})" if bar.ahead >= 1 else "")
            + f" ({Total().plus(bar.tokens, bar.agent, data.prices).text()})"
            + (f" (resumed from tc-{bar.resumed_from})" if bar.resumed_from else "")
            + (f" (handed over from tc-{bar.handed_over_from})" if bar.handed_over_from else "")
            for bar in row.bars
        )
        lines.append(f"  {row.slug or '(bugs)'}: {steps}")
    lines.append("per agent: " + ", ".join(f"{a} {format_duration(s)}" for a, s in data.totals("agent")))
    lines.append("per step: " + ", ".join(f"{a} {format_duration(s)}" for a, s in data.totals("step")))
    lines.append(
        f"waits: {format_duration(data.waited)}; workers started ahead waited "
        f"{format_duration(data.ahead)} at their prompts (not counted as work)"
    )
    lines.append(f"cost: {data.spent().text()}")
    for slug, spent in data.spend("item"):
        rounds, fixes = data.rounds(slug)
        fixed = f"; {rounds} fix round{'s' if rounds != 1 else ''}: {fixes.text()}" if rounds else ""
        lines.append(f"  {slug or '(bugs)'}: {spent.text()}{fixed}")
    lines.append("cost per agent: " + "; ".join(f"{a} {t.text()}" for a, t in data.spend("agent")))
    lines.append("cost per step: " + "; ".join(f"{a} {t.text()}" for a, t in data.spend("step")))
    starts = data.starts()
    lines.append(
        f"workers: {starts['fresh']} fresh starts, {starts['resumed']} resumed, "
        f"{starts['handed_over']} handed over"
    )
    write("\n".join(map(printable, lines)))  # slugs, agents, steps and outcomes come from the database
    return 0


COMMANDS: tuple[Command, ...] = (
    Command(
        "board",
        "a live board of the roadmap, the workers and the agents (a terminal UI, or --web)",
        _add_board,
        _run_board,
    ),
    Command(
        "report",
        "a run's timeline: one row per item, one bar per step (--html FILE: a page)",
        _add_report,
        _run_report,
    ),
)
