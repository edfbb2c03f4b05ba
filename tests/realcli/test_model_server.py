"""The scripted model server alone (no CLI): providers' shapes, the script, the errors, the record."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from teleclaude.demo.model_server import (
    Fail,
    ModelServer,
    Text,
    Tool,
    Usage,
    mcp,
    provider_of,
    shell,
    tool_result_sent,
)

TOOLS: dict[str, dict[str, object]] = {
    "anthropic": {"tools": [{"name": "Bash"}, {"name": "mcp__teleclaude__teleclaude__next_work"}]},
    "openai": {
        "tools": [{"type": "function", "name": "shell"}, {"name": "teleclaude__teleclaude__next_work"}]
    },
    "gemini": {"tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]},
    "chat": {
        "stream_options": {"include_usage": True},
        "tools": [{"type": "function", "function": {"name": "bash"}}],
    },
}
PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/responses",
    "gemini": "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
    "chat": "/v1/chat/completions",
}


def post(server: ModelServer, path: str, body: dict) -> tuple[int, dict[str, str], list[dict] | dict]:
    request = urllib.request.Request(
        server.url + path, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, headers, data = answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, json.loads(error.read())
    if headers.get("content-type") == "text/event-stream":
        return (
            status,
            headers,
            [
                json.loads(line[6:])
                for line in data.splitlines()
                if line.startswith("data: ") and line != "data: [DONE]"
            ],
        )
    return status, headers, json.loads(data)


def test_anthropic_streams_text_then_a_tool_call_and_side_requests_leave_the_script_alone():
    with ModelServer([Text("Hello there, from the script."), shell("git commit -qam x")]) as server:
        _, _, side = post(server, PATHS["anthropic"], {"stream": True, "messages": []})
        _, _, events = post(server, PATHS["anthropic"], {"stream": True, **TOOLS["anthropic"]})
        text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
        assert text == "Hello there, from the script."
        assert events[-2]["delta"]["stop_reason"] == "end_turn"
        _, _, events = post(server, PATHS["anthropic"], {"stream": True, **TOOLS["anthropic"]})
        assert events[1]["content_block"]["name"] == "Bash"
        arguments = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
        assert json.loads(arguments)["command"] == "git commit -qam x"
        assert [r.answer for r in server.requests] == ["side", "text", "tool Bash"]
        assert "OK" in json.dumps(side)


def test_an_mcp_tool_is_found_among_the_offered_tools_whatever_the_cli_calls_it():
    with ModelServer([mcp("teleclaude", "teleclaude__next_work", slug="x")] * 2) as server:
        _, _, message = post(server, PATHS["anthropic"], {"stream": False, **TOOLS["anthropic"]})
        assert isinstance(message, dict)  # not streamed: one JSON message
        assert message["content"][0]["name"] == "mcp__teleclaude__teleclaude__next_work"
        _, _, events = post(server, PATHS["openai"], {"stream": True, **TOOLS["openai"]})
        assert events[-1]["response"]["output"][0]["name"] == "teleclaude__teleclaude__next_work"


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini", "chat"])
def test_each_provider_answers_a_turn_and_a_shell_call(provider):
    with ModelServer([Text("hi"), Tool("shell", {"command": "ls"})]) as server:
        status, _, events = post(server, PATHS[provider], {"stream": True, **TOOLS[provider]})
        assert status == 200 and events
        _, _, events = post(server, PATHS[provider], {"stream": True, **TOOLS[provider]})
        assert server.turns()[-1].answer in ("tool Bash", "tool shell", "tool run_shell_command", "tool bash")


def test_codex_exec_command_gets_the_command_as_cmd():
    with ModelServer([shell("git status")]) as server:
        body = {"stream": True, "tools": [{"type": "function", "name": "exec_command"}]}
        _, _, events = post(server, PATHS["openai"], body)
        call = events[-1]["response"]["output"][0]
        assert (call["name"], json.loads(call["arguments"])) == ("exec_command", {"cmd": "git status"})


# what a `then` model reads of a turn: whose request it is, and whether its last tool call was carried out
ASKED: dict[str, tuple[dict, dict]] = {
    "anthropic": (
        {
            "system": [{"type": "text", "text": "You are Claude Code"}],
            "messages": [{"role": "user", "content": "/next-build x"}],
        },
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
    ),
    "openai": (
        {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "$x"}]}]},
        {
            "input": [
                {"type": "message", "role": "user", "content": []},
                {"type": "function_call", "name": "exec_command", "call_id": "c", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "ok"},
            ]
        },
    ),
    "gemini": (
        {"contents": [{"role": "user", "parts": [{"text": "/next-build x"}]}]},
        {
            "contents": [
                {"role": "user", "parts": [{"text": "/next-build x"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]},
            ]
        },
    ),
    "chat": (
        {"messages": [{"role": "system", "content": "You are opencode"}, {"role": "user", "content": "/x"}]},
        {
            "messages": [
                {"role": "user", "content": "/x"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "bash"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"},
            ]
        },
    ),
}


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini", "chat"])
def test_a_turn_says_whose_it_is_and_whether_it_carries_a_tool_result(provider):
    asked, answered = ASKED[provider]
    assert provider_of(asked) == provider_of(answered) == provider
    assert not tool_result_sent(asked) and tool_result_sent(answered)


def test_a_tool_result_is_read_past_claudes_system_message_after_it():
    """claude 2.1.332 puts a `system` message after the tool result when its MCP tools connected late (its
    deferred tools announced): the turn still carries the result, so a script's first-turn count holds."""
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    late = {"role": "system", "content": [{"type": "text", "text": "The following deferred tools are now"}]}
    system = [{"type": "text", "text": "You are Claude Code"}]
    turn = [{"role": "user", "content": "/next-review x"}, {"role": "assistant", "content": []}, result, late]
    assert tool_result_sent({"system": system, "messages": turn})
    asked = {"role": "user", "content": "/next-review x"}
    assert not tool_result_sent({"system": system, "messages": [*turn[:3], asked, late]})


