"""The scripted model server's Gemini API answers."""

from __future__ import annotations

import json
import threading

from teleclaude.demo.model_server import (
    FAILURES,
    QUOTA_MESSAGE,
    Dialect,
    Fail,
    ModelServer,
    Reply,
    Sent,
    pieces,
)


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
            return self.text_reply(json.dumps(sample(schema)), stream, False)
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
        parts = [{"text": piece} for piece in pieces(text)]
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


def sample(schema: dict) -> object:
    """A value that fits a JSON schema (Gemini's upper-case types too): what a side request asked for."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {key: sample(value) for key, value in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 50
    if kind == "boolean":
        return False
    return "scripted"
