"""The teleclaude__* tools over MCP: thin wrappers that return `to_text` of the library's answer.

The project is the `cwd` argument, else the server process's working directory (an MCP client starts the
server in the project). Tools never raise: every answer, errors included, is plain text whose first line
(`TOOL_CALL:`, `SELF:`, `PREPARED:`, `COMPLETE:`, `OK:`, `ERROR: CODE`) says what it is.
"""

from __future__ import annotations

import asyncio
import hmac
import io
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fastmcp import FastMCP
from fastmcp.exceptions import ValidationError
from fastmcp.server.middleware import Middleware as ToolMiddleware
from fastmcp.tools import ToolResult
from mcp.types import ToolAnnotations
from pydantic import ValidationError as PydanticValidationError
from starlette.middleware import Middleware

from teleclaude import __version__
from teleclaude.adapters.http_guard import HttpAccess, same_origin
from teleclaude.agents import NAMES
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.errors import Error, ErrorCode, FrontEnd, guard
from teleclaude.mcp_stdio import NOT_UTF8, TOO_LONG, TooLongParams, mark_stdin, refuse_too_long, strings_in
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Action, AgentMarked, AgentReport
from teleclaude.planner.core.render import to_text
from teleclaude.runtime.core.supervision import MARK, digest_rule, unresponsive_rule

if TYPE_CHECKING:
    from typing import BinaryIO

    from teleclaude.runtime.core.sessions import StartRequest

log = logging.getLogger("teleclaude.mcp")

_DEFAULTS = RuntimeConfig()  # the descriptions state the runtime's rules with its defaults
_DIGESTS = digest_rule(_DEFAULTS)

INSTRUCTIONS = f"""\
teleclaude tells an orchestrator exactly one next step for the work items in todos/roadmap.md.
Loop: call teleclaude__next_prepare() until it answers PREPARED, then teleclaude__next_work() until it
answers COMPLETE. Execute every TOOL_CALL literally.

A TOOL_CALL's teleclaude__run_agent_command starts a worker, and its answer says how you hear of it: when
you run in tmux you are its parent, so end your turn, and a line starting `{MARK}` is typed into your
prompt: a digest {_DIGESTS} and one when its turn ends; when you do not run in tmux, call
teleclaude__wait_for_sessions until its turn ends.

When a worker you started turns out to be unavailable (quota, rate limit, overloaded), call
teleclaude__mark_agent_unavailable and then ask for the next step again: the answer falls back to another
agent. A worker that stops responding is marked by teleclaude: {unresponsive_rule(_DEFAULTS)}.
"""

_ANSWERS = """
The answer is plain text; its first line says what to do:
- TOOL_CALL: call the tool shown below it exactly as written (same arguments, same order). {after}
- SELF: no agent is available; do the named step yourself where it says, then call this tool again.
- {done}
- ERROR: CODE: stop this loop; the lines below say what is wrong and the exact next step."""

NEXT_PREPARE = """Ask what the next preparation step for a roadmap item is: requirements, then its plan.

Call it with no arguments to let the planner pick the first item that is not prepared yet, or pass the item's
slug. `cwd` is the project (any folder inside its git repository); leave it out to use the folder this
server runs in. This tool only reads files and never changes the project.
""" + _ANSWERS.format(
    after="It starts an architect session: engage as a collaborator (answer its questions, discuss the "
    "requirements or plan with it) until it has committed its file, then call this tool again.",
    done="PREPARED: the item is ready; call teleclaude__next_work() to start the build/review cycle.",
)