@pytest.mark.parametrize(
    ("kind", "status", "header"),
    [
        ("rate_limit", 429, "anthropic-ratelimit-requests-remaining"),
        ("session_limit", 429, "anthropic-ratelimit-unified-representative-claim"),
        ("overloaded", 529, "retry-after"),
        ("unavailable", 503, "retry-after"),
        ("billing", 400, "request-id"),
    ],
)
def test_anthropic_failures_carry_the_real_status_headers_and_body(kind, status, header):
    with ModelServer([Fail(kind, repeat=2)]) as server:
        for _ in range(2):  # the CLI's retry meets the same failure
            got, headers, body = post(server, PATHS["anthropic"], TOOLS["anthropic"])
            assert isinstance(body, dict) and (got, body["type"]) == (status, "error")
            assert header in headers
        assert post(server, PATHS["anthropic"], TOOLS["anthropic"])[0] == 200  # then the script goes on


def test_chat_completions_streams_text_and_a_bash_call_the_way_opencode_reads_them():
    """opencode's provider: a title request (no tools) is a side request; a turn streams chunks, a tool call
    is one delta of `tool_calls` with `finish_reason: tool_calls`, and a 429 keeps its Retry-After."""
    with ModelServer([Text("Hello from the script."), shell("touch done.txt"), Fail("rate_limit")]) as server:
        _, _, side = post(server, PATHS["chat"], {"stream": True, "messages": []})
        _, headers, events = post(server, PATHS["chat"], {"stream": True, **TOOLS["chat"]})
        assert isinstance(events, list) and headers["content-type"] == "text/event-stream"
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
        assert text == "Hello from the script." and events[-1]["choices"][0]["finish_reason"] == "stop"
        _, _, events = post(server, PATHS["chat"], {"stream": True, **TOOLS["chat"]})
        assert isinstance(events, list)
        call = events[0]["choices"][0]["delta"]["tool_calls"][0]
        assert (
            call["function"]["name"] == "bash" and events[-1]["choices"][0]["finish_reason"] == "tool_calls"
        )
        assert json.loads(call["function"]["arguments"])["command"] == "touch done.txt"
        status, headers, error = post(server, PATHS["chat"], {"stream": True, **TOOLS["chat"]})
        assert (status, headers["retry-after"]) == (429, "20") and isinstance(error, dict) and error["error"]
        assert [r.answer for r in server.requests] == ["side", "text", "tool bash", "fail rate_limit 429"]
        assert all(r.provider == "chat" for r in server.requests) and isinstance(side, list)


def test_a_held_step_answers_when_the_test_releases_it_and_wait_for_sees_the_request():
    release = threading.Event()
    with ModelServer([Text("late", hold=release)]) as server:
        answers = []
        client = threading.Thread(
            target=lambda: answers.append(post(server, PATHS["gemini"], TOOLS["gemini"]))
        )
        client.start()
        seen = server.wait_for(lambda r: r.turn, timeout=5)
        assert seen.provider == "gemini" and answers == []
        release.set()
        client.join(5)
        assert answers[0][2][-1]["candidates"][0]["finishReason"] == "STOP"
        with pytest.raises(TimeoutError, match="no matching request"):
            server.wait_for(lambda r: r.path == "/never", timeout=0.1)


def test_each_answer_carries_the_usage_headers_its_provider_sends_from_the_turn_that_takes_them_on():
    """claude's and codex's providers report their windows on every response; the reset stays where it was
    set (a real window's reset does not move); gemini's and opencode's providers report nothing."""
    script = [
        Text("a"),
        Text("b", usage=Usage(five_hour=0.5, seven_day=0.25, five_hour_resets_in=600)),
        Text("c"),
    ]
    with ModelServer(script * 2) as server:
        heard = {}
        for provider in ("anthropic", "openai"):
            answers = [
                post(server, PATHS[provider], {"stream": True, **TOOLS[provider]})[1] for _ in range(3)
            ]
            heard[provider] = [{k.lower(): v for k, v in h.items()} for h in answers]
            server.usage = None
        claude = heard["anthropic"]
        assert not any(k.startswith("anthropic-ratelimit") for k in claude[0])  # before the step that sets it
        assert (
            claude[1]["anthropic-ratelimit-unified-5h-utilization"],
            claude[1]["anthropic-ratelimit-unified-7d-utilization"],
        ) == ("0.5", "0.25")
        assert (
            claude[2]["anthropic-ratelimit-unified-5h-reset"]
            == claude[1]["anthropic-ratelimit-unified-5h-reset"]
        )
        codex = heard["openai"]
        assert (codex[1]["x-codex-primary-used-percent"], codex[1]["x-codex-secondary-used-percent"]) == (
            "50",
            "25",
        )
        assert (codex[1]["x-codex-primary-window-minutes"], codex[1]["x-codex-secondary-window-minutes"]) == (
            "300",
            "10080",
        )
        assert codex[2]["x-codex-primary-reset-at"] == codex[1]["x-codex-primary-reset-at"]
        server.usage = Usage(five_hour=0.9)
        for provider in ("gemini", "chat"):
            _, headers, _ = post(server, PATHS[provider], {**TOOLS[provider]})
            assert not any("ratelimit" in k.lower() or k.lower().startswith("x-codex") for k in headers)
