"""Recognise rate-limit, quota and overload messages in an agent's new output, and when they say it resets.

The patterns are data: each agent driver's `limit_patterns` (teleclaude/agents/), overridable per agent in
`teleclaude.toml`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache

from teleclaude.agents import PROFILES
from teleclaude.agents.profile import UsageWindow

DEFAULT_PAUSE = timedelta(hours=1)


@dataclass(frozen=True)
class LimitHit:
    line: str  # the row that matched
    until: datetime  # aware UTC
    reason: str


def find_limit(
    agent: str, rows: Iterable[str], now: datetime, local: tzinfo, patterns: Iterable[str] | None = None
) -> LimitHit | None:
    """The first row matching one of the agent's limit patterns, with its reset time (else now + 1 h)."""
    rows = tuple(rows)
    patterns = tuple(_default_patterns(agent) if patterns is None else patterns)
    # a quiet pane's look scans only its unfinished row, the same as the last look's: kept; new output is not
    index = _quiet_limit_row(patterns, rows) if len(rows) <= _QUIET_ROWS else _limit_row(patterns, rows)
    if index is None:
        return None
    row = rows[index]
    context = " ".join(rows[index : index + 3])  # the reset time is often on the next line
    until = reset_time(context, now, local) or now + DEFAULT_PAUSE
    # a dialog's row keeps its borders on screen: `│ Usage limit reached for MODEL.   │`
    return LimitHit(row.strip().strip("│┃|").strip(), until.astimezone(UTC), _reason(row))


_QUIET_ROWS = 4


def _limit_row(patterns: tuple[str, ...], rows: tuple[str, ...]) -> int | None:
    """The index of the first row matching one of `patterns`."""
    compiled = [re.compile(p) for p in patterns]
    return next((i for i, row in enumerate(rows) if any(p.search(row) for p in compiled)), None)


_quiet_limit_row = lru_cache(maxsize=256)(_limit_row)


def _default_patterns(agent: str) -> tuple[str, ...]:
    profile = PROFILES.get(agent)
    return profile.limit_patterns if profile else ()


# Claude Code's StopFailure hook: the `error` kinds that mean "not now" rather than "not at all"
LIMIT_FAILURES = {"rate_limit": "rate_limited", "overloaded": "overloaded", "server_error": "server_error"}


@dataclass(frozen=True)
class StopFailure:
    error: str  # rate_limit, server_error, overloaded, billing_error, authentication_failed, …
    message: str  # last_assistant_message: the error as the screen shows it

    def encode(self) -> str:
        """As the hook's own JSON, in printable ASCII: the pane mark of a worker on another computer, which
        `list-panes` hands back on one tab-separated row (`parse_failure` reads it again)."""
        return json.dumps({"error": self.error, "last_assistant_message": self.message[:MARK_CHARS]})


MARK_CHARS = 2000  # enough for the error's first lines and its reset time


