"""Errors as values: the codes every answer may carry, and the one door where exceptions become `Error`.

Every front end (the library API, the runtime, the CLI, the MCP server) calls through `guard`, so a caller
never sees a traceback: an expected failure raised deep in a shell (a `Failure` subclass, which knows its code
and the next step) or a foreign one (`OSError`, `sqlite3.Error`) is mapped here, in one table; anything else
is `INTERNAL`, a teleclaude bug (the httpx `map_exceptions` habit).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import wraps

TYPE_CHECKING = False  # typing's own, without importing typing (a few ms of every hook that records)
if TYPE_CHECKING:
    from typing import ClassVar, ParamSpec, TypeVar

    P = ParamSpec("P")
    T = TypeVar("T")


class ErrorCode(Enum):
    NO_WORK = "NO_WORK"
    NOT_PREPARED = "NOT_PREPARED"
    DEPS_UNSATISFIED = "DEPS_UNSATISFIED"
    INVALID_SLUG = "INVALID_SLUG"
    UNKNOWN_ITEM = "UNKNOWN_ITEM"  # a slug named by nothing in the files (not on the roadmap, no folder)
    NOT_A_GIT_REPO = "NOT_A_GIT_REPO"
    NO_COMMITS = "NO_COMMITS"
    WORKTREE_FAILED = "WORKTREE_FAILED"
    REVIEW_ROUND_LIMIT = "REVIEW_ROUND_LIMIT"
    UNKNOWN_AGENT = "UNKNOWN_AGENT"
    INVALID_TIME = "INVALID_TIME"
    INVALID_CONFIG = "INVALID_CONFIG"
    UNTRUSTED_CONFIG = "UNTRUSTED_CONFIG"  # a project teleclaude.toml sets what starts processes: not trusted
    LOCK_TIMEOUT = "LOCK_TIMEOUT"
    FILE_ERROR = "FILE_ERROR"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    ROADMAP_CONFLICT = "ROADMAP_CONFLICT"  # todos/roadmap.md holds git conflict markers
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"  # the SQLite file cannot be opened or written (folder, disk full)
    STORE_LOCKED = "STORE_LOCKED"  # another process holds the SQLite file locked
    # the worker runtime
    UNKNOWN_COMPUTER = "UNKNOWN_COMPUTER"
    AGENT_NOT_INSTALLED = "AGENT_NOT_INSTALLED"
    INVALID_SUBFOLDER = "INVALID_SUBFOLDER"
    UNKNOWN_SESSION = "UNKNOWN_SESSION"
    INVALID_CURSOR = "INVALID_CURSOR"
    TMUX_FAILED = "TMUX_FAILED"
    COMPUTER_UNREACHABLE = "COMPUTER_UNREACHABLE"  # ssh to another computer failed (exit 255): network, key
    WORKER_BLOCKED = "WORKER_BLOCKED"  # a dialog or a refusal keeps the agent CLI from working on its own
    WORKER_FAILED = "WORKER_FAILED"  # teleclaude run: the same step failed twice in a row
    ALREADY_RUNNING = "ALREADY_RUNNING"  # a live session of the project already holds this step
    MERGE_CONFLICT = "MERGE_CONFLICT"  # teleclaude finalize: the merge conflicts (aborted; next-fix-merge)
    FINALIZE_REFUSED = "FINALIZE_REFUSED"  # teleclaude finalize: not its next step, or a dirty main
    MAIN_NOT_CLEAN = "MAIN_NOT_CLEAN"  # next_work: the user's uncommitted changes in main; no new item starts
    MAIN_MOVED = "MAIN_MOVED"  # teleclaude run: main moved without a finalize (a commit by hand, a worker)
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"  # [runtime] sandbox = "bwrap", and bubblewrap cannot run
    SANDBOX_RACED = "SANDBOX_RACED"  # a path a worker's sandbox shows went away as bubblewrap made it
    SANDBOXED = "SANDBOXED"  # a sandboxed worker called a tool that drives workers or reads their records
    GATE_RED = "GATE_RED"  # [checks] gate failed on what would become main: sent back to be fixed
    GATE_BROKEN = "GATE_BROKEN"  # [checks] could not run: a command not found, tracked files changed
    PORT_IN_USE = "PORT_IN_USE"  # teleclaude mcp --http: another program listens on the port
    NOTIFY_FAILED = "NOTIFY_FAILED"  # teleclaude notify --test: a [notify] URL did not take the message
    INTERNAL = "INTERNAL"


class FrontEnd(Enum):
    """Who reads an answer: a next step is spelled as a CLI verb on the command line, a tool over MCP."""

    CLI = "cli"
    MCP = "mcp"


# MCP tool (without its `teleclaude__` prefix) -> the CLI words that do the same; its arguments follow.
CLI_VERBS: dict[str, tuple[str, ...]] = {
    "next_prepare": ("next-prepare",),
    "next_work": ("next-work",),
    "mark_agent_unavailable": ("agents", "unavailable"),
    "mark_agent_available": ("agents", "available"),
    "agent_status": ("agents",),
    "run_agent_command": ("sessions", "run"),
    "list_sessions": ("sessions", "list"),
    "get_session_output": ("sessions", "output"),
    "send_message": ("sessions", "send"),
    "end_session": ("sessions", "end"),
    "wait_for_sessions": ("sessions", "wait"),
    "report_status": ("sessions", "report"),
}


@dataclass(frozen=True)
class Call:
    """A next step an answer names, as a value: each front end spells it its own way (`spelled`)."""

    tool: str  # a key of CLI_VERBS
    # (parameter, value): keywords over MCP, positional on the CLI (a tuple: a list, one word per value)
    args: tuple[tuple[str, str | tuple[str, ...]], ...] = ()

    def spelled(self, front_end: FrontEnd) -> str:
        if front_end is FrontEnd.MCP:
            given = ", ".join(
                f"{name}={json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)}"
                for name, value in self.args
            )
            return f"teleclaude__{self.tool}({given})"
        words = [word for _, value in self.args for word in (value if isinstance(value, tuple) else (value,))]
        return shlex.join(["teleclaude", *CLI_VERBS[self.tool], *words])


def call(tool: str, **args: str | tuple[str, ...]) -> Call:
    return Call(tool, tuple(args.items()))


@dataclass(frozen=True)
class Error:
    code: ErrorCode
    message: str  # the lines below the code: what is wrong and the exact next step
    slug: str | None = None
    next_step: Call | None = None  # the step to take, when it is a teleclaude call (rendered per front end)


class Failure(Exception):
    """An expected failure of a shell (git, files, tmux, settings): it knows its code and the next step."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    next_step: ClassVar[str] = ""
    next_call: Call | None = None  # set on an instance when the next step is a teleclaude call

    def explain(self) -> str:
        text = str(self)
        if not self.next_step:
            return text
        return f"{text}{'' if text.endswith(('.', '!', '?', ':')) else '.'}\n{self.next_step}"


