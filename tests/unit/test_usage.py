"""Each agent driver's usage reader (the windows its CLI reports before a limit), and the pane mark of a
remote worker's usage: text in, `UsageWindow` values out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.agents import PROFILES
from teleclaude.agents.claude import statusline_usage
from teleclaude.agents.codex import rollout_usage
from teleclaude.agents.profile import UsageSource, UsageWindow
from teleclaude.runtime.core.limits import decode_usage, encode_usage

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
RESET = 1904299200  # 2030-05-06 12:00 UTC


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# --- claude: its status line's JSON ------------------------------------------------------------------------


def test_claudes_status_line_gives_its_five_hour_and_weekly_windows():
    status = {
        "model": {"display_name": "Opus 4.8"},
        "rate_limits": {
            "five_hour": {"used_percentage": 95.0, "resets_at": RESET},
            "seven_day": {"used_percentage": 41, "resets_at": RESET + 86400},
        },
    }
    assert statusline_usage(json.dumps(status), NOW) == (
        UsageWindow("claude", "5h", 95.0, at(RESET), NOW),
        UsageWindow("claude", "7d", 41.0, at(RESET + 86400), NOW),
    )


def test_a_window_claude_leaves_out_is_not_made_up():
    status = {"rate_limits": {"seven_day": {"used_percentage": 12.5, "resets_at": "2030-05-06T12:00:00Z"}}}
    assert statusline_usage(json.dumps(status), NOW) == (UsageWindow("claude", "7d", 12.5, at(RESET), NOW),)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1]",
        '{"model": {}}',  # an API key: no rate_limits at all
        '{"rate_limits": null}',
        '{"rate_limits": {"five_hour": null}}',
        '{"rate_limits": {"five_hour": {"used_percentage": "83"}}}',
        '{"rate_limits": {"five_hour": {"used_percentage": true}}}',
        '{"rate_limits": {"five_hour": {"used_percentage": NaN}}}',
    ],
)
def test_a_status_line_without_usage_gives_nothing(text):
    assert statusline_usage(text, NOW) == ()


def test_a_reset_claude_cannot_say_is_the_latest_its_window_can_end():
    status = {
        "rate_limits": {
            "five_hour": {"used_percentage": 50, "resets_at": 1e300},
            "seven_day": {"used_percentage": 9},
        }
    }
    assert statusline_usage(json.dumps(status), NOW) == (
        UsageWindow("claude", "5h", 50.0, NOW + timedelta(hours=5), NOW),
        UsageWindow("claude", "7d", 9.0, NOW + timedelta(days=7), NOW),
    )


def test_a_window_whose_reset_nobody_knows_stops_counting_after_the_shortest_window():
    """Codex reported `primary 100%` with no reset: after its real reset it must not stay full for ever."""
    full = UsageWindow("codex", "primary", 100.0, None, NOW)
    assert full.current(NOW + timedelta(hours=4, minutes=59))
    assert not full.current(NOW + timedelta(hours=5))


# --- codex: the token_count events of its rollout file -----------------------------------------------------


def event(payload: dict, timestamp: str = "2030-05-01T11:59:30.250Z") -> str:
    return json.dumps({"timestamp": timestamp, "type": "event_msg", "payload": payload})


def token_count(primary: float | None, secondary: float | None = None, **more: object) -> dict:
    def window(used: float | None, minutes: int, reset: int) -> dict | None:
        return None if used is None else {"used_percent": used, "window_minutes": minutes, "resets_at": reset}

    limits = {"primary": window(primary, 300, RESET), "secondary": window(secondary, 10080, RESET + 86400)}
    return {"type": "token_count", "info": None, "rate_limits": {**limits, "plan_type": None, **more}}


def test_a_codex_window_without_its_reset_ends_at_most_its_length_after_it_was_seen():
    limits = token_count(100.0)
    del limits["rate_limits"]["primary"]["resets_at"]
    (primary,) = rollout_usage(event(limits), NOW)
    seen = datetime(2030, 5, 1, 11, 59, 30, 250000, tzinfo=UTC)
    assert primary.resets_at == seen + timedelta(minutes=300)
    assert not primary.current(seen + timedelta(minutes=300))


def test_codexs_last_token_count_gives_its_primary_and_secondary_windows():
    seen = datetime(2030, 5, 1, 11, 59, 30, 250000, tzinfo=UTC)
    lines = [
        event(token_count(20.0, 5.0), "2030-05-01T11:50:00Z"),
        event({"type": "task_started", "turn_id": "t2"}),
        event(token_count(95.0, 41.0)),
    ]
    assert rollout_usage("\n".join(lines), NOW) == (
        UsageWindow("codex", "primary", 95.0, at(RESET), seen),
        UsageWindow("codex", "secondary", 41.0, at(RESET + 86400), seen),
    )


def test_a_token_count_without_rate_limits_leaves_the_last_one_that_had_them():
    """The scripted server sends no `x-codex-*` headers: codex writes `rate_limits: null`."""
    lines = [
        "{cut line",
        event(token_count(60.0), "2030-05-01T11:00:00Z"),
        event({"type": "token_count", "info": None, "rate_limits": None}),
        event(token_count(None, None)),
        '{"being written',
    ]
    assert rollout_usage("\n".join(lines), NOW) == (
        UsageWindow("codex", "primary", 60.0, at(RESET), datetime(2030, 5, 1, 11, tzinfo=UTC)),
    )


def test_a_rollout_without_usage_gives_nothing():
    assert rollout_usage("", NOW) == ()
    assert rollout_usage(event({"type": "task_complete", "completed_at": 1}), NOW) == ()
    assert (
        rollout_usage(event({"type": "token_count", "rate_limits": {"primary": {"used_percent": "9"}}}), NOW)
        == ()
    )


def test_a_token_count_without_its_time_is_seen_now():
    line = json.dumps({"type": "event_msg", "payload": token_count(30.0)})
    assert rollout_usage(line, NOW)[0].seen_at == NOW


# --- the drivers: each reads its usage, or says what its CLI offers instead --------------------------------


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_driver_reads_its_usage_or_says_why_not(name):
    usage = PROFILES[name].usage
    if usage.read is None:
        assert usage.lacking and name in usage.lacking  # the real-CLI scenario skips with this reason
    else:
        assert usage.source in (UsageSource.STATUSLINE, UsageSource.TRANSCRIPT)
        assert usage.read("", NOW) == ()


# --- a remote worker's usage, marked on its pane -----------------------------------------------------------


def test_a_usage_mark_reads_back_as_the_sessions_agents_windows():
    windows = (
        UsageWindow("claude", "5h", 83.5, at(RESET), NOW),
        UsageWindow("claude", "7d", 41.0, None, NOW),
    )
    mark = encode_usage(windows)
    assert mark.isascii() and "\t" not in mark and "\n" not in mark
    assert decode_usage("claude", mark) == windows
    assert [w.agent for w in decode_usage("codex", mark)] == ["codex", "codex"]  # the session's agent


@pytest.mark.parametrize(
    "mark", ["", "x", "{}", "[[1, 2, 3, 4]]", '[["5h", "50", null, 1]]', '[["5h", 50, null, 1e400]]', "[[]]"]
)
def test_a_mark_that_is_not_usage_gives_nothing(mark):
    assert decode_usage("claude", mark) == ()


def test_the_status_line_shows_a_model_name_with_terminal_controls_escaped():
    from teleclaude.runtime.hooks.statusline import our_line

    data = {"model": {"display_name": "Opus\x1b]0;owned\x07\u202e"}}
    line = our_line("claude", data, (), datetime(2026, 1, 1, tzinfo=UTC))
    assert line.startswith("Opus") and "\x1b" not in line and "\u202e" not in line and "\x07" not in line