def parse_failure(raw: str) -> StopFailure | None:
    """The StopFailure hook's JSON on stdin (or a pane's mark); None without an `error`."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return None
    message = data.get("last_assistant_message")
    return StopFailure(data["error"].strip() or "unknown", message if isinstance(message, str) else "")


def failure_limit(error: str, message: str, now: datetime, local: tzinfo) -> LimitHit | None:
    """A StopFailure hook's `error` and `last_assistant_message` as a limit, with the reset the message
    names (else now + 1 h); None for an error that is not a limit (billing, authentication, …)."""
    if error not in LIMIT_FAILURES:
        return None
    line = next((row.strip() for row in message.splitlines() if row.strip()), "")
    until = reset_time(message, now, local) or now + DEFAULT_PAUSE
    return LimitHit(line or error, until.astimezone(UTC), _reason(message) if line else LIMIT_FAILURES[error])


def _reason(row: str) -> str:
    lowered = row.lower()
    if any(word in lowered for word in _OVERLOAD_WORDS) or re.search(r"\b529\b|status:? 503\b", lowered):
        return "overloaded"
    if re.search(r"(api error|status):? 5\d\d\b", lowered):
        return "server_error"
    if "temporarily limiting" in lowered:  # "… (not your usage limit)"
        return "rate_limited"
    if any(word in lowered for word in _QUOTA_WORDS) or _HIT.search(row):
        return "quota_exhausted"
    return "rate_limited"


_OVERLOAD_WORDS = ("overload", "high demand", "at capacity")
_QUOTA_WORDS = ("quota", "resource_exhausted", "usage limit", "credit")
_HIT = re.compile(r"(?i)you[’']ve hit your ")


_EPOCH = re.compile(r"\|(\d{10})\b")
_IN = re.compile(
    r"(?i)(?:try again|reset[s]?|available again|retry)\s+(?:in|after)\s+"
    r"((?:\d+\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,and]*)+)"
)
_UNIT = re.compile(r"(?i)(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# the zone after a time, in parentheses or not (its name in `_zone`)
_ZONE = (
    r"(?:\s*\(?\s*("
    r"[A-Za-z_]+/[A-Za-z0-9_/+\-]+"  # an IANA name: "(Europe/Amsterdam)"
    r"|(?-i:(?:UTC|GMT)\s?[+\-−]\s?\d{1,2}(?::?\d{2})?"  # an offset: "GMT+2", "UTC-07:00"
    r"|[A-Z]{2,5})"  # an abbreviation, in capitals: "PDT", "(UTC)"
    r")\b\)?)?"
)
# "resets Nov 25, 11:05pm (UTC)"; "try again at Nov 26th, 2026 2:21 AM." (local time)
_DATE = re.compile(
    r"(?i)(?:resets?|try again|available again)\s+(?:on\s+|at\s+)?("
    + "|".join(_MONTHS)
    + r")[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(\d{4}),?\s+)?"
    r"(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?" + _ZONE
)
_AT = re.compile(
    r"(?i)(?:resets?|try again|available again)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?" + _ZONE
)
# a reset is printed to the minute and read a little later (the next look at the screen, a hook's report):
# a clock time this much before now is now, not the same time tomorrow
PRINTED_TO_THE_MINUTE = timedelta(minutes=2)
# a clock time printed without its seconds ("resets 7:41") may be any second of that minute: the agent is back
# only at its end, so a CLI that dropped the seconds is not given work before its real reset
WHOLE_MINUTE = timedelta(minutes=1)


def reset_time(text: str, now: datetime, local: tzinfo) -> datetime | None:
    """When a limit message says the agent is back: an epoch stamp, "in 2 hours 5 minutes", "at 5pm",
    "4:05am (UTC)" or "Nov 25, 11:05pm (UTC)"."""
    if match := _EPOCH.search(text):
        return datetime.fromtimestamp(int(match[1]), UTC)
    if match := _DATE.search(text):
        return _next_date(match, now, local)
    if match := _IN.search(text):
        return now + sum((_duration(int(n), unit) for n, unit in _UNIT.findall(match[1])), timedelta())
    if match := _AT.search(text):
        return _next_clock_time(match, now, local)
    return None


def _duration(amount: int, unit: str) -> timedelta:
    unit = unit.lower()
    if unit.startswith("d"):
        return timedelta(days=amount)
    if unit.startswith("h"):
        return timedelta(hours=amount)
    if unit.startswith("m"):
        return timedelta(minutes=amount)
    return timedelta(seconds=amount)


def _next_clock_time(match: re.Match[str], now: datetime, local: tzinfo) -> datetime | None:
    if not match[3] and not match[2]:
        return None  # a bare number ("resets 3") is not a time
    hour, minute = _hour(int(match[1]), match[3]), int(match[2] or 0)
    if hour is None or minute > 59:
        return None
    zone = _zone(match[4]) or local
    here = now.astimezone(zone)
    candidate = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate < here - PRINTED_TO_THE_MINUTE:
        candidate += timedelta(days=1)
    return candidate + WHOLE_MINUTE


def _next_date(match: re.Match[str], now: datetime, local: tzinfo) -> datetime | None:
    """ "Nov 25, 11:05pm (UTC)": that day and time, in the year it names, else in this year or (once it has
    passed) the next."""
    month, day = _MONTHS.index(match[1][:3].lower()) + 1, int(match[2])
    hour = _hour(int(match[4]), match[6])
    minute = int(match[5] or 0)
    if hour is None or minute > 59:
        return None
    zone = _zone(match[7]) or local
    here = now.astimezone(zone)
    for year in (int(match[3]),) if match[3] else (here.year, here.year + 1):
        try:
            candidate = datetime(year, month, day, hour, minute, tzinfo=zone)
        except ValueError:  # Feb 30, or Feb 29 outside a leap year
            continue
        if match[3] or candidate > here - timedelta(days=1):  # a reset just past is still this year's
            return candidate + WHOLE_MINUTE
    return None


def _hour(hour: int, meridiem: str | None) -> int | None:
    meridiem = (meridiem or "").lower().replace(".", "")
    if meridiem:
        return hour % 12 + (12 if meridiem == "pm" else 0) if 1 <= hour <= 12 else None
    return hour if hour <= 23 else None


# Abbreviations a CLI may print after a time, each a fixed offset from UTC in hours. JavaScript's en-US short
# names give the US zones letters and the others an offset ("GMT+2", read by `_OFFSET`); strftime's %Z gives
# letters everywhere. Ambiguous ones are left out and read in the machine's
# zone: IST (India, Israel, Ireland), AST (Atlantic, Arabia) and the like. CST is the US's Central time, as
# JavaScript prints it (China's zone is "GMT+8" there); BST is British Summer Time.
ZONE_ABBREVIATIONS: dict[str, int] = {
    "UTC": 0,
    "GMT": 0,
    "BST": 1,
    "CET": 1,
    "CEST": 2,
    "EET": 2,
    "EEST": 3,
    "JST": 9,
    "AEST": 10,
    "AEDT": 11,
    "HST": -10,
    "AKST": -9,
    "AKDT": -8,
    "PST": -8,
    "PDT": -7,
    "MST": -7,
    "MDT": -6,
    "CST": -6,
    "CDT": -5,
    "EST": -5,
    "EDT": -4,
}
_OFFSET = re.compile(r"(?:UTC|GMT)\s?([+\-−])\s?(\d{1,2})(?::?(\d{2}))?")


def _zone(name: str | None) -> tzinfo | None:
    """The zone a reset names: an abbreviation of `ZONE_ABBREVIATIONS`, an offset ("GMT+2", "UTC-07:00") or
    an IANA name; None for none or one not known (the machine's zone then applies)."""
    if not name:
        return None
    if name in ZONE_ABBREVIATIONS:
        return timezone(timedelta(hours=ZONE_ABBREVIATIONS[name]), name)
    if offset := _OFFSET.fullmatch(name):
        hours, minutes = int(offset[2]), int(offset[3] or 0)
        if hours > 14 or minutes > 59:
            return None
        sign = -1 if offset[1] in "-−" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes), name)
    if "/" not in name:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