NEXT_WORK = (
    """Ask what the next build/review/finalize step is, and get the project ready for it.

Call it with no arguments to let the planner pick (open bugs first, then the roadmap item in progress, then
the next `[ ]` item whose dependencies are done), or pass the item's slug. `cwd` is the project (any folder
inside its git repository); leave it out to use the folder this server runs in. The call can mark the
chosen roadmap item `[>]` and create its git worktree trees/{slug} on branch {slug}; it never deletes
anything. With `dry_run` it only says what the answer would be: nothing is claimed, no worktree is made.
"""
    + _ANSWERS.format(
        after="It starts a worker (builder, reviewer, fixer, finalizer, committer): wait until that worker "
        "has finished and committed, then call this tool again.",
        done="COMPLETE: the item was finalized and archived under done/; call this tool again for the next "
        "item.",
    )
    + """

Keep calling until the answer is COMPLETE, SELF or an ERROR (NO_WORK means there is nothing left to do;
NOT_PREPARED means call teleclaude__next_prepare first)."""
)

AGENTS = ", ".join(NAMES)

MARK_UNAVAILABLE = f"""Report that an agent (e.g. {AGENTS}) cannot take work right now.

Call it when a worker hits its quota or a rate limit or is overloaded. Until the given
time, teleclaude__next_work() and teleclaude__next_prepare() pick the next agent of each row instead, and
answer SELF when none is left. The agent becomes available again by itself when the time passes.

`unavailable_until`: a duration from now such as 30m, 1h, 2h, 1d or 1h30m, or an ISO 8601 time such as
2026-11-21T17:00:00Z or 2026-11-21T17:00+02:00 (a time without offset is the server's local time).
Leave it out for one hour. When the agent reported a reset time, use it; for an overloaded agent, 15m
is a sensible guess.

`reason`: a short word such as quota_exhausted, rate_limited or overloaded. An unresponsive worker needs
no call: {unresponsive_rule(_DEFAULTS)}.

Answers `OK: ...`, or `ERROR: UNKNOWN_AGENT` / `ERROR: INVALID_TIME` with what to give instead."""

MARK_AVAILABLE = f"""Report that an agent (e.g. {AGENTS}) can take work again, early.

Answers `OK: <agent> is available.` or `ERROR: UNKNOWN_AGENT`."""

AGENT_STATUS = """Show every agent and, for the unavailable ones, until when (UTC), the minutes left and why;
then each agent's usage per window as its CLI last reported it (`5h 83% ↺ 19:00`: used, resets at, local
time), and which agents are over the headroom (the planner gives steps to those under it first).

Read-only. Expired entries are reset as they are read, so the table is always current."""


def _answer(function: Callable[..., Action | AgentMarked | AgentReport], *args, **kwargs) -> str:
    """The library's answer as text; an exception (a teleclaude bug) becomes `ERROR: INTERNAL`, no trace."""
    return to_text(guard(function)(*args, **kwargs), FrontEnd.MCP)


def _sandboxed(tool: str) -> str | None:
    """The answer of a sandboxed worker's server (its session's channel in its environment) to a tool that
    needs what its sandbox hides: the sessions database and the workers' tmux server (docs/security.md).
    None anywhere else."""
    if not os.environ.get("TELECLAUDE_CHANNEL"):  # CHANNEL of adapters/sandbox.py
        return None
    why = (
        f"teleclaude__{tool} is out of a sandboxed worker's reach: it drives no other worker and reads no "
        "session or agent record (its sandbox hides the sessions database and the workers' tmux server).\n"
        "Do your step, then tell teleclaude with teleclaude__report_status (it goes through your session's "
        "channel); whoever started you takes the next step."
    )
    return to_text(Error(ErrorCode.SANDBOXED, why), FrontEnd.MCP)


def next_prepare(slug: str | None = None, cwd: str | None = None) -> str:
    log.debug("next_prepare(slug=%r, cwd=%r)", slug, cwd)
    return _answer(app.next_prepare, slug or None, cwd=cwd or None)


def next_work(slug: str | None = None, cwd: str | None = None, dry_run: bool = False) -> str:
    log.debug("next_work(slug=%r, cwd=%r, dry_run=%r)", slug, cwd, dry_run)
    return _answer(app.next_work, slug or None, cwd=cwd or None, dry_run=dry_run)


