"""The scripted model server's OpenAI answers: the Responses API (Codex) and Chat Completions (opencode)."""

from __future__ import annotations

import json
import threading
import time

from teleclaude.demo.model_server import (
    FAILURES,
    QUOTA_MESSAGE,
    Dialect,
    Fail,
    ModelServer,
    Reply,
    Sent,
    Usage,
    fresh_id,
    pieces,
)


def openai_usage(sent: Sent, input_key: str, output_key: str) -> dict[str, object]:
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
        usage = openai_usage(sent, "input_tokens", "output_tokens")
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
        response = {"id": fresh_id("resp_"), "object": "response", "status": "in_progress", "output": []}
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
        item_id = fresh_id("msg_")
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
            for piece in pieces(text)
        ]
        return Reply(
            "text" if turn else "side", turn, events=self._events(item, deltas), hold=hold, chunk_delay=delay
        )

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        item_id = fresh_id("fc_")
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
            "call_id": fresh_id("call_"),
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
            for piece in pieces(text)
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
        headers = {"x-request-id": fresh_id("req_")}
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


class ChatCompletions(Dialect):
    """The Chat Completions API as opencode's `@ai-sdk/openai-compatible` provider streams it (`POST
    /v1/chat/completions`, `stream: true`): its first turn of a session also asks for a title, with no
    tools (a side request)."""

    name = "chat"

    def report_tokens(self, payloads: list[object], sent: Sent) -> None:
        usage = openai_usage(sent, "prompt_tokens", "completion_tokens")
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
        chat_id = fresh_id("chatcmpl-")
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
        deltas = [{"content": piece} for piece in pieces(text)]
        return self._reply("text" if turn else "side", turn, deltas, "stop", stream, hold, delay)

    def tool_reply(
        self, name: str, arguments: dict, stream: bool, hold: threading.Event | None, delay: float
    ) -> Reply:
        if name == "bash" and "description" not in arguments:  # opencode's bash tool requires one
            arguments = arguments | {"description": str(arguments.get("command", ""))[:60]}
        call = {
            "index": 0,
            "id": fresh_id("call_"),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return self._reply(f"tool {name}", True, [{"tool_calls": [call]}], "tool_calls", stream, hold, delay)

    def failure(self, step: Fail) -> tuple[int, dict[str, str], dict]:
        status, headers, body = OpenAIResponses().failure(step)  # the same API family: the same errors
        return status, headers, body