# --- usage before a limit: the pane mark of a worker on another computer ----------------------------------


def encode_usage(windows: Iterable[UsageWindow]) -> str:
    """A driver's usage windows as the pane mark of a worker on another computer (its hook cannot reach this
    machine's database), in printable ASCII on one row: `[[window, used %, reset or null, seen], …]`, times
    in epoch seconds. The observer reads it for the session's own agent (`decode_usage`)."""
    rows = [
        [
            w.window[:40],
            w.used_percent,
            w.resets_at.timestamp() if w.resets_at else None,
            w.seen_at.timestamp(),
        ]
        for w in windows
    ]
    return json.dumps(rows)


def decode_usage(agent: str, mark: str) -> tuple[UsageWindow, ...]:
    """A pane's usage mark as `agent`'s windows; () for anything that is not one."""
    try:
        rows = json.loads(mark)
    except ValueError:
        return ()
    found = []
    for row in rows if isinstance(rows, list) else ():
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)):
            continue
        window, used, resets, seen = row
        if not all(_number(value) for value in (used, seen)) or not (resets is None or _number(resets)):
            continue
        try:
            reset = None if resets is None else datetime.fromtimestamp(resets, UTC)
            found.append(UsageWindow(agent, window, float(used), reset, datetime.fromtimestamp(seen, UTC)))
        except (ValueError, OverflowError, OSError):
            continue
    return tuple(found)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
