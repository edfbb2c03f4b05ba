"""Recognise rate-limit, quota and overload messages in an agent's new output, and when they say it resets.

The patterns are data (`DEFAULT_LIMIT_PATTERNS`, overridable per agent in `teleclaude.toml`); they are kept
specific (an error's own wording, not just "rate limit") because workers also print code and prose.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

DEFAULT_LIMIT_PATTERNS: dict[str, tuple[str, ...]] = {
    "claude": (
        r"(?i)usage limit reached",
        r"(?i)\b\d+-hour limit reached",
        r"(?i)you've hit your (usage )?limit",
        r"(?i)API Error: (429|529)\b",
        r"\b(overloaded_error|rate_limit_error)\b",
    ),
    # Gemini CLI 0.61 (tests/realcli/NOTES.md): it retries 429 and 503 silently; what it prints is final
    "gemini": (
        r"\bRESOURCE_EXHAUSTED\b",
        r"(?i)\b(status|code|error)\W{0,3}429\b",
        r"(?i)\b429 Too Many Requests\b",
        r"(?i)model is overloaded",
        r"(?i)quota (exceeded|exhausted)",
        r"(?i)rate limit(ed)? exceeded",
        r"(?i)usage limit reached for",  # the "Keep trying / Stop" dialog's title
        r"(?i)exhausted your (daily )?quota",
        r"(?i)experiencing high demand",
    ),
    # Codex 0.169: `’` (U+2019) in its wordings; "Server is busy, reconnecting k/5" is a retry, not a limit:
    # the limit is when it gives up ("Exceeded retry limit, last status: 429 …")
    "codex": (
        r"(?i)you['’]ve hit your usage limit",
        r"(?i)you['’]re out of credits",
        r"(?i)you['’]ve reached your workspace credit limit",
        r"(?i)usage limit (reached|exceeded)",
        r"(?i)exceeded retry limit, last status: (429|5\d\d)",
        r"(?i)we['’]re currently experiencing high demand",
        r"(?i)unexpected status (429|503)\b",
        r"(?i)quota exceeded",
    ),
}

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
    compiled = [
        re.compile(p) for p in (DEFAULT_LIMIT_PATTERNS.get(agent, ()) if patterns is None else patterns)
    ]
    rows = list(rows)
    for index, row in enumerate(rows):
        if any(p.search(row) for p in compiled):
            context = " ".join(rows[index : index + 3])  # the reset time is often on the next line
            until = reset_time(context, now, local) or now + DEFAULT_PAUSE
            return LimitHit(row.strip(), until.astimezone(UTC), _reason(row))
    return None


def _reason(row: str) -> str:
    lowered = row.lower()
    if "overload" in lowered or "529" in lowered or "high demand" in lowered or "status 503" in lowered:
        return "overloaded"
    if any(word in lowered for word in ("quota", "resource_exhausted", "usage limit", "credit")):
        return "quota_exhausted"
    return "rate_limited"


_EPOCH = re.compile(r"\|(\d{10})\b")
_IN = re.compile(
    r"(?i)(?:try again|reset[s]?|available again|retry)\s+(?:in|after)\s+"
    r"((?:\d+\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,and]*)+)"
)
_UNIT = re.compile(r"(?i)(\d+)\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b")
_AT = re.compile(
    r"(?i)(?:resets?|try again|available again)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?"
    r"(?:\s*\(([A-Za-z_]+/[A-Za-z_/]+|UTC)\))?"
)


def reset_time(text: str, now: datetime, local: tzinfo) -> datetime | None:
    """When a limit message says the agent is back: an epoch stamp, "in 2 hours 5 minutes", or "at 5pm"."""
    if match := _EPOCH.search(text):
        return datetime.fromtimestamp(int(match[1]), UTC)
    if match := _IN.search(text):
        return now + sum((_duration(int(n), unit) for n, unit in _UNIT.findall(match[1])), timedelta())
    if dated := _dated_reset(text, local):
        return dated
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
    hour, minute = int(match[1]), int(match[2] or 0)
    meridiem = (match[3] or "").lower().replace(".", "")
    if meridiem and not 1 <= hour <= 12 or hour > 23 or minute > 59:
        return None
    if not meridiem and not match[2]:
        return None  # a bare number ("resets 3") is not a time
    if meridiem:
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    zone = _zone(match[4]) or local
    here = now.astimezone(zone)
    candidate = here.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate <= here:
        candidate += timedelta(days=1)
    return candidate


def _zone(name: str | None) -> tzinfo | None:
    if not name:
        return None
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


# codex: "try again at Nov 26th, 2026 2:21 AM." (the machine's local time; the year may be missing)
_DATED = re.compile(
    r"(?i)(?:try again|resets?|available again)\s+(?:at|on)\s+([A-Z][a-z]{2})[a-z]*\.?\s+(\d{1,2})"
    r"(?:st|nd|rd|th)?,?\s+(?:(\d{4}),?\s+)?(?:at\s+)?(\d{1,2}):(\d{2})\s*([ap]\.?m\.?)?"
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _dated_reset(text: str, local: tzinfo) -> datetime | None:
    match = _DATED.search(text)
    if match is None or match[1].lower() not in _MONTHS:
        return None
    hour, minute = int(match[4]), int(match[5])
    meridiem = (match[6] or "").lower().replace(".", "")
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    year = int(match[3]) if match[3] else datetime.now(local).year
    try:
        return datetime(year, _MONTHS.index(match[1].lower()) + 1, int(match[2]), hour, minute, tzinfo=local)
    except ValueError:
        return None
