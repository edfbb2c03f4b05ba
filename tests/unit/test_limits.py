"""Rate-limit messages of each agent CLI, and the reset times they announce."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from teleclaude.agents import PROFILES
from teleclaude.config.parse import ConfigError, parse_config
from teleclaude.runtime.core.limits import StopFailure, find_limit, parse_failure, reset_time

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
MACHINE = ZoneInfo("America/Sao_Paulo")  # the machine's zone: UTC-3, none of those named below
MINUTE = timedelta(minutes=1)  # a reset printed to the minute ("resets 7:41") is the end of that minute


@pytest.mark.parametrize(
    ("agent", "text", "until", "reason"),
    [
        (
            "claude",
            "Claude usage limit reached. Your limit will reset at 5pm (UTC).",
            NOW.replace(hour=17) + MINUTE,
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
            NOW.replace(hour=15, minute=5) + MINUTE,
            "quota_exhausted",
        ),
    ],
)
def test_limit_messages_and_reset_times(agent, text, until, reason):
    hit = find_limit(agent, ["some output", text, "> "], NOW, UTC)
    assert hit is not None
    assert hit.until == until
    assert hit.reason == reason


# Claude Code 2.1's screens (tests/realcli/NOTES.md): NOW is 2026-11-22 12:00 UTC
CLAUDE_SCREENS = [
    (
        "● API Error: Request rejected (429) · This request would exceed the rate limit for your org",
        NOW + timedelta(hours=1),
        "rate_limited",
    ),
    ("● API Error: Request rejected (429) · Rate limited. Please try again later.", None, "rate_limited"),
    ("● API Error: 529 Overloaded. This is a server-side issue, usually temporary", None, "overloaded"),
    ("● API Error: 503 Service Unavailable. This is a server-side issue, …", None, "server_error"),
    (
        "  ⎿  You've hit your session limit · resets 4:05am (UTC)",
        datetime(2026, 11, 23, 4, 5) + MINUTE,
        "quota_exhausted",
    ),
    (
        "  ⎿  You’ve hit your session limit · resets 3:48pm (UTC)",
        NOW.replace(hour=15, minute=48) + MINUTE,
        "quota_exhausted",
    ),
    (
        "  ⎿  You've hit your weekly limit · resets Nov 25, 11:05pm (UTC)",
        datetime(2026, 11, 25, 23, 5) + MINUTE,
        "quota_exhausted",
    ),
    (
        "  ⎿  You’ve hit your Opus limit · resets Nov 25, 9:22pm (UTC)",
        datetime(2026, 11, 25, 21, 22) + MINUTE,
        "quota_exhausted",
    ),
    (
        "  ⎿  You've hit your Sonnet limit · resets Jan 2, 9:23am (UTC)",
        datetime(2027, 1, 2, 9, 23) + MINUTE,
        "quota_exhausted",
    ),
    (
        "  ⎿  You've hit your usage limit · resets in 2h 14m",
        NOW + timedelta(hours=2, minutes=14),
        "quota_exhausted",
    ),
    ("  ⎿  You've hit your fast limit · resets in 45m", NOW + timedelta(minutes=45), "quota_exhausted"),
    ("You've hit your monthly spend limit.", None, "quota_exhausted"),
    ("You're out of usage credits", None, "quota_exhausted"),
    ("Server is temporarily limiting requests (not your usage limit)", None, "rate_limited"),
]


@pytest.mark.parametrize(("text", "until", "reason"), CLAUDE_SCREENS)
def test_claude_code_limit_screens_and_their_reset_times(text, until, reason):
    hit = find_limit("claude", ["● Working on it", text, "❯ "], NOW, UTC)
    assert hit is not None
    assert hit.until == (until.replace(tzinfo=UTC) if until else NOW + timedelta(hours=1))
    assert hit.reason == reason


def test_the_retry_countdown_is_not_a_limit():
    rows = ["✻ API error · Retrying in 26s · attempt 7/10", "  ⎿  Tip: Use /btw to ask a quick side question"]
    assert find_limit("claude", rows, NOW, UTC) is None


def test_a_dated_reset_in_another_zone_and_one_just_past():
    amsterdam = reset_time("resets Nov 25, 9am (Europe/Amsterdam)", NOW, UTC)
    assert amsterdam == datetime(2026, 11, 25, 8, 0, tzinfo=UTC) + MINUTE
    assert (
        reset_time("resets Nov 22, 11am (UTC)", NOW, UTC) == NOW.replace(hour=11) + MINUTE
    )  # not next year's
    assert reset_time("resets Feb 30, 1am (UTC)", NOW, UTC) is None


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
    assert reset_time("resets at 9am", NOW, UTC) == NOW.replace(hour=9) + timedelta(days=1) + MINUTE
    assert reset_time("resets 3", NOW, UTC) is None


@pytest.mark.parametrize("late", [timedelta(seconds=10), timedelta(seconds=59), timedelta(seconds=100)])
def test_a_reset_printed_for_this_minute_and_read_a_moment_later_is_now_not_tomorrow(late):
    """Codex prints its reset to the minute: "try again at 11:40 PM." read at 23:40:10 is the agent back now,
    not out for a day."""
    minute = datetime(2026, 11, 22, 23, 40, tzinfo=UTC)
    hit = find_limit(
        "codex", ["■ You’ve hit your usage limit. … or try again at 11:40 PM."], minute + late, UTC
    )
    assert hit is not None and hit.until == minute + MINUTE
    later = minute + timedelta(minutes=5)  # well past: the next day's
    assert reset_time("try again at 11:40 PM.", later, UTC) == minute + timedelta(days=1) + MINUTE


# the CLIs print a reset in the machine's zone, named or not: NOW is 2026-11-22 12:00 UTC
ZONED = [
    ("Access resets at 4:19 PM UTC.", datetime(2026, 11, 22, 16, 19)),
    ("try again at 4:10 PM PDT", datetime(2026, 11, 22, 23, 10)),  # UTC-7
    ("try again at 4:10 PM PST", datetime(2026, 11, 23, 0, 10)),  # UTC-8
    ("resets at 9:30am EST", datetime(2026, 11, 22, 14, 30)),
    ("resets 10am EDT", datetime(2026, 11, 22, 14, 0)),
    ("resets 7am CST.", datetime(2026, 11, 22, 13, 0)),
    ("resets 6am MST", datetime(2026, 11, 22, 13, 0)),
    ("resets 2pm CET", datetime(2026, 11, 22, 13, 0)),
    ("resets 3pm CEST", datetime(2026, 11, 22, 13, 0)),
    ("resets 3pm BST", datetime(2026, 11, 22, 14, 0)),
    ("resets 10pm JST", datetime(2026, 11, 22, 13, 0)),
    ("resets 12:30pm GMT", datetime(2026, 11, 22, 12, 30)),
    ("resets 5:30 PM GMT+2", datetime(2026, 11, 22, 15, 30)),  # JavaScript's short name of other zones
    ("resets 6:30 PM GMT+5:30", datetime(2026, 11, 22, 13, 0)),
    ("resets 4:30 AM GMT−8", datetime(2026, 11, 22, 12, 30)),  # with U+2212, as Intl may print it
    ("resets 4:05am (PDT)", datetime(2026, 11, 22, 11, 5) + timedelta(days=1)),
    ("resets Nov 25, 9:22pm PST", datetime(2026, 11, 26, 5, 22)),
    ("try again at Nov 26th, 2026 2:21 AM EST.", datetime(2026, 11, 26, 7, 21)),
]


@pytest.mark.parametrize(("text", "until"), ZONED)
def test_a_reset_in_a_named_zone_is_read_in_that_zone(text, until):
    assert reset_time(text, NOW, MACHINE) == until.replace(tzinfo=UTC) + MINUTE


@pytest.mark.parametrize(
    "text",
    [
        "try again at 4:10 PM.",
        "try again at 4:10 PM IST",  # India, Israel or Ireland: left to the machine's zone
        "try again at 4:10 PM XYZ",
        "try again at 4:10 PM today",
    ],
)
def test_a_reset_without_a_zone_or_with_one_not_known_is_in_the_machines_zone(text):
    assert (
        reset_time(text, NOW, MACHINE) == datetime(2026, 11, 22, 19, 10, tzinfo=UTC) + MINUTE
    )  # 16:10 there


def test_runtime_settings_parse_and_bad_ones_name_the_key():
    config = parse_config(
        [
            (
                "t.toml",
                '[runtime]\nsocket = "mine"\nidle_threshold = 2\n[runtime.agents.gemini]\nbinary = "agy"\n',
            )
        ]
    )
    runtime = config.runtime
    assert runtime is not None
    assert runtime.socket == "mine"
    assert runtime.idle_threshold == 2.0
    assert runtime.profiles["gemini"].binaries == ("agy",)
    assert runtime.profiles["gemini"].modes["fast"]  # the rest of the profile is kept
    assert runtime.profiles["gemini"].command_listed  # kept too; "" turns the wait off:
    off = parse_config(
        [("t.toml", '[runtime]\ncommand_wait = 5\n[runtime.agents.gemini]\ncommand_listed = ""\n')]
    ).runtime
    assert off is not None
    assert off.profiles["gemini"].command_listed == "" and off.command_wait == 5.0
    for bad, key in (
        ('[runtime]\nsocket = "a b"\n', "runtime.socket"),
        ("[runtime]\nidle_threshold = -1\n", "runtime.idle_threshold"),
        ('[runtime.agents.claude]\nprompt = "("\n', "runtime.agents.claude.prompt"),
        ('[runtime.agents.gemini]\ncommand_listed = "("\n', "runtime.agents.gemini.command_listed"),
        ("[runtime]\ncommand_wait = -1\n", "runtime.command_wait"),
        ("[runtime]\nwat = 1\n", "runtime.wat"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_config([("t.toml", bad)])
        assert raised.value.key == key
    assert parse_config([]).runtime is None


def test_an_agents_env_table_is_read_merged_and_checked():
    config = parse_config(
        [
            ("user.toml", '[runtime.agents.claude]\nenv = {ANTHROPIC_API_KEY = "k", IS_SANDBOX = "0"}\n'),
            ("project.toml", '[runtime.agents.claude.env]\nIS_SANDBOX = "1"\n'),
        ]
    )
    runtime = config.runtime
    assert runtime is not None
    own = PROFILES["claude"].env  # the driver's own variables, under the user's
    assert runtime.profiles["claude"].env == {**own, "ANTHROPIC_API_KEY": "k", "IS_SANDBOX": "1"}
    assert runtime.profiles["codex"].env == {}
    for bad, key in (
        ("[runtime.agents.claude]\nenv = 1\n", "runtime.agents.claude.env"),
        ("[runtime.agents.claude.env]\nIS_SANDBOX = 1\n", "runtime.agents.claude.env.IS_SANDBOX"),
        ('[runtime.agents.claude.env]\n"A B" = "1"\n', "runtime.agents.claude.env.A B"),
        ('[runtime.agents.claude.env]\nTELECLAUDE_DB = "x"\n', "runtime.agents.claude.env.TELECLAUDE_DB"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_config([("t.toml", bad)])
        assert raised.value.key == key


def test_a_stop_failure_hook_report_is_a_limit_with_the_reset_it_names():
    from teleclaude.runtime.core.limits import failure_limit

    hit = failure_limit("rate_limit", "You've hit your session limit · resets 3:48pm (UTC)", NOW, UTC)
    assert hit is not None
    assert (hit.until, hit.reason) == (NOW.replace(hour=15, minute=48) + MINUTE, "quota_exhausted")
    hit = failure_limit("rate_limit", "API Error: Request rejected (429) · Rate limited.", NOW, UTC)
    assert hit is not None
    assert (hit.until, hit.reason) == (NOW + timedelta(hours=1), "rate_limited")
    hit = failure_limit("server_error", "", NOW, UTC)
    assert hit is not None
    assert hit.reason == "server_error"
    hit = failure_limit("server_error", "API Error: 529 Overloaded.", NOW, UTC)
    assert hit is not None
    assert hit.reason == "overloaded"
    assert failure_limit("billing_error", "Credit balance too low", NOW, UTC) is None


def test_a_stop_failure_travels_on_one_list_panes_row_and_reads_back_the_same():
    """A remote worker's StopFailure hook marks its pane with the failure; `list-panes` hands the mark back
    as one field of a tab-separated row, so it must hold no tab, newline or other control character."""
    failure = StopFailure(
        "rate_limit", "You’ve hit your session limit · resets 3:48pm (UTC)\n\tdetails #{pane_id}"
    )
    mark = failure.encode()
    assert mark.isascii() and mark.isprintable()
    assert parse_failure(mark) == failure
    assert parse_failure("not json") is None and parse_failure('{"message": "no error"}') is None
