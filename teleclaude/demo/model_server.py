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
        dialect = next((d for d in _DIALECTS if d.name == self.provider), None)
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
    return next(d for d in _DIALECTS if d.name == provider_of(body)).tool_result_sent(body)


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


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def _http_date(seconds_from_now: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Anthropic(Dialect):
    """The Messages API as Claude Code uses it (its SDK streams; side requests may not)."""

    name = "anthropic"
    shell_tools = ("Bash",)

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        usage = {
            "input_tokens": sent.input - sent.cached,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": sent.cached,
            "output_tokens": sent.output,
        }
        for payload in payloads:
            if not isinstance(payload, dict):
                continue
            message = payload.get("message") if payload.get("type") == "message_start" else payload
            if isinstance(message, dict) and "usage" in message:
                message["usage"] = dict(usage) | ({"output_tokens": 1} if message is not payload else {})
            if payload.get("type") == "message_delta":
                payload["usage"] = dict(usage)

    def answer(self, server: ModelServer, path: str, body: dict) -> Reply:
        if path.endswith("/count_tokens"):
            return Reply("count", False, body={"input_tokens": estimated_tokens(body)})
        stream = bool(body.get("stream"))
        if self.offered_tools(body):
            return self.play(server, body, stream)
        return self.text_reply("OK", stream, False)

    def offered_tools(self, body: dict) -> list[str]:
        return [t.get("name", "") for t in body.get("tools") or () if isinstance(t, dict)]

    def tool_result_sent(self, body: dict) -> bool:
        messages = body.get("messages") or [{}]
        content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
        return isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )

    def _message(self, model: str) -> dict:
        return {
            "id": _id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }

    def _reply(
        self,
        label: str,
        turn: bool,
        block: dict,
        deltas: list[dict],
        stop: str,
        stream: bool,
        hold: threading.Event | None,
        delay: float,
    ) -> Reply:
        model = "claude-scripted"
        if not stream:
            message = self._message(model) | {"content": [_complete(block, deltas)], "stop_reason": stop}
            return Reply(label, turn, body=message, hold=hold)
        events: list[tuple[str, dict]] = [
            ("message_start", {"type": "message_start", "message": self._message(model)}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("ping", {"type": "ping"}),
            *[
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d})
                for d in deltas
            ],
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return Reply(label, turn, events=events, hold=hold, chunk_delay=delay)

    def text_reply(
        self, text: str, stream: bool, turn: bool, hold: threading.Event | None = None, delay: float = 0.0
    ) -> Reply:
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(text)]
        label = "text" if turn else "side"
        return self._reply(label, turn, {"type": "text", "text": ""}, deltas, "end_turn", stream, hold, delay)

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        block = {"type": "tool_use", "id": _id("toolu_"), "name": name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(arguments))]
        return self._reply(f"tool {name}", True, block, deltas, "tool_use", stream, hold, delay)

    def usage_headers(self, usage: Usage, since: float) -> dict[str, str]:
        """A subscriber's unified rate-limit headers (Claude Code 2.1 reads them only for an OAuth login)."""
        now = int(since)
        windows = [
            (claim, short, used, now + resets)
            for claim, short, used, resets in (
                ("five_hour", "5h", usage.five_hour, usage.five_hour_resets_in),
                ("seven_day", "7d", usage.seven_day, usage.seven_day_resets_in),
            )
            if used is not None
        ]
        if not windows:
            return {}
        claim, _, _, reset = max(windows, key=lambda window: window[2])
        headers = {
            "anthropic-ratelimit-unified-status": "allowed",
            "anthropic-ratelimit-unified-reset": str(reset),
            "anthropic-ratelimit-unified-representative-claim": claim,
            "anthropic-ratelimit-unified-fallback": "unavailable",
        }
        for _, short, used, resets_at in windows:
            headers[f"anthropic-ratelimit-unified-{short}-utilization"] = f"{used:g}"
            headers[f"anthropic-ratelimit-unified-{short}-reset"] = str(resets_at)
            headers[f"anthropic-ratelimit-unified-{short}-status"] = (
                "allowed_warning" if used >= 0.8 else "allowed"
            )
        return headers

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        request_id = _id("req_")
        headers = {"request-id": request_id, "x-should-retry": "true"}
        resets = step.resets_at or int(time.time()) + step.resets_in
        claims = {
            "session_limit": "five_hour",
            "weekly_limit": "seven_day",
            "opus_limit": "seven_day_opus",
            "sonnet_limit": "seven_day_sonnet",
        }
        if step.kind == "rate_limit":
            status, kind = 429, "rate_limit_error"
            message = (
                "This request would exceed the rate limit for your organization "
                "(00000000-0000-0000-0000-000000000000) of 50 input tokens per minute. For details, "
                "refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for "
                "current usage. Please reduce the prompt length or the maximum tokens requested, or try "
                "again later. You may also contact sales at https://www.anthropic.com/contact-sales to "
                "discuss your options for a rate limit increase."
            )
            reset = _http_date(step.retry_after or 60)
            for limit in ("requests", "input-tokens", "output-tokens", "tokens"):
                headers[f"anthropic-ratelimit-{limit}-limit"] = "50"
                headers[f"anthropic-ratelimit-{limit}-remaining"] = "0"
                headers[f"anthropic-ratelimit-{limit}-reset"] = reset
        elif step.kind in claims:
            status, kind = 429, "rate_limit_error"
            message = "Rate limited. Please try again later."  # the subscription limit speaks in headers
            headers |= {
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": str(resets),
                "anthropic-ratelimit-unified-representative-claim": claims[step.kind],
                "anthropic-ratelimit-unified-fallback": "unavailable",
                "anthropic-ratelimit-unified-overage-status": "rejected",
                "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
                f"anthropic-ratelimit-unified-{claims[step.kind].replace('_', '-')}-status": "rejected",
                f"anthropic-ratelimit-unified-{claims[step.kind].replace('_', '-')}-reset": str(resets),
                f"anthropic-ratelimit-unified-{claims[step.kind].replace('_', '-')}-utilization": "1.0",
            }
        elif step.kind == "overloaded":
            status, kind, message = 529, "overloaded_error", "Overloaded"
        elif step.kind == "unavailable":
            status, kind, message = 503, "api_error", "Service Unavailable"
        elif step.kind == "server_error":
            status, kind, message = 500, "api_error", "Internal server error"
        elif step.kind in ("quota", "billing"):
            status, kind = 400, "invalid_request_error"
            message = (
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
                "upgrade or purchase credits."
            )
            headers["x-should-retry"] = "false"
        else:
            raise ValueError(f"unknown failure {step.kind!r}; one of {', '.join(FAILURES)}")
        if step.retry_after is not None and status in (429, 529, 503):
            headers["retry-after"] = str(step.retry_after)
        return (
            status,
            headers,
            {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id},
        )


