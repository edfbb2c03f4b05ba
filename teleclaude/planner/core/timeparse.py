"""Read the `unavailable_until` a user or agent gives: a duration from now, or an ISO 8601 time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

from teleclaude.errors import ErrorCode, Failure
from teleclaude.planner.core.lazy_re import compiled

DEFAULT_DURATION = timedelta(hours=1)
MAX_DURATION = timedelta(days=366)
MAX_LENGTH = 64
ACCEPTED = (
    "a duration such as 45m, 2h, 1d, 30s or 1h30m, "
    "or an ISO 8601 time such as 2026-11-21T17:00:00Z, 2026-11-21T17:00+02:00 or 2026-11-21"
)

_DURATION = compiled(
    r"(?:(?P<days>[0-9]{1,6})\s*d)?\s*"
    r"(?:(?P<hours>[0-9]{1,6})\s*h)?\s*"
    r"(?:(?P<minutes>[0-9]{1,6})\s*m)?\s*"
    r"(?:(?P<seconds>[0-9]{1,8})\s*s)?",
    re.IGNORECASE | re.ASCII,
)


class InvalidTime(Failure, ValueError):
    code = ErrorCode.INVALID_TIME

    def __init__(self, given: str, problem: str = "is not a time teleclaude understands") -> None:
        super().__init__(f"{given!r} {problem}; give {ACCEPTED}.")
        self.given = given


def parse_until(text: str | None, now: datetime, local_tz: tzinfo) -> datetime:
    """When an agent is available again, as an aware UTC datetime. Nothing given means one hour from now."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be an aware datetime")
    now_utc = now.astimezone(UTC)
    stripped = (text or "").strip()
    if not stripped:
        return now_utc + DEFAULT_DURATION
    if len(stripped) > MAX_LENGTH or not stripped.isascii():
        raise InvalidTime(stripped[:MAX_LENGTH])
    duration = _parse_duration(stripped)
    until = now_utc + duration if duration is not None else _parse_iso(stripped, local_tz)
    if until - now_utc > MAX_DURATION:  # one limit for a duration and a time
        raise InvalidTime(stripped, "is more than 366 days ahead")
    return until


def format_utc(dt: datetime) -> str:
    """`2026-11-21T17:00:00Z`: the form teleclaude stores and prints."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError("format_utc needs an aware datetime")
    return dt.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def format_duration(seconds: float | None, smallest: str = "s") -> str:
    """`45s`, `3m07s`, `1h05m`, `2d03h`: the largest unit that is not zero, and the next one. `smallest="m"`
    counts whole minutes (`0m`, `45m`, `1h05m`). Nothing or a negative time is zero."""
    units = _UNITS[: [name for name, _ in _UNITS].index(smallest) + 1]
    left, amounts = max(int(seconds or 0), 0), []
    for name, size in units:
        amount, left = divmod(left, size)
        amounts.append((amount, name))
    first = next((i for i, (amount, _) in enumerate(amounts) if amount), len(amounts) - 1)
    (amount, name), *rest = amounts[first : first + 2]
    return f"{amount}{name}" + "".join(f"{more:02d}{unit}" for more, unit in rest)


def _parse_duration(text: str) -> timedelta | None:
    """The duration `text` spells, or None when it is not a duration at all."""
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groupdict().values()):
        return None
    duration = timedelta(**{unit: int(value or 0) for unit, value in match.groupdict().items()})
    if duration <= timedelta(0):
        raise InvalidTime(text, "is not a positive duration")
    return duration


def _parse_iso(text: str, local_tz: tzinfo) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.upper())  # RFC 3339 also allows a lowercase t and z
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=local_tz)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidTime(text) from None