def mark_agent_unavailable(agent: str, unavailable_until: str | None = None, reason: str = "") -> str:
    log.debug("mark_agent_unavailable(%r, %r, %r)", agent, unavailable_until, reason)
    return _sandboxed("mark_agent_unavailable") or _answer(
        app.mark_agent_unavailable, agent, unavailable_until, reason
    )


def mark_agent_available(agent: str) -> str:
    log.debug("mark_agent_available(%r)", agent)
    return _sandboxed("mark_agent_available") or _answer(app.mark_agent_available, agent)


def agent_status() -> str:
    return _sandboxed("agent_status") or _answer(app.agent_status)


# --- the worker runtime: every call runs in a thread, so tmux and the long-poll never block the server ------

RUN_AGENT_COMMAND = f"""Start an agent CLI ({AGENTS}) in tmux and type `/command args` into it.

Call it exactly as a TOOL_CALL from teleclaude__next_work / teleclaude__next_prepare says. It returns once
the command was delivered: `SESSION: <id> started` with the session's fields, or `ERROR: CODE`
(UNKNOWN_COMPUTER, COMPUTER_UNREACHABLE, UNKNOWN_AGENT, AGENT_NOT_INSTALLED, INVALID_SUBFOLDER,
TMUX_FAILED, ...);
WORKER_BLOCKED: a dialog or a refusal stops the CLI (the message names it and the fix; do not retry).
You are the worker's parent: when you run in tmux, a digest of the worker (a line starting
`{MARK}`) is typed into your prompt {_DIGESTS} and once more when its turn ends, so you may end
your turn. `parent` names another parent: a teleclaude session id,
or a tmux pane id such as %3. Not in tmux: call teleclaude__wait_for_sessions to learn when the worker
is done."""

LIST_SESSIONS = """List the worker sessions with their state (pending, running, turn_ended, stalled,
rate_limited, needs_attention, done, errored, cancelled), activity, agent, command, folder, reminders sent
and last reported status. Looking updates them: a vanished pane is errored."""

GET_SESSION_OUTPUT = """Read a worker's output without waiting. The first call (no cursor) returns the
visible screen and a cursor; pass that cursor to get only what is new since. Bounded by max_lines and
max_bytes
(`truncated=true`: call again with the new cursor). `lines_missed` counts rows that scrolled out of
the history before you read them; `alternate_screen=true` means a full-screen view (the whole screen is
sent when it changes); `pane_dead=true` means the CLI has exited."""

SEND_MESSAGE = """Type one line into a worker and press Enter, e.g. an answer to its question or "Commit your
changes". interrupt=true presses Escape first (stops what it is doing). Returns its new output."""

END_SESSION = """End a worker session: kill its tmux session. A session whose turn had ended is `done`, any
other is `cancelled`. Call it once a worker's step is finished (teleclaude__next_work moved on)."""

WAIT_FOR_SESSIONS = f"""Wait until something happens to the given sessions (default: every live one), at most
`timeout` seconds (60 at most). Returns `EVENTS: N` with one line per event (turn_ended: the worker is
back at its prompt, done or asking; exited: the CLI ended, with its exit code; rate_limited: the agent
hit a limit and was marked unavailable, so the next teleclaude__next_work falls back; errored; reminded:
a quiet worker was reminded; needs_attention: reminders went unanswered, look at it; digest: the
periodic report on a worker ({_DIGESTS}); finished / directed: after the worker's report_status, its
step was done by the files and the session ended / one directive was typed into it), or `NO_EVENTS` after
the timeout: then call it again. Events are reported once. An orchestrator in tmux that is its workers'
parent (teleclaude__run_agent_command's answer says so) need not call it: their digests are typed into
its prompt and it may end its turn. Not in tmux, keep calling this: you never need to poll the workers."""

REPORT_STATUS = """For workers: say how you are doing, e.g. "tests written, running them". It counts as
progress, so it answers the supervisor's reminders. session_id is $TELECLAUDE_SESSION_ID (empty: taken from
the environment). With wait_cmd (e.g. "pytest -q", split into arguments, no shell) the supervisor runs it in
the background, waits for your pane to be quiet, then asks the planner: if your step is finished by the
files your session is ended; if not, one directive is typed into your session. Returns at once."""