def _complete(block: dict, deltas: list[dict]) -> dict:
    if block["type"] == "text":
        return {"type": "text", "text": "".join(d["text"] for d in deltas)}
    return block | {"input": json.loads("".join(d["partial_json"] for d in deltas))}


def _openai_usage(sent: Sent, input_key: str, output_key: str) -> dict[str, object]:
    """OpenAI's usage object, under the Responses API's names or Chat Completions' (`prompt_tokens`, …)."""
    return {
        input_key: sent.input,
        f"{input_key}_details": {"cached_tokens": sent.cached},
        output_key: sent.output,
        f"{output_key}_details": {"reasoning_tokens": sent.reasoning},
        "total_tokens": sent.input + sent.output,
    }


class OpenAIResponses(Dialect):
    """The Responses API as Codex streams it (`POST /v1/responses`, `stream: true`)."""

    name = "openai"
    shell_tools = ("shell", "exec_command", "shell_command", "local_shell")

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        usage = _openai_usage(sent, "input_tokens", "output_tokens")
        for payload in payloads:
            response = payload.get("response") if isinstance(payload, dict) else None
            if isinstance(response, dict) and "usage" in response:
                response["usage"] = usage

    def answer(self, server: ModelServer, path: str, body: dict) -> Reply:
        if path.endswith("/models"):
            return Reply("models", False, body={"object": "list", "data": [], "models": []})
        stream = body.get("stream", True) is not False
        if self.offered_tools(body):
            return self.play(server, body, stream)
        return self.text_reply("OK", stream, False)

    def offered_tools(self, body: dict) -> list[str]:
        names = []
        for tool in body.get("tools") or ():
            if isinstance(tool, dict):
                names.append(tool.get("name") or tool.get("function", {}).get("name") or tool.get("type", ""))
                # codex 0.169 offers each MCP server's tools in a namespace (`mcp__teleclaude`): listed as
                # NAMESPACE.TOOL, and called with the namespace in its own field (tool_reply)
                if tool.get("type") == "namespace":
                    names += [f"{tool['name']}.{t['name']}" for t in tool.get("tools") or () if "name" in t]
        return names

    def tool_result_sent(self, body: dict) -> bool:
        for item in reversed(body.get("input") or ()):  # `function_call_output` after the `function_call`
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
                return True
            if isinstance(item, dict) and item.get("role") == "user":
                return False
        return False

    def _events(self, item: dict, deltas: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
        response = {"id": _id("resp_"), "object": "response", "status": "in_progress", "output": []}
        done = response | {
            "status": "completed",
            "output": [item],
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 12,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 22,
            },
        }
        started = {k: v for k, v in item.items() if k not in ("content", "arguments")}
        if item["type"] == "message":
            started["content"] = []
        else:
            started["arguments"] = ""
        return [
            ("response.created", {"type": "response.created", "response": response}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": started},
            ),
            *deltas,
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]

    def text_reply(
        self, text: str, stream: bool, turn: bool, hold: threading.Event | None = None, delay: float = 0.0
    ) -> Reply:
        item_id = _id("msg_")
        item = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        deltas = [
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                },
            )
            for piece in _pieces(text)
        ]
        return Reply(
            "text" if turn else "side", turn, events=self._events(item, deltas), hold=hold, chunk_delay=delay
        )

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        item_id = _id("fc_")
        if (
            name in ("shell", "local_shell")
            and "command" in arguments
            and isinstance(arguments["command"], str)
        ):
            arguments = arguments | {"command": ["bash", "-lc", arguments["command"]]}
        if name == "exec_command" and "command" in arguments:  # codex 0.169: `{"cmd": "…"}` (a PTY)
            arguments = {"cmd": arguments["command"]} | {k: v for k, v in arguments.items() if k != "command"}
        arguments = {k: v for k, v in arguments.items() if k != "description"}
        text = json.dumps(arguments)
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": _id("call_"),
            "name": name.rpartition(".")[2],
            **({"namespace": name.rpartition(".")[0]} if "." in name else {}),
            "arguments": text,
            "status": "completed",
        }
        deltas = [
            (
                "response.function_call_arguments.delta",
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item_id,
                    "output_index": 0,
                    "delta": piece,
                },
            )
            for piece in _pieces(text)
        ]
        return Reply(f"tool {name}", True, events=self._events(item, deltas), hold=hold, chunk_delay=delay)

    def usage_headers(self, usage: Usage, since: float) -> dict[str, str]:
        """What ChatGPT's codex backend sends on each response (codex 0.169 reads them for any provider)."""
        now, headers = int(since), {}
        for name, used, minutes, resets in (
            ("primary", usage.five_hour, 300, usage.five_hour_resets_in),
            ("secondary", usage.seven_day, 7 * 24 * 60, usage.seven_day_resets_in),
        ):
            if used is not None:
                headers[f"x-codex-{name}-used-percent"] = f"{used * 100:g}"
                headers[f"x-codex-{name}-window-minutes"] = str(minutes)
                headers[f"x-codex-{name}-reset-at"] = str(now + resets)
        return headers

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        headers = {"x-request-id": _id("req_")}
        resets = step.resets_at or int(time.time()) + step.resets_in
        error: dict[str, object]
        if step.kind == "rate_limit":
            status = 429
            error = {
                "type": "requests",
                "code": "rate_limit_exceeded",
                "param": None,
                "message": "Rate limit reached for requests. Please try again in 20s.",
            }
        elif step.kind in ("session_limit", "weekly_limit", "opus_limit", "sonnet_limit", "quota"):
            status = 429
            error = {
                "type": "usage_limit_reached",
                "message": "The usage limit has been reached",
                "plan_type": "plus",
                "resets_at": resets,
                "resets_in_seconds": step.resets_in,
            }
        elif step.kind == "billing":
            status = 429
            error = {
                "type": "insufficient_quota",
                "code": "insufficient_quota",
                "param": None,
                "message": QUOTA_MESSAGE,
            }
        elif step.kind in ("overloaded", "unavailable"):
            status = 503
            error = {
                "type": "server_error",
                "code": "server_is_overloaded",
                "param": None,
                "message": "Our servers are currently overloaded. Please try again later.",
            }
        elif step.kind == "server_error":
            status = 500
            error = {
                "type": "server_error",
                "code": None,
                "param": None,
                "message": "The server had an error while processing your request.",
            }
        else:
            raise ValueError(f"unknown failure {step.kind!r}; one of {', '.join(FAILURES)}")
        if step.retry_after is not None and status in (429, 503):
            headers["retry-after"] = str(step.retry_after)
        return status, headers, {"error": error}


