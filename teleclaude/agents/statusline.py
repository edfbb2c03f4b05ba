"""The rate limits Claude Code's status-line JSON reports, as plain values: `teleclaude hook statusline` reads
them at every refresh of the CLI's status line, so this module imports no driver (`dataclasses`, `enum`,
`re`); the driver's usage reader makes its `UsageWindow`s of the same values (its module says what the JSON
holds)."""

from __future__ import annotations

import math

from teleclaude.agents.moments import UTC, datetime, timedelta

# the JSON's name of each window -> the driver's
WINDOWS = {"five_hour": "5h", "seven_day": "7d"}
# the latest a window without a reset ends
WINDOW_LENGTHS = {"5h": timedelta(hours=5), "7d": timedelta(days=7)}


def rate_limits(data: object, now: datetime) -> tuple[tuple[str, float, datetime], ...]:
    """(window, percent used, when it resets) of each window `rate_limits` in the status line's JSON (`data`,
    parsed) reports, seen `now`; () for anything else."""
    limits = data.get("rate_limits") if isinstance(data, dict) else None
    if not isinstance(limits, dict):
        return ()
    found = []
    for key, window in WINDOWS.items():
        report = limits.get(key)
        if not isinstance(report, dict):
            continue
        used = report.get("used_percentage")
        if isinstance(used, bool) or not isinstance(used, int | float) or not math.isfinite(used):
            continue
        reset = moment(report.get("resets_at")) or now + WINDOW_LENGTHS[window]
        found.append((window, float(used), reset))
    return tuple(found)


def moment(value: object) -> datetime | None:
    """Epoch seconds (what 2.1.197 passes on), or an ISO 8601 time."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            moment = datetime.fromisoformat(value)
            return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    return None


MOST_USD = 10.0**7  # tokens.py's: more dollars than any one session costs


def cost(data: object) -> float | None:
    """`cost.total_cost_usd` of the status line's JSON (`data`, parsed): what the session cost so far, as
    Claude Code counts it. None for anything else, and for 0: a subscription's login says 0 (its price is
    the plan), never $0."""
    report = data.get("cost") if isinstance(data, dict) else None
    usd = report.get("total_cost_usd") if isinstance(report, dict) else None
    if isinstance(usd, bool) or not isinstance(usd, int | float) or not math.isfinite(usd):
        return None
    return float(usd) if 0 < usd <= MOST_USD else None