BUG_HINT = "This is a teleclaude bug; set TELECLAUDE_DEBUG=1 for details."


def to_error(error: BaseException) -> Error:
    """The one table from exceptions to codes."""
    if isinstance(error, Failure):
        return Error(error.code, error.explain(), next_step=error.next_call)
    sqlite3 = sys.modules.get("sqlite3")  # never imported: no sqlite3 error can have happened
    if sqlite3 is not None and isinstance(error, sqlite3.Error):
        return Error(
            ErrorCode.STORE_UNAVAILABLE,
            f"the teleclaude database failed: {error}.\n"
            "Check the file named by $TELECLAUDE_DB, else ~/.teleclaude/teleclaude.db.",
        )
    if isinstance(error, UnicodeEncodeError):  # text with lone surrogates: invalid UTF-8 given as input
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            "an argument is not valid UTF-8 text.\nGive it again as UTF-8.",
        )
    if isinstance(error, OSError):
        return Error(
            ErrorCode.FILE_ERROR,
            f"{error.filename or 'a file'}: {error.strerror or error}.\n"
            "Fix the file's permissions or path, then try again.",
        )
    import logging  # here: logging costs the planner's CLI call more than it logs (cli/__init__.py)

    logging.getLogger("teleclaude").debug("internal error", exc_info=error)
    return Error(ErrorCode.INTERNAL, f"{type(error).__name__}: {error}\n{BUG_HINT}")


def guard(function: Callable[P, T]) -> Callable[P, T | Error]:
    """`function`, with every exception turned into an `Error` value."""

    @wraps(function)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> T | Error:
        try:
            return function(*args, **kwargs)
        except Exception as error:  # the last line of defence: report, do not crash the caller
            return to_error(error)

    return guarded
