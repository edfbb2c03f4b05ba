"""`teleclaude sessions …`: start, watch and end agent workers in tmux (the runtime tools as verbs).

The runtime is imported inside the commands: `--help` and the hooks stay fast (see `teleclaude.cli.base`).
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from teleclaude.agents import NAMES
from teleclaude.cli.base import Command, add_cwd, print_value, write
from teleclaude.errors import Error


def _add_sessions(parser: argparse.ArgumentParser) -> None:
    add_cwd(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    verbs = parser.add_subparsers(dest="sessions_verb", metavar="{run,list,output,send,end,wait,report}")

    run = _verb(verbs, "run", help="start an agent CLI in tmux and type /COMMAND ARGS into it")
    run.add_argument("agent", metavar="AGENT", help=f"{', '.join(NAMES[:-1])} or {NAMES[-1]}")
    run.add_argument("command", metavar="COMMAND", help="e.g. next-build")
    run.add_argument("args", metavar="ARGS", nargs="?", default="", help="the slug")
    run.add_argument("--thinking-mode", default="med", choices=("fast", "med", "slow"))
    run.add_argument("--subfolder", metavar="DIR", help="e.g. trees/my-slug (default: the project root)")
    run.add_argument("--computer", default="local")
    run.set_defaults(handler=_run_run)

    listing = _verb(verbs, "list", help="the sessions and their states")
    listing.add_argument("--live", action="store_true", help="only sessions that have not finished")
    listing.set_defaults(handler=_run_list)

    output = _verb(verbs, "output", help="a session's output since CURSOR (the screen without one)")
    output.add_argument("session_id", metavar="SESSION")
    output.add_argument("--cursor", metavar="CURSOR")
    output.add_argument("--max-lines", type=int, default=200)
    output.add_argument("--max-bytes", type=int, default=16_000)
    output.set_defaults(handler=_run_output)

    send = _verb(verbs, "send", help="type one line into a session and press Enter")
    send.add_argument("session_id", metavar="SESSION")
    send.add_argument("text", metavar="TEXT")
    send.add_argument("--interrupt", action="store_true", help="press Escape first")
    send.set_defaults(handler=_run_send)

    end = _verb(verbs, "end", help="end a session (kill its tmux session)")
    end.add_argument("session_id", metavar="SESSION")
    end.set_defaults(handler=_run_end)

    wait = _verb(verbs, "wait", help="wait up to TIMEOUT seconds (max 60) for events of the sessions")
    wait.add_argument("session_ids", metavar="SESSION", nargs="*")
    wait.add_argument("--timeout", type=float, default=30.0)
    wait.set_defaults(handler=_run_wait)

    report = _verb(verbs, "report", help="a worker reports its status (and may start a post-report cycle)")
    report.add_argument(
        "session_id", metavar="SESSION", help='$TELECLAUDE_SESSION_ID ("" takes it from there)'
    )
    report.add_argument("text", metavar="TEXT")
    report.add_argument(
        "--wait-cmd", metavar="CMD", help="run CMD, wait for a quiet pane, then ask the planner"
    )
    report.set_defaults(handler=_run_report)

    cycle = _verb(verbs, "cycle", help="(internal) the post-report cycle report --wait-cmd starts")
    cycle.add_argument("session_id", metavar="SESSION")
    cycle.add_argument("started", metavar="STARTED", help="the cycle's start time, as report stored it")
    cycle.add_argument("wait_cmd", metavar="ARG", nargs="+", help="the wait command, after --")
    cycle.set_defaults(handler=_run_cycle)


def _verb(verbs, name: str, **kwargs) -> argparse.ArgumentParser:
    """A verb that also takes --json and --cwd after it: `sessions list --json`, as the README writes it."""
    verb = verbs.add_parser(name, **kwargs)
    verb.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the answer as JSON"
    )
    add_cwd(verb, suppress=True)
    return verb


def _run_sessions(args: argparse.Namespace) -> int:
    return _answer(args, "list_sessions", True)


def _run_run(args: argparse.Namespace) -> int:
    from teleclaude.adapters.git import NotAGitRepo, find_repo
    from teleclaude.runtime.core.sessions import StartRequest

    here = Path(args.cwd or ".").resolve()
    try:
        project = find_repo(here).root
    except NotAGitRepo:
        project = here
    request = StartRequest(
        args.computer, args.command, args.args, str(project), args.agent, args.thinking_mode, args.subfolder
    )
    return _answer(args, "run_agent_command", request)


def _run_list(args: argparse.Namespace) -> int:
    return _answer(args, "list_sessions", not args.live)


def _run_output(args: argparse.Namespace) -> int:
    return _answer(args, "get_session_output", args.session_id, args.cursor, args.max_lines, args.max_bytes)


def _run_send(args: argparse.Namespace) -> int:
    return _answer(args, "send_message", args.session_id, args.text, args.interrupt)


def _run_end(args: argparse.Namespace) -> int:
    return _answer(args, "end_session", args.session_id)


def _run_wait(args: argparse.Namespace) -> int:
    return _answer(args, "wait_for_sessions", args.session_ids or None, args.timeout)


def _run_report(args: argparse.Namespace) -> int:
    import os

    channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its session's own folder
    if not channel:
        return _answer(args, "report_status", args.session_id, args.text, args.wait_cmd)
    from teleclaude.planner.core.render import to_dict, to_text
    from teleclaude.runtime.cycle import report_to_channel

    own = os.environ.get("TELECLAUDE_SESSION_ID", "")
    answer = report_to_channel(channel, args.session_id, own, args.text, args.wait_cmd)
    if isinstance(answer, Error):
        write(json.dumps(to_dict(answer)) if args.json else to_text(answer))
        return 1
    write(json.dumps({"id": own, "sent": True, "cycle": bool(args.wait_cmd)}) if args.json else answer)
    return 0


def _run_cycle(args: argparse.Namespace) -> int:
    """Runs detached from the worker that reported: open the runtime of the session's own project."""
    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.planner.core.render import to_text
    from teleclaude.runtime.api import guarded, open_runtime

    def cycle() -> object:
        session = SessionStore().get(args.session_id)
        runtime = open_runtime(session.project if session else args.cwd or ".")
        return runtime.run_cycle(args.session_id, args.wait_cmd, datetime.fromisoformat(args.started))

    verdict = guarded(cycle)
    write(to_text(verdict) if isinstance(verdict, Error) else f"OK: {verdict}")
    return 1 if isinstance(verdict, Error) else 0


