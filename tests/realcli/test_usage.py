"""Quota foresight, recorded: each real agent CLI against the scripted model server, whose answers carry the
rate-limit headers a provider sends (`Usage`), reports its usage to teleclaude before any limit, and the
recorded usage follows the headers turn by turn. One scenario for every driver; a driver that reads no usage
says why (`UsageReport.lacking`), and its case skips with that reason.

Claude Code reads the unified headers only for a subscriber (an OAuth login), so its workers get
`CLAUDE_CODE_OAUTH_TOKEN` instead of an API key here; codex reads its `x-codex-*` headers for any provider.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.agents import NAMES, PROFILES
from teleclaude.demo.model_server import Text, Usage
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import Started, StartRequest

from .conftest import OAUTH_TOKEN, codex_keeps_todays_clock, trusted
from .watching import screen, turn_ended, with_env

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


def wait_recorded(runtime, agent: str, expected: dict[str, float], seconds: float = 60.0) -> None:
    """Waits for the recorded usage to be `expected` (a status line runs a moment after the answer), the
    runtime looking at its workers meanwhile (a sandboxed worker's hook leaves its usage in its channel,
    which a look records)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if recorded(agent) == expected:
            return
        runtime.list_sessions()
        time.sleep(0.2)
    assert recorded(agent) == expected


@pytest.mark.parametrize("agent", NAMES)
def test_the_recorded_usage_follows_the_providers_headers_turn_by_turn(agent, request, project, model_server):
    usage = PROFILES[agent].usage
    if usage.read is None:
        pytest.skip(usage.lacking)
    codex_keeps_todays_clock(agent)
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
            wait_recorded(runtime, agent, {five_hour: used * 100, weekly: 20.0 + n})
        except AssertionError:
            print(screen(runtime, runtime.store.get(session_id)))
            raise
    windows = {w.window: w for w in AvailabilityStore().usage(datetime.now(UTC))[agent]}
    resets = windows[five_hour].resets_at
    assert resets is not None and 3500 < (resets - windows[five_hour].seen_at).total_seconds() < 3700


# --- planned around: the next build goes to the next agent before any 429, and back at the reset ----------

# seconds from claude's answer to its window's reset: enough for its turn to end, its usage to be recorded and
# the next build to be chosen on a loaded machine; codex's build and the wait for the reset overlap
RESET_IN = 20


def build_by(project, *agents: str) -> None:
    with (project / "teleclaude.toml").open("a") as settings:
        settings.write(f"[matrix]\nbuild = {json.dumps([f'{a}:med' for a in agents])}\n")
    trusted(project)  # the file changed: trusted again in its new content
    commit_all(project, "Builds by " + ", then ".join(agents))


def build(
    runtime,
    project,
    model_server,
    provider: str,
    turns: int,
    usage: tuple[str, dict[str, float]] | None = None,
    chosen_before: datetime | None = None,
) -> None:
    """The planner's next step (chosen before `chosen_before`, when given), started: its CLI's request
    reaches the server as turn `turns`, from `provider`; then its turn ends, the `usage` it reports is
    recorded (claude runs its status line a moment after the answer), and the session is ended (the build
    is not done: it is asked again)."""
    dispatch = app.next_work(cwd=project)
    assert isinstance(dispatch, Dispatch) and dispatch.command == "next-build", dispatch
    assert chosen_before is None or datetime.now(UTC) < chosen_before, "chosen too late to tell"
    started = runtime.start(dispatch)
    assert isinstance(started, Started), started
    model_server.wait_for(lambda r: r.turn and len(model_server.turns()) >= turns, timeout=120)
    assert model_server.turns()[turns - 1].provider == provider  # which agent's server got the step
    turn_ended(runtime, started.session.id)
    if usage is not None:
        wait_recorded(runtime, *usage)
    ended = runtime.end_session(started.session.id)
    assert not isinstance(ended, Error), ended


def test_at_95_percent_the_next_build_goes_to_the_next_agent_before_any_429_and_comes_back_at_the_reset(
    runtime, codex, project, model_server
):
    """claude's answer says its five-hour window is 95 % used (over the default headroom, 90 %): the next
    build goes to codex, the row's next agent, though claude was never refused; once that window has reset,
    builds go to claude again, with no one touching anything."""
    with_env(runtime, "claude", ANTHROPIC_API_KEY=None, CLAUDE_CODE_OAUTH_TOKEN=OAUTH_TOKEN)
    build_by(project, "claude", "codex")
    model_server.add(
        Text("Not built yet.", usage=Usage(five_hour=0.95, five_hour_resets_in=RESET_IN)),
        Text("Not built yet either.", usage=Usage()),  # codex's answer reports no window
        Text("Back on claude."),
    )
    build(runtime, project, model_server, "anthropic", 1, usage=("claude", {"5h": 95.0}))
    (window,) = AvailabilityStore().usage(datetime.now(UTC))["claude"]
    assert window.resets_at is not None
    # at 95 %: codex, before any 429, chosen while claude's window is still on
    build(runtime, project, model_server, "openai", 2, chosen_before=window.resets_at)
    time.sleep(max(0.0, (window.resets_at - datetime.now(UTC)).total_seconds()) + 1)
    build(runtime, project, model_server, "anthropic", 3)  # the window reset: claude again
    assert [r.provider for r in model_server.turns()] == ["anthropic", "openai", "anthropic"]
    assert not [r.answer for r in model_server.requests if r.answer.startswith("fail")]  # no 429 ever