_RUNTIME = None


def _runtime():
    global _RUNTIME
    if _RUNTIME is None or _RUNTIME.config.untrusted:  # until `teleclaude trust`: read the file again
        from teleclaude.runtime.api import open_runtime

        _RUNTIME = open_runtime(os.getcwd())
        guard(_RUNTIME.list_sessions)()  # reconcile the stored sessions with tmux after a restart
        guard(_RUNTIME.adopt)()  # a supervisor that crashed is started again
    return _RUNTIME


def _session_answer(method: str, *args, **kwargs) -> str:
    from teleclaude.runtime.core.session_render import session_text

    refused = _sandboxed(method)
    if refused is not None:
        return refused
    answer = guard(lambda: getattr(_runtime(), method)(*args, **kwargs))()
    if isinstance(answer, Error):
        return to_text(answer, FrontEnd.MCP)
    tools = guard(lambda: _runtime().recent_tools(answer))() if isinstance(answer, list) else None
    return session_text(answer, None if isinstance(tools, Error) else tools, FrontEnd.MCP)


async def run_agent_command(
    computer: str,
    command: str,
    args: str,
    project: str,
    agent: str,
    thinking_mode: str,
    subfolder: str | None = None,
    parent: str | None = None,
) -> str:
    from teleclaude.runtime.core.sessions import StartRequest

    request = StartRequest(computer, command, args, project, agent, thinking_mode, subfolder or None)
    log.debug("run_agent_command(%r, parent=%r)", request, parent)
    return await asyncio.to_thread(_dispatch, request, parent)


_TOLD_NO_TMUX = False  # "not in tmux" is said once per server


def _dispatch(request: StartRequest, parent: str | None) -> str:
    """run_agent_command with its parent: named, else this server's orchestrator (its tmux pane or its
    teleclaude session, from the environment it was started with)."""
    global _TOLD_NO_TMUX
    from teleclaude.runtime.core import parents
    from teleclaude.runtime.supervisor import parent_of_process

    refused = _sandboxed("run_agent_command")
    if refused is not None:
        return refused
    runtime = guard(_runtime)()
    if isinstance(runtime, Error):
        return to_text(runtime, FrontEnd.MCP)
    found, parent_agent = parent_of_process(os.environ, runtime.config.profiles)
    if parent:
        named = parents.named(parent, os.environ)
        if named is None:
            message = (
                f"parent {parent!r} is neither a session id nor a tmux pane id (%3) of this server's tmux."
                "\nLeave parent out to be the parent yourself."
            )
            return to_text(Error(ErrorCode.INVALID_ARGUMENT, message), FrontEnd.MCP)
        found = named.encode()
    answer = _session_answer("run_agent_command", replace(request, parent=found, parent_agent=parent_agent))
    if found or not runtime.config.parent_digests or _TOLD_NO_TMUX or answer.startswith("ERROR"):
        return answer
    _TOLD_NO_TMUX = True
    return (
        f"{answer}\nNOTE: this orchestrator does not run in tmux, so no digest can be typed into it: call "
        "teleclaude__wait_for_sessions to hear of the worker."
    )


async def list_sessions(include_finished: bool = True) -> str:
    return await asyncio.to_thread(_session_answer, "list_sessions", include_finished)


async def get_session_output(
    session_id: str, cursor: str | None = None, max_lines: int = 200, max_bytes: int = 16000
) -> str:
    return await asyncio.to_thread(
        _session_answer, "get_session_output", session_id, cursor or None, max_lines, max_bytes
    )


async def send_message(session_id: str, text: str, interrupt: bool = False) -> str:
    return await asyncio.to_thread(_session_answer, "send_message", session_id, text, interrupt)


async def end_session(session_id: str) -> str:
    return await asyncio.to_thread(_session_answer, "end_session", session_id)


