"""A scripted model server: real agent CLIs talk to it instead of a provider, and it plays a script.

One small threaded HTTP server on 127.0.0.1 speaks enough of four providers' APIs for their CLIs to work:
- Anthropic Messages (`POST /v1/messages`, streaming SSE, `count_tokens`): Claude Code via
  `ANTHROPIC_BASE_URL`;
- OpenAI Responses (`POST /v1/responses`, streaming SSE): Codex via a `model_providers` entry in its config;
- Gemini (`…:generateContent`, `…:streamGenerateContent?alt=sse`, `…:countTokens`): Gemini CLI via
  `GOOGLE_GEMINI_BASE_URL`;
- OpenAI Chat Completions (`POST /v1/chat/completions`, streaming SSE): opencode via an
  `@ai-sdk/openai-compatible` provider in its config.

A script is a list of steps, one per model turn the CLI asks for (a request that offers tools: the agent's
own loop); the CLI's side requests (titles, quota probes, summaries) get a short reply and leave the script
alone. Steps: `Text` (reply and end the turn), `Tool` (call a tool: the shell, or an MCP tool found by name
among the tools the CLI offered), `Fail` (answer with the provider's real error status, headers and body:
429, the subscription limits, 529/503, quota), each optionally held until the test releases a
`threading.Event` (a "slow" model without sleeping). When the script runs out, every turn is answered "Done.",
or by `then(request body)` (a model that decides from what it was sent, e.g. `teleclaude demo --real`;
`provider_of`, `tool_result_sent` and `body_text` read a body of any of the four providers). A step's `usage`
(or `ModelServer(usage=…)`, `server.usage = …`) is what every answer from then on says in its headers of the
provider's rate-limit windows, as the real provider says it before a limit (`Usage`).

Every answer reports token usage in its provider's own fields, numbers of the server's own, different on
each answer (`Sent`: `sent` lists them, `sent_total(turns_only)` sums them): what a CLI's record of the
session should add up to.

Every request is recorded (`requests`, `turns()`), and `wait_for` blocks until one matches, so a test waits
on what the CLI sent instead of sleeping.
"""

from __future__ import annotations

