"""Rate-limit messages of each agent CLI, and the reset times they announce."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.config.parse import ConfigError, parse_config
from teleclaude.runtime.core.limits import find_limit, reset_time

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("agent", "text", "until", "reason"),
    [
        (
            "claude",
            "Claude usage limit reached. Your limit will reset at 5pm (UTC).",
            NOW.replace(hour=17),
            "quota_exhausted",
        ),
        (
            "claude",
            "Claude AI usage limit reached|1795000000",
            datetime.fromtimestamp(1795000000, UTC),
            "quota_exhausted",
        ),
        ("claude", 'API Error: 529 {"type":"overloaded_error"}', NOW + timedelta(hours=1), "overloaded"),
        (
            "gemini",
            "[API Error: got status: 429 Too Many Requests. RESOURCE_EXHAUSTED]",
            NOW + timedelta(hours=1),
            "quota_exhausted",
        ),
        (
            "gemini",
            "The model is overloaded. Please try again later.",
            NOW + timedelta(hours=1),
            "overloaded",
        ),
        (
            "codex",
            "You've hit your usage limit. Try again in 2 hours 5 minutes.",
            NOW + timedelta(hours=2, minutes=5),
            "quota_exhausted",
        ),
        (
            "codex",
            "■ You've hit your usage limit. Try again at 3:05 PM.",
            NOW.replace(hour=15, minute=5),
            "quota_exhausted",
        ),
    ],
)
def test_limit_messages_and_reset_times(agent, text, until, reason):
    hit = find_limit(agent, ["some output", text, "> "], NOW, UTC)
    assert hit is not None
    assert hit.until == until
    assert hit.reason == reason


@pytest.mark.parametrize(
    "text",
    [
        "def rate_limit(requests): ...  # a worker writing a rate limiter",
        "Fixed the 429 handling in client.py",
        "All tests passed.",
    ],
)
def test_ordinary_output_is_not_a_limit(text):
    assert find_limit("gemini", [text], NOW, UTC) is None
    assert find_limit("claude", [text], NOW, UTC) is None


def test_a_clock_time_already_past_today_means_tomorrow():
    assert reset_time("resets at 9am", NOW, UTC) == NOW.replace(hour=9) + timedelta(days=1)
    assert reset_time("resets 3", NOW, UTC) is None


def test_runtime_settings_parse_and_bad_ones_name_the_key():
    config = parse_config(
        [
            (
                "t.toml",
                '[runtime]\nsocket = "mine"\nidle_threshold = 2\n[runtime.agents.gemini]\nbinary = "agy"\n',
            )
        ]
    )
    assert config.runtime.socket == "mine"
    assert config.runtime.idle_threshold == 2.0
    assert config.runtime.profiles["gemini"].binaries == ("agy",)
    assert config.runtime.profiles["gemini"].modes["fast"]  # the rest of the profile is kept
    for bad, key in (
        ('[runtime]\nsocket = "a b"\n', "runtime.socket"),
        ("[runtime]\nidle_threshold = -1\n", "runtime.idle_threshold"),
        ('[runtime.agents.claude]\nprompt = "("\n', "runtime.agents.claude.prompt"),
        ("[runtime]\nwat = 1\n", "runtime.wat"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_config([("t.toml", bad)])
        assert raised.value.key == key
    assert parse_config([]).runtime is None
