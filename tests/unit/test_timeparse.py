from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.planner.core.timeparse import InvalidTime, format_duration, format_utc, parse_until

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
AMSTERDAM = ZoneInfo("Europe/Amsterdam")  # UTC+1 in November, UTC+2 in July


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "2026-11-21T13:00:00Z"),
        ("", "2026-11-21T13:00:00Z"),
        ("   ", "2026-11-21T13:00:00Z"),
        ("45m", "2026-11-21T12:45:00Z"),
        ("2h", "2026-11-21T14:00:00Z"),
        ("1d", "2026-11-22T12:00:00Z"),
        ("30s", "2026-11-21T12:00:30Z"),
        ("1h30m", "2026-11-21T13:30:00Z"),
        (" 1H 30M ", "2026-11-21T13:30:00Z"),
        ("1d2h3m4s", "2026-11-22T14:03:04Z"),
        ("90m", "2026-11-21T13:30:00Z"),
        ("366d", "2027-11-22T12:00:00Z"),
    ],
)
def test_durations_count_from_now(text, expected):
    assert format_utc(parse_until(text, NOW, AMSTERDAM)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T17:00:00Z", "2026-11-21T17:00:00Z"),
        ("2026-11-21t17:00:00z", "2026-11-21T17:00:00Z"),
        ("2026-11-21T17:00:00+02:00", "2026-11-21T15:00:00Z"),
        ("2026-11-21T17:00-05:30", "2026-11-21T22:30:00Z"),
        ("2026-11-21T17:00:00", "2026-11-21T16:00:00Z"),  # naive: local time (UTC+1)
        ("2026-07-01 09:00", "2026-07-01T07:00:00Z"),  # naive in summer: UTC+2
        ("2026-11-21", "2026-11-20T23:00:00Z"),  # a date is local midnight
        ("2020-01-01T00:00:00Z", "2020-01-01T00:00:00Z"),  # the past: simply available again
    ],
)
def test_iso_times_become_utc(text, expected):
    assert format_utc(parse_until(text, NOW, AMSTERDAM)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "soon",
        "12:00pm tomorrow",
        "-5m",
        "1x",
        "0m",
        "0h0m",
        "367d",
        "1h30",
        "m",
        "2026-13-01",
        "2026-11-21T25:00",
        "0001-01-01T00:00+05:00",
        "٣m",
        "1" * 10_000,
        "2026-11-21T17:00:00Z" + " " * 100 + "x",
    ],
)
def test_garbage_is_rejected(text):
    with pytest.raises(InvalidTime):
        parse_until(text, NOW, AMSTERDAM)


def test_the_error_says_what_was_given_and_what_is_accepted():
    with pytest.raises(InvalidTime) as caught:
        parse_until("soon", NOW, AMSTERDAM)
    message = str(caught.value)
    assert "'soon'" in message
    assert "45m" in message
    assert "2026-11-21T17:00:00Z" in message


def test_the_result_is_utc_even_when_now_is_not():
    now = datetime(2026, 11, 21, 13, 0, 0, tzinfo=AMSTERDAM)
    until = parse_until("1h", now, AMSTERDAM)
    assert until.tzinfo == UTC
    assert until == datetime(2026, 11, 21, 13, 0, 0, tzinfo=UTC)


def test_now_must_be_aware():
    with pytest.raises(ValueError, match="aware"):
        parse_until("1h", datetime(2026, 11, 21, 12), AMSTERDAM)


def test_format_utc_drops_fractions_and_converts():
    dt = datetime(2026, 11, 21, 18, 0, 0, 999_999, tzinfo=AMSTERDAM)
    assert format_utc(dt) == "2026-11-21T17:00:00Z"


@given(st.one_of(st.none(), st.text(), st.from_regex(r"[0-9dhmsDHMS :TZ+\-.]{0,30}", fullmatch=True)))
def test_any_text_parses_to_utc_or_raises_invalid_time(text):
    try:
        until = parse_until(text, NOW, AMSTERDAM)
    except InvalidTime:
        return
    assert until.tzinfo == UTC


@given(st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=366)))
def test_every_whole_second_duration_round_trips(delta):
    seconds = int(delta.total_seconds())
    text = f"{seconds // 3600}h{seconds % 3600 // 60}m{seconds % 60}s"
    assert parse_until(text, NOW, AMSTERDAM) == NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("seconds", "smallest", "text"),
    [
        (None, "s", "0s"),
        (-5, "s", "0s"),
        (45, "s", "45s"),
        (187, "s", "3m07s"),
        (3900, "s", "1h05m"),
        (2 * 86400 + 3 * 3600 + 5, "s", "2d03h"),
        (45, "m", "0m"),
        (187, "m", "3m"),
        (5400, "m", "1h30m"),
    ],
)
def test_one_duration_formatter_for_every_output(seconds, smallest, text):
    assert format_duration(seconds, smallest) == text