async def wait_for_sessions(session_ids: list[str] | None = None, timeout: float = 30.0) -> str:
    return await asyncio.to_thread(_session_answer, "wait_for_sessions", session_ids or None, timeout)


async def report_status(session_id: str, text: str, wait_cmd: str | None = None) -> str:
    channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its session's own folder
    if channel:
        from teleclaude.runtime.cycle import report_to_channel

        own = os.environ.get("TELECLAUDE_SESSION_ID", "")
        answer = report_to_channel(channel, session_id, own, text, wait_cmd or None)
        return to_text(answer, FrontEnd.MCP) if isinstance(answer, Error) else answer
    return await asyncio.to_thread(_session_answer, "report_status", session_id, text, wait_cmd or None)


def _hints(read_only: bool, idempotent: bool) -> ToolAnnotations:
    """No tool deletes anything, and none reaches beyond the project and the availability database."""
    return ToolAnnotations(
        read_only_hint=read_only, destructive_hint=False, idempotent_hint=idempotent, open_world_hint=False
    )


@dataclass(frozen=True)
class ToolSpec:
    function: Callable[..., object]
    name: str
    title: str
    description: str
    hints: ToolAnnotations


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        next_prepare,
        "teleclaude__next_prepare",
        "Next preparation step",
        NEXT_PREPARE,
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        next_work,
        "teleclaude__next_work",
        "Next work step",
        NEXT_WORK,
        _hints(read_only=False, idempotent=False),
    ),
    ToolSpec(
        mark_agent_unavailable,
        "teleclaude__mark_agent_unavailable",
        "Mark an agent unavailable",
        MARK_UNAVAILABLE,
        _hints(read_only=False, idempotent=True),
    ),
    ToolSpec(
        mark_agent_available,
        "teleclaude__mark_agent_available",
        "Mark an agent available",
        MARK_AVAILABLE,
        _hints(read_only=False, idempotent=True),
    ),
    ToolSpec(
        agent_status,
        "teleclaude__agent_status",
        "Agent availability",
        AGENT_STATUS,
        _hints(read_only=True, idempotent=True),
    ),
    ToolSpec(
        run_agent_command,
        "teleclaude__run_agent_command",
        "Start a worker",
        RUN_AGENT_COMMAND,
        _hints(read_only=False, idempotent=False),
    ),
    ToolSpec(
        list_sessions, "teleclaude__list_sessions", "Worker sessions", LIST_SESSIONS, _hints(True, True)
    ),
    ToolSpec(
        get_session_output,
        "teleclaude__get_session_output",
        "Read a worker's output",
        GET_SESSION_OUTPUT,
        _hints(read_only=True, idempotent=False),
    ),
    ToolSpec(
        send_message, "teleclaude__send_message", "Type into a worker", SEND_MESSAGE, _hints(False, False)
    ),
    ToolSpec(end_session, "teleclaude__end_session", "End a worker", END_SESSION, _hints(False, True)),
    ToolSpec(
        wait_for_sessions,
        "teleclaude__wait_for_sessions",
        "Wait for workers",
        WAIT_FOR_SESSIONS,
        _hints(read_only=False, idempotent=False),
    ),
    ToolSpec(
        report_status,
        "teleclaude__report_status",
        "Report a worker's status",
        REPORT_STATUS,
        _hints(False, False),
    ),
)


class BadArguments(ToolMiddleware):
    """A call whose arguments do not fit the tool answers `ERROR: INVALID_ARGUMENT` like any other error,
    instead of pydantic's text; so does one with text that is not UTF-8 (see `mark_lone_surrogates`)."""

    async def on_call_tool(self, context, call_next) -> ToolResult:
        if any(NOT_UTF8 in text for text in strings_in(context.message.arguments)):
            message = (
                f"{context.message.name}: an argument is not valid UTF-8 text (a lone surrogate such as "
                "\\ud800).\nGive it again as UTF-8."
            )
            return ToolResult(content=to_text(Error(ErrorCode.INVALID_ARGUMENT, message), FrontEnd.MCP))
        try:
            return await call_next(context)
        except ValidationError as error:
            cause = error.__cause__
            problems = (
                "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in cause.errors()
                )
                if isinstance(cause, PydanticValidationError)
                else str(error)
            )
            again = "Call it again with the arguments its description names."
            message = f"{context.message.name}: {problems}.\n{again}"
            return ToolResult(content=to_text(Error(ErrorCode.INVALID_ARGUMENT, message), FrontEnd.MCP))


