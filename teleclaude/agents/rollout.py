"""The rate limits a rollout file's `token_count` events report, as plain values: a worker's stop and prompt
hooks read them at every turn to see whether they are news, so this module imports no driver (`dataclasses`,
`enum`, `re`) and not `json` (agents/jsonin.py); the driver's usage reader makes its `UsageWindow`s of the
same values (its module says what the file holds)."""

from __future__ import annotations

from teleclaude.agents.jsonin import loads
from teleclaude.agents.moments import UTC, datetime, timedelta
from teleclaude.agents.transcripts import finite

WINDOWS = ("primary", "secondary")


def rollout_limits(text: str, now: datetime) -> tuple[tuple[str, float, datetime | None, datetime], ...]:
    """(window, percent used, when it resets or None, when it was seen) of each window of the last
    `token_count` event of these rollout lines that reports any, seen when that event was written (else
    `now`); () when none does."""
    for line in reversed(text.splitlines()):
        if '"token_count"' not in line:
            continue
        try:
            event = loads(line)
        except ValueError:
            continue  # a line cut by the tail, or one being written
        payload = event.get("payload") if isinstance(event, dict) else None
        if (
            not isinstance(event, dict)
            or not isinstance(payload, dict)
            or payload.get("type") != "token_count"
        ):
            continue
        limits = payload.get("rate_limits")
        if not isinstance(limits, dict):
            continue
        seen = _when(event.get("timestamp")) or now
        found = tuple(
            (name, float(used), _reset(window, seen), seen)
            for name in WINDOWS
            if isinstance(window := limits.get(name), dict)
            and isinstance(used := window.get("used_percent"), int | float)
            and not isinstance(used, bool)
            and finite(used)
        )
        if found:
            return found
    return ()


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _reset(window: dict[str, object], seen: datetime) -> datetime | None:
    """The window's reset; without one, the latest it can be: its length (`window_minutes`) after `seen`."""
    if reset := _epoch(window.get("resets_at")):
        return reset
    minutes = window.get("window_minutes")
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not 0 < minutes < 60 * 24 * 366:
        return None
    return seen + timedelta(minutes=minutes)


def _epoch(value: object) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError):
        return None