class Gemini(Dialect):
    """The Gemini API (`models/MODEL:generateContent`, `:streamGenerateContent?alt=sse`, `:countTokens`)."""

    name = "gemini"
    shell_tools = ("run_shell_command",)

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        usage = {
            "promptTokenCount": sent.input,
            "cachedContentTokenCount": sent.cached,
            "candidatesTokenCount": sent.output - sent.reasoning,
            "thoughtsTokenCount": sent.reasoning,
            "totalTokenCount": sent.input + sent.output,
        }
        for payload in payloads:
            if isinstance(payload, dict) and "usageMetadata" in payload:
                payload["usageMetadata"] = dict(usage)

    def answer(self, server: ModelServer, path: str, body: dict) -> Reply:
        if path.endswith(":countTokens"):
            return Reply("count", False, body={"totalTokens": max(1, len(json.dumps(body)) // 4)})
        stream = path.endswith(":streamGenerateContent")
        if self.offered_tools(body):
            return self.play(server, body, stream)
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":  # the CLI's model router and checkers
            schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
            return self.text_reply(json.dumps(_sample(schema)), stream, False)
        return self.text_reply("OK", stream, False)

    def offered_tools(self, body: dict) -> list[str]:
        names = []
        for tool in body.get("tools") or ():
            for declaration in (tool or {}).get("functionDeclarations") or ():
                names.append(declaration.get("name", ""))
        return names

    def tool_result_sent(self, body: dict) -> bool:
        for content in reversed(body.get("contents") or ()):  # a user content of `functionResponse` parts
            parts = [p for p in (content or {}).get("parts") or () if isinstance(p, dict)]
            if any("functionResponse" in part for part in parts):
                return True
            if (content or {}).get("role") == "user":
                return False
        return False

    def _reply(
        self,
        label: str,
        turn: bool,
        parts: list[dict],
        stream: bool,
        hold: threading.Event | None,
        delay: float,
    ) -> Reply:
        def chunk(part_list: list[dict], finish: str | None) -> dict:
            candidate: dict = {"content": {"role": "model", "parts": part_list}, "index": 0}
            if finish:
                candidate["finishReason"] = finish
            return {
                "candidates": [candidate],
                "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 12, "totalTokenCount": 22},
                "modelVersion": "gemini-scripted",
            }

        if not stream:
            return Reply(label, turn, body=chunk(parts, "STOP"), hold=hold)
        events = [("", chunk([part], None)) for part in parts[:-1]] + [("", chunk(parts[-1:], "STOP"))]
        return Reply(label, turn, events=events, hold=hold, chunk_delay=delay)

    def text_reply(
        self, text: str, stream: bool, turn: bool, hold: threading.Event | None = None, delay: float = 0.0
    ) -> Reply:
        parts = [{"text": piece} for piece in _pieces(text)]
        return self._reply("text" if turn else "side", turn, parts, stream, hold, delay)

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        return self._reply(
            f"tool {name}", True, [{"functionCall": {"name": name, "args": arguments}}], stream, hold, delay
        )

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        if step.kind in (
            "rate_limit",
            "session_limit",
            "weekly_limit",
            "opus_limit",
            "sonnet_limit",
            "quota",
        ):
            status, code = 429, "RESOURCE_EXHAUSTED"
            daily = step.kind != "rate_limit"
            quota_id = f"GenerateRequestsPer{'Day' if daily else 'Minute'}PerProjectPerModel"
            message = (
                f"{QUOTA_MESSAGE} For more "
                "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
            )
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                            "quotaId": quota_id,
                        }
                    ],
                },
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{step.retry_after or 20}s",
                },
            ]
        elif step.kind in ("overloaded", "unavailable"):
            status, code, details = 503, "UNAVAILABLE", []
            message = "The model is overloaded. Please try again later."
        elif step.kind == "server_error":
            status, code, details = 500, "INTERNAL", []
            message = (
                "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting"
            )
        elif step.kind == "billing":
            status, code, details = 403, "PERMISSION_DENIED", []
            message = "Your project has been denied access. Please contact support."
        else:
            raise ValueError(f"unknown failure {step.kind!r}; one of {', '.join(FAILURES)}")
        headers = {"retry-after": str(step.retry_after)} if step.retry_after is not None else {}
        return (
            status,
            headers,
            {"error": {"code": status, "message": message, "status": code, "details": details}},
        )