def _answer(args: argparse.Namespace, method: str, *arguments: object) -> int:
    from teleclaude.planner.core.render import to_dict, to_text
    from teleclaude.runtime.api import guarded, open_runtime
    from teleclaude.runtime.core.session_render import session_dict, session_text

    runtime = guarded(lambda: open_runtime(args.cwd or "."))
    answer = runtime if isinstance(runtime, Error) else guarded(lambda: getattr(runtime, method)(*arguments))
    if isinstance(answer, Error):
        write(json.dumps(to_dict(answer)) if args.json else to_text(answer))
        return 1
    tools, spent = None, None
    if isinstance(answer, list) and not isinstance(runtime, Error):
        found = guarded(runtime.recent_tools, answer)
        tools = None if isinstance(found, Error) else found  # a listing without tool uses beats no listing
        used = guarded(_spent, runtime, answer, args.cwd or ".")
        spent = None if isinstance(used, Error) else used
    write(
        json.dumps(session_dict(answer, tools, spent))
        if args.json
        else session_text(answer, tools, spent=spent)
    )
    return 0


def _spent(runtime, sessions: list, cwd: str) -> dict:
    """What each listed worker used, priced with the project's [prices]."""
    from teleclaude.adapters.settings import load_config
    from teleclaude.runtime import spend

    return spend.per_session(runtime.store, sessions, load_config(cwd).spend)


def _add_supervise(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", metavar="DIR", default=".", help="the project (default: here)")


def _run_supervise(args: argparse.Namespace) -> int:
    """Runs detached, started by the first dispatch with a parent; exits when nothing is left to watch."""
    import logging

    from teleclaude.adapters.git import NotAGitRepo, find_repo
    from teleclaude.runtime.api import guarded, open_runtime

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    here = Path(args.project).resolve()
    try:
        project = find_repo(here).root
    except NotAGitRepo:
        project = here
    notifier = _notifier(project)
    try:
        ran = guarded(lambda: _supervising(open_runtime(project), notifier).supervise(str(project)))
    finally:
        if notifier is not None:
            notifier.close()
    if isinstance(ran, Error):
        return print_value(ran)
    write("OK: nothing left to supervise" if ran else "OK: the project's supervisor already runs")
    return 0


def _notifier(project: Path):
    """`[notify]` for the supervisor: a file or URL that is not right is logged (it runs detached) and
    nothing is sent; `teleclaude lint` says what is wrong."""
    import logging

    from teleclaude.adapters import notify
    from teleclaude.errors import guard

    made = guard(lambda: notify.notifier_for(notify.checked(project)))()
    if isinstance(made, Error):
        logging.getLogger("teleclaude.notify").warning("notify: nothing is sent: %s", made.message)
        return None
    return made


def _supervising(runtime, notifier):
    if notifier is not None:
        runtime.supervisor.notify = notifier.post
    return runtime


COMMANDS: tuple[Command, ...] = (
    Command(
        "sessions", "start, watch and end agent workers in tmux (the runtime)", _add_sessions, _run_sessions
    ),
    Command(
        "supervise",
        "remind workers and wake their parents with digests until none is left (started by a dispatch)",
        _add_supervise,
        _run_supervise,
        "The project's supervisor: one background process per project that watches its workers with "
        "nobody polling. It reminds a worker that stalls, and when a worker's turn ends (or it needs "
        "attention) it types a short digest into its parent's tmux pane (the orchestrating agent's) at a "
        "moment that pane is idle, so the parent may end its turn instead of polling. The first worker "
        "started with a parent starts it; it exits once no worker is left to watch. You seldom run it "
        "yourself; a second one for the same project exits at once.",
    ),
)
