"""Quota foresight, recorded: each real agent CLI against the scripted model server, whose answers carry the
rate-limit headers a provider sends (`Usage`), reports its usage to teleclaude before any limit, and the
recorded usage follows the headers turn by turn. One scenario for every driver; a driver that reads no usage
says why (`UsageReport.lacking`), and its case skips with that reason.

Claude Code reads the unified headers only for a subscriber (an OAuth login), so its workers get
`CLAUDE_CODE_OAUTH_TOKEN` instead of an API key here; codex reads its `x-codex-*` headers for any provider.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.agents import NAMES, PROFILES
from teleclaude.demo.model_server import Text, Usage
from teleclaude.errors import Error
from teleclaude.runtime.core.sessions import Started, StartRequest

from .watching import screen, turn_ended, with_env

OAUTH_TOKEN = "sk-ant-oat01-teleclaude-scripted-model-server"  # a subscriber's login
RUNTIMES = {
    "claude": "runtime",
    "codex": "codex_runtime",
    "gemini": "gemini_runtime",
    "opencode": "opencode_runtime",
}
WINDOWS = {"claude": ("5h", "7d"), "codex": ("primary", "secondary")}  # five-hour, weekly: each CLI's names


def recorded(agent: str) -> dict[str, float]:
    windows = AvailabilityStore().usage(datetime.now(UTC)).get(agent, ())
    return {w.window: w.used_percent for w in windows}


def wait_recorded(agent: str, expected: dict[str, float], seconds: float = 60.0) -> None:
    """Waits for the recorded usage to be `expected` (a status line runs a moment after the answer)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if recorded(agent) == expected:
            return
        time.sleep(0.2)
    assert recorded(agent) == expected


@pytest.mark.parametrize("agent", NAMES)
def test_the_recorded_usage_follows_the_providers_headers_turn_by_turn(agent, request, project, model_server):
    usage = PROFILES[agent].usage
    if usage.read is None:
        pytest.skip(usage.lacking)
    runtime = request.getfixturevalue(RUNTIMES[agent])
    if agent == "claude":
        with_env(runtime, "claude", ANTHROPIC_API_KEY=None, CLAUDE_CODE_OAUTH_TOKEN=OAUTH_TOKEN)
    five_hour, weekly = WINDOWS[agent]
    rising = (0.5, 0.8, 0.95)
    model_server.add(*(Text(f"turn {n}", usage=Usage(used, 0.2 + n / 100)) for n, used in enumerate(rising)))
    assert recorded(agent) == {}
    started = runtime.run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), agent, "med")
    )
    assert isinstance(started, Started), started
    session_id = started.session.id
    for n, used in enumerate(rising):
        if n:
            sent = runtime.send_message(session_id, f"go on ({n})")
            assert not isinstance(sent, Error), sent
        turn_ended(runtime, session_id)
        try:
            wait_recorded(agent, {five_hour: used * 100, weekly: 20.0 + n})
        except AssertionError:
            print(screen(runtime, runtime.store.get(session_id)))
            raise
    windows = {w.window: w for w in AvailabilityStore().usage(datetime.now(UTC))[agent]}
    resets = windows[five_hour].resets_at
    assert resets is not None and 3500 < (resets - windows[five_hour].seen_at).total_seconds() < 3700