class ChatCompletions(Dialect):
    """The Chat Completions API as opencode's `@ai-sdk/openai-compatible` provider streams it (`POST
    /v1/chat/completions`, `stream: true`): its first turn of a session also asks for a title, with no
    tools (a side request)."""

    name = "chat"

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        usage = _openai_usage(sent, "prompt_tokens", "completion_tokens")
        for payload in payloads:
            if isinstance(payload, dict) and "usage" in payload:
                payload["usage"] = dict(usage)

    shell_tools = ("bash",)

    def answer(self, server: ModelServer, path: str, body: dict) -> Reply:
        stream = body.get("stream") is True
        if self.offered_tools(body):
            return self.play(server, body, stream)
        return self.text_reply("OK", stream, False)

    def offered_tools(self, body: dict) -> list[str]:
        return [
            str((tool.get("function") or {}).get("name", ""))
            for tool in body.get("tools") or ()
            if isinstance(tool, dict)
        ]

    def tool_result_sent(self, body: dict) -> bool:
        messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
        return bool(messages) and messages[-1].get("role") == "tool"

    def _reply(
        self,
        label: str,
        turn: bool,
        deltas: list[dict],
        finish: str,
        stream: bool,
        hold: threading.Event | None,
        delay: float,
    ) -> Reply:
        chat_id = _id("chatcmpl-")
        usage = {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}

        def chunk(delta: dict, finish_reason: str | None) -> dict:
            return {
                "id": chat_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": "scripted-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        if not stream:
            message: dict = {"role": "assistant", "content": "".join(d.get("content", "") for d in deltas)}
            calls = [call for d in deltas for call in d.get("tool_calls", ())]
            if calls:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
            body = {
                "id": chat_id,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "scripted-model",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            return Reply(label, turn, body=body, hold=hold)
        events = [("", chunk({"role": "assistant", **delta}, None)) for delta in deltas]
        events += [("", chunk({}, finish) | {"usage": usage})]
        return Reply(label, turn, events=events, hold=hold, chunk_delay=delay, done="[DONE]")

    def text_reply(
        self, text: str, stream: bool, turn: bool, hold: threading.Event | None = None, delay: float = 0.0
    ) -> Reply:
        deltas = [{"content": piece} for piece in _pieces(text)]
        return self._reply("text" if turn else "side", turn, deltas, "stop", stream, hold, delay)

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        if name == "bash" and "description" not in arguments:  # opencode's bash tool requires one
            arguments = arguments | {"description": str(arguments.get("command", ""))[:60]}
        call = {
            "index": 0,
            "id": _id("call_"),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return self._reply(f"tool {name}", True, [{"tool_calls": [call]}], "tool_calls", stream, hold, delay)

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        status, headers, body = OpenAIResponses().failure(step)  # the same API family: the same errors
        return status, headers, body


def _sample(schema: dict) -> object:
    """A value that fits a JSON schema (Gemini's upper-case types too): what a side request asked for."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {key: _sample(value) for key, value in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 50
    if kind == "boolean":
        return False
    return "scripted"


_DIALECTS = (Anthropic(), OpenAIResponses(), Gemini(), ChatCompletions())


def _dialect_for(method: str, path: str) -> Dialect | None:
    if method != "POST":
        return _DIALECTS[1] if path.endswith("/models") else None
    if path.endswith("/messages") or path.endswith("/messages/count_tokens"):
        return _DIALECTS[0]
    if path.endswith("/responses"):
        return _DIALECTS[1]
    if path.endswith("/chat/completions"):
        return _DIALECTS[3]
    if ":generateContent" in path or ":streamGenerateContent" in path or ":countTokens" in path:
        return _DIALECTS[2]
    return None