import functools
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# --- the script ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """How much of its rate-limit windows a provider says is used, in the headers of every response (from
    the one that takes it on): the five-hour window (claude's `5h`, codex's primary) and the weekly one
    (`7d`, secondary), each a fraction used (None: not reported) and its reset, in seconds from the moment
    the server took this usage on (a step's, or one set): the same reset on every response after it.
    Anthropic sends `anthropic-ratelimit-unified-{5h,7d}-utilization` / `-reset` / `-status`, OpenAI's codex
    backend `x-codex-{primary,secondary}-used-percent` / `-window-minutes` / `-reset-at`; the other two
    providers report nothing of the kind."""

    five_hour: float | None = None
    seven_day: float | None = None
    five_hour_resets_in: int = 3600
    seven_day_resets_in: int = 5 * 86400


@dataclass(frozen=True)
class Text:
    """Reply with text and end the turn."""

    text: str
    hold: threading.Event | None = None  # answer only once the test sets it
    chunk_delay: float = 0.0  # seconds between streamed pieces (a slow, visibly working model)
    usage: Usage | None = None  # the usage this answer (and every one after it) reports


@dataclass(frozen=True)
class Tool:
    """Call a tool. `name` is `shell` (each CLI's own shell tool), `mcp:SERVER:TOOL` (found among the tools
    the CLI offered, whatever its naming), or a tool's exact name."""

    name: str
    input: dict
    hold: threading.Event | None = None
    chunk_delay: float = 0.0
    usage: Usage | None = None


@dataclass(frozen=True)
class Fail:
    """Answer with an error: `kind` is one of FAILURES (rate_limit, session_limit, weekly_limit, opus_limit,
    sonnet_limit, overloaded, unavailable, server_error, quota, billing). `repeat` requests get it (the CLI's
    retries included); `retry_after` seconds go into the retry-after header; `resets_in` seconds say when a
    subscription limit resets, counted from the answer (`resets_at`, epoch seconds, instead: a reset the test
    knows exactly however late the request comes)."""

    kind: str
    repeat: int = 1
    retry_after: int | None = 20
    resets_in: int = 3600
    resets_at: int | None = None
    hold: threading.Event | None = None
    usage: Usage | None = None


Step = Text | Tool | Fail


@dataclass(frozen=True)
class Sent:
    """The token usage one answer reported, in teleclaude's terms (agents/tokens.py): `input` counts the
    cached input too, `output` the reasoning too; each dialect spells it in its provider's fields."""

    turn: bool  # an answer of the agent's loop (else a side request's)
    input: int
    cached: int
    output: int
    reasoning: int


def sent_for(index: int, turn: bool) -> Sent:
    """The n-th answer's usage: a different number every time, the side requests' apart."""
    n = index + 1
    base = 1000 if turn else 50_000
    return Sent(turn, base + 137 * n, 7 * n, 40 + 13 * n, n % 3)


QUOTA_MESSAGE = "You exceeded your current quota, please check your plan and billing details."
FAILURES = (
    "rate_limit",
    "session_limit",
    "weekly_limit",
    "opus_limit",
    "sonnet_limit",
    "overloaded",
    "unavailable",
    "server_error",
    "quota",
    "billing",
)


def shell(command: str, description: str = "") -> Tool:
    return Tool("shell", {"command": command, "description": description or command[:60]})


def edit_and_commit(path: str, content: str, message: str) -> Tool:
    """A shell call that writes `content` to `path` and commits it: the work a builder does. No command
    substitution (`$(…)`, backticks): gemini 0.61's shell tool refuses any, even under --yolo."""
    import posixpath
    import shlex

    folder = posixpath.dirname(path)
    command = (
        (f"mkdir -p {shlex.quote(folder)} && " if folder else "")
        + f"printf '%s\\n' {shlex.quote(content)} > {shlex.quote(path)} && git add -A && "
        f"git commit -q -m {shlex.quote(message)}"
    )
    return shell(command, f"Write {path} and commit")


def mcp(server: str, tool: str, **arguments: object) -> Tool:
    return Tool(f"mcp:{server}:{tool}", dict(arguments))


# --- what the CLI sent --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    provider: str  # anthropic, openai, gemini, chat, or "" for a path no provider knows
    method: str
    path: str
    headers: dict[str, str]
    body: dict | None
    turn: bool  # part of the agent's loop (it offered tools): it took a step of the script
    answer: str  # what the server did: "text", "tool Bash", "fail rate_limit 429", "side", "count", …
    at: float = field(default_factory=time.monotonic)

    def text(self) -> str:
        """Every string in the request body, joined: for `"/next-build" in r.text()`-style assertions."""
        return body_text(self.body)

    def tools(self) -> list[str]:
        """The names of the tools the CLI offered the model in this request."""
        dialect = next((d for d in _dialects() if d.name == self.provider), None)
        return dialect.offered_tools(self.body if isinstance(self.body, dict) else {}) if dialect else []

    def last_user_text(self) -> str:
        """The text of the last user message (Anthropic and OpenAI shapes; Gemini's `contents`)."""
        body = self.body or {}
        messages = body.get("messages") or body.get("input") or body.get("contents") or []
        for message in reversed(messages if isinstance(messages, list) else []):
            if isinstance(message, dict) and message.get("role") == "user":
                return "\n".join(_strings(message.get("content") or message.get("parts")))
        return ""


def estimated_tokens(body: object) -> int:
    """A request's input tokens as this server counts them (`count_tokens`): its JSON's characters / 4."""
    return max(1, len(json.dumps(body)) // 4)


def body_text(body: object) -> str:
    """Every string in a request body, joined (what a `then` model searches for the command it was given)."""
    return "\n".join(_strings(body))


def provider_of(body: dict) -> str:
    """Which provider's request a turn's body is (a `then` model may serve several CLIs at once)."""
    if "contents" in body:
        return "gemini"
    if "system" in body or "max_tokens" in body and "stream_options" not in body:
        return "anthropic"  # its system prompt is a field of its own, its tool results user messages
    if "stream_options" in body or any(
        isinstance(m, dict) and m.get("role") in ("system", "tool") for m in body.get("messages") or ()
    ):
        return "chat"
    return "openai" if "input" in body else "anthropic"


def tool_result_sent(body: dict) -> bool:
    """Whether the request carries back the result of the tool call the model made last (it was carried out,
    and the turn goes on), rather than a new message from the user."""
    return next(d for d in _dialects() if d.name == provider_of(body)).tool_result_sent(body)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# --- the server ---------------------------------------------------------------------------------------------


class ModelServer:
    """`with ModelServer([Text("hi")]) as server:` … `server.url`, `server.wait_for(…)`, `server.turns()`."""

    def __init__(
        self,
        script: Iterable[Step] = (),
        default: str = "Done.",
        then: Callable[[dict], Step] | None = None,
        usage: Usage | None = None,
    ) -> None:
        self._script: list[Step] = list(script)
        self._usage: tuple[Usage, float] | None = None if usage is None else (usage, time.time())
        self.then = then  # once the script runs out: the step for a turn, from its request body
        self._uses: dict[int, int] = {}  # a Fail step's index -> the requests it answered
        self.default = default
        self.requests: list[Recorded] = []
        self.sent: list[Sent] = []  # the token usage of each answer that reported any
        self._changed = threading.Condition()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="model-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        assert isinstance(host, str)  # bound to an IPv4 address
        return f"http://{host}:{port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    @property
    def usage(self) -> Usage | None:
        """What the answers report of the rate-limit windows (a step's `usage` changes it)."""
        return self._usage[0] if self._usage else None

    @usage.setter
    def usage(self, usage: Usage | None) -> None:
        self._usage = None if usage is None else (usage, time.time())

    def usage_since(self) -> tuple[Usage, float] | None:
        """The usage the answers report, and when the server took it on (its resets count from then)."""
        return self._usage

    # the script

    def add(self, *steps: Step) -> None:
        """More steps at the end of the script (a test can steer a live CLI turn by turn)."""
        with self._changed:
            self._script.extend(steps)

    def _next_step(self) -> Step | None:
        with self._changed:
            if not self._script:
                return None
            step = self._script[0]
            if step.usage is not None:
                self.usage = step.usage
            if isinstance(step, Fail):
                used = self._uses.get(id(step), 0) + 1
                self._uses[id(step)] = used
                if used < step.repeat:
                    return step
            self._script.pop(0)
            return step

    def clear(self) -> None:
        """The rest of the script dropped (a limit's refusals still to come: the provider's reset is over)."""
        with self._changed:
            self._script.clear()

    def pending(self) -> int:
        with self._changed:
            return len(self._script)

    # what was sent

    def record(self, entry: Recorded) -> None:
        with self._changed:
            self.requests.append(entry)
            self._changed.notify_all()

    def next_sent(self, turn: bool) -> Sent:
        with self._changed:
            sent = sent_for(len(self.sent), turn)
            self.sent.append(sent)
            return sent

    def sent_total(self, turns_only: bool = True) -> Sent:
        """The sum of the usage the answers reported (of the agent's loop only, by default)."""
        with self._changed:
            rows = [s for s in self.sent if s.turn or not turns_only]
        return Sent(
            True, *(sum(getattr(s, key) for s in rows) for key in ("input", "cached", "output", "reasoning"))
        )

    def turns(self) -> list[Recorded]:
        with self._changed:
            return [r for r in self.requests if r.turn]

    def wait_for(self, predicate: Callable[[Recorded], bool], timeout: float = 30.0) -> Recorded:
        """The first recorded request matching `predicate`, waiting up to `timeout` seconds for it."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for entry in self.requests:
                    if predicate(entry):
                        return entry
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = "\n".join(f"  {r.method} {r.path} [{r.answer}]" for r in self.requests)
                    raise TimeoutError(f"no matching request after {timeout:g}s; received:\n{seen}")
                self._changed.wait(left)

    def tokens_sent(self, since: int = 0) -> int:
        """The input tokens of every agent turn from the `since`-th request on, estimated as `count_tokens`
        answers (a body's JSON characters / 4): what a provider would have billed the CLI's loop."""
        with self._changed:
            return sum(estimated_tokens(r.body) for r in self.requests[since:] if r.turn)

    def wait_for_turn(self, contains: str, timeout: float = 30.0) -> Recorded:
        return self.wait_for(lambda r: r.turn and contains in r.text(), timeout)


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_HEAD(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            path = urlsplit(self.path).path
            dialect = _dialect_for(self.command, path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if dialect is None:
                server.record(Recorded("", self.command, self.path, headers, body, False, "404"))
                self._send(404, {"error": {"message": f"no such route: {self.command} {path}"}})
                return
            reply = dialect.answer(server, path, body if isinstance(body, dict) else {})
            if reply.status == 200 and reply.label != "count":
                payloads = [reply.body, *(data for _, data in reply.events or ())]
                dialect.report_tokens(payloads, server.next_sent(reply.turn))
            server.record(
                Recorded(dialect.name, self.command, self.path, headers, body, reply.turn, reply.label)
            )
            if reply.hold is not None:
                reply.hold.wait()
            reported = server.usage_since()
            if reported is not None:  # a failure's own headers (a limit's 100 %) come last
                reply.headers = dialect.usage_headers(*reported) | reply.headers
            if reply.events is None:
                self._send(reply.status, reply.body, reply.headers)
            else:
                self._stream(reply)

        def _send(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _stream(self, reply: Reply) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.close_connection = True
            try:
                for index, (event, data) in enumerate(reply.events or ()):
                    if index and reply.chunk_delay:
                        time.sleep(reply.chunk_delay)
                    head = f"event: {event}\n" if event else ""
                    self.wfile.write(f"{head}data: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                if reply.done:
                    self.wfile.write(f"data: {reply.done}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the CLI gave up on this answer (interrupted, or timed out)

    return Handler


@dataclass
class Reply:
    label: str
    turn: bool
    status: int = 200
    body: object = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[tuple[str, dict]] | None = None  # a server-sent event stream instead of a JSON body
    done: str = ""  # a last `data:` line that is no JSON (Chat Completions' `[DONE]`)
    hold: threading.Event | None = None
    chunk_delay: float = 0.0


# --- the providers ------------------------------------------------------------------------------------------


class Dialect:
    name = ""
    shell_tools: tuple[str, ...] = ()

    def answer(self, server: ModelServer, path: str, body: dict) -> Reply:
        raise NotImplementedError

    def play(self, server: ModelServer, body: dict, stream: bool) -> Reply:
        """One turn of the agent's loop: the script's next step, in this provider's shapes."""
        step = server._next_step()
        if step is None:
            step = server.then(body) if server.then else Text(server.default)
        if isinstance(step, Fail):
            status, headers, error = self.failure(step)
            return Reply(f"fail {step.kind} {status}", True, status, error, headers, hold=step.hold)
        if isinstance(step, Tool):
            name = self.tool_name(step.name, self.offered_tools(body))
            return self.tool_reply(name, step.input, stream, step.hold, step.chunk_delay)
        return self.text_reply(step.text, stream, True, step.hold, step.chunk_delay)

    def tool_name(self, wanted: str, offered: list[str]) -> str:
        if wanted == "shell":
            return next((t for t in self.shell_tools if t in offered), self.shell_tools[0])
        if wanted.startswith("mcp:"):
            _, server, tool = wanted.split(":", 2)
            found = [t for t in offered if t.endswith(tool) and server in t.removesuffix(tool)]
            return found[0] if found else f"mcp__{server}__{tool}"
        return wanted

    def offered_tools(self, body: dict) -> list[str]:
        raise NotImplementedError

    def tool_result_sent(self, body: dict) -> bool:
        raise NotImplementedError

    def text_reply(
        self, text: str, stream: bool, turn: bool, hold: threading.Event | None = None, delay: float = 0.0
    ) -> Reply:
        raise NotImplementedError

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        raise NotImplementedError

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        raise NotImplementedError

    def usage_headers(self, usage: Usage, since: float) -> dict[str, str]:
        """What the provider's responses say of its rate-limit windows (nothing, for most); the resets count
        from `since` (epoch seconds)."""
        return {}

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        """Put `sent` into the usage fields of this answer's body or events, as the provider spells them."""


def pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def fresh_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def http_date(seconds_from_now: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.cache
def _dialects() -> tuple[Dialect, ...]:
    """One of each provider's dialect (their modules build on this one's `Dialect`: imported here, once)."""
    from teleclaude.demo.dialect_anthropic import Anthropic
    from teleclaude.demo.dialect_gemini import Gemini
    from teleclaude.demo.dialect_openai import ChatCompletions, OpenAIResponses

    return (Anthropic(), OpenAIResponses(), Gemini(), ChatCompletions())


def _dialect_for(method: str, path: str) -> Dialect | None:
    if method != "POST":
        return _dialects()[1] if path.endswith("/models") else None
    if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
        return _dialects()[0]
    if path.endswith("/responses"):
        return _dialects()[1]
    if path.endswith("/chat/completions"):
        return _dialects()[3]
    if ":generateContent" in path or ":streamGenerateContent" in path or ":countTokens" in path:
        return _dialects()[2]
    return None
