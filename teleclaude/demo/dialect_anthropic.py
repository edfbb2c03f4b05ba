"""The scripted model server's Anthropic Messages API answers (as Claude Code asks for them)."""

from __future__ import annotations

import json
import threading
import time

from teleclaude.demo.model_server import (
    FAILURES,
    Dialect,
    Fail,
    ModelServer,
    Reply,
    Sent,
    Usage,
    estimated_tokens,
    fresh_id,
    http_date,
    pieces,
)


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
        # the last user message; claude 2.1.332 may put a `system` one after it (its MCP tools, connected
        # late, announced as deferred tools)
        users = [m for m in body.get("messages") or () if isinstance(m, dict) and m.get("role") != "system"]
        content = users[-1].get("content") if users and users[-1].get("role") == "user" else None
        return isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )

    def _message(self, model: str) -> dict:
        return {
            "id": fresh_id("msg_"),
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
            message = self._message(model) | {"content": [complete_block(block, deltas)], "stop_reason": stop}
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
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces(text)]
        label = "text" if turn else "side"
        return self._reply(label, turn, {"type": "text", "text": ""}, deltas, "end_turn", stream, hold, delay)

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        block = {"type": "tool_use", "id": fresh_id("toolu_"), "name": name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(json.dumps(arguments))]
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
        request_id = fresh_id("req_")
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
            reset = http_date(step.retry_after or 60)
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


def complete_block(block: dict, deltas: list[dict]) -> dict:
    if block["type"] == "text":
        return {"type": "text", "text": "".join(d["text"] for d in deltas)}
    return block | {"input": json.loads("".join(d["partial_json"] for d in deltas))}