def build_server() -> FastMCP:
    server = FastMCP(
        "teleclaude", instructions=INSTRUCTIONS, version=__version__, middleware=[BadArguments()]
    )
    # the SDK's own registry (FastMCP has no public door to it): a method no client calls, for `too_long`
    server._mcp_server.add_request_handler(TOO_LONG, TooLongParams, refuse_too_long)
    for spec in TOOLS:
        # output_schema=None: the answer is one text content, without a {"result": ...} structured copy
        server.tool(
            spec.function,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=spec.hints,
            output_schema=None,
        )
    return server


# --- HTTP: loopback names only, a bearer token, and a remote address only when asked for ---------------
# (who may connect: adapters/http_guard.py, which the CLI checks before it imports fastmcp)


class OwnOrigin:
    """ASGI middleware: answers 403 to a browser's request from another origin than the server's own, a page
    on another port of this machine included (fastmcp's guard lets every loopback origin in)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            origin = headers.get(b"origin")
            shown = None if origin is None else origin.decode("latin-1")
            if not same_origin(shown, headers.get(b"host", b"").decode("latin-1")):
                from starlette.responses import PlainTextResponse

                response = PlainTextResponse("Forbidden: requests from another site are refused.", 403)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class BearerToken:
    """ASGI middleware: answers 401 to every HTTP request without `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.expected = f"bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not self._authorized(dict(scope["headers"]).get(b"authorization")):
            from starlette.responses import PlainTextResponse

            response = PlainTextResponse(
                "Unauthorized: send the header Authorization: Bearer <token>.",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, header: bytes | None) -> bool:
        if header is None:
            return False
        scheme, _, value = header.partition(b" ")
        return hmac.compare_digest(scheme.lower() + b" " + value.strip(), self.expected)


def serve_stdio(source: BinaryIO | None = None, wire: io.RawIOBase | None = None) -> None:
    """MCP over stdio: the client's lines from `source` (else fd 0), the answers through `wire` (else fd 1);
    `teleclaude mcp` comes here from mcp_answers.serve, with what it answered already."""
    server = build_server()
    mark_stdin(source)
    if wire is not None:
        sys.stdout = _Stdout(io.BufferedWriter(wire))
    server.run(transport="stdio", show_banner=False)


class _Stdout:
    """`sys.stdout` while serving through a wire: the SDK's transport writes to its `buffer` (the wire), and a
    stray print goes to stderr, as it does when the SDK points fd 1 there itself."""

    def __init__(self, buffer: io.BufferedWriter) -> None:
        self.buffer = buffer

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def __getattr__(self, name: str) -> object:  # the rest of a text stream (libtmux reads `encoding`)
        return getattr(sys.stderr, name)


def serve(
    http: bool = False, host: str = "127.0.0.1", port: int = 8000, access: HttpAccess | None = None
) -> None:
    if not http:
        serve_stdio()
        return
    server = build_server()
    access = access or HttpAccess(None)
    log.info("serving MCP over HTTP on http://%s:%d/mcp", host, port)
    server.run(
        transport="http",
        host=host,
        port=port,
        show_banner=False,
        # strict: every request's Host must be a loopback name, the bound address or an allowed host (a
        # DNS-rebinding page gets 421), and a browser's Origin the server's own (OwnOrigin: 403)
        host_origin_protection=True,
        allowed_hosts=list(access.allowed_hosts),
        middleware=[
            Middleware(OwnOrigin),
            *([Middleware(BearerToken, token=access.token)] if access.token else []),
        ],
    )


if __name__ == "__main__":
    serve()
