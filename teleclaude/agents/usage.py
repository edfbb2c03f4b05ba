"""How much of an agent's rate-limit windows is used, as its CLI last reported it, and what stands of a window
when a report comes in. Apart from the drivers (profile.py re-exports them): the planner and the store read
usage on every decision, and need none of a driver's values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta


@dataclass(frozen=True)
class UsageWindow:
    """How much of one of an agent's rate-limit windows is used, as its CLI last reported it.

    `window` is the CLI's own name for it (`5h`/`7d`, `primary`/`secondary`: its driver's); `resets_at` is
    None when the CLI said neither the reset nor the window's length (a driver that knows the length gives
    `seen_at` + length: the latest the window can reset). All times aware UTC. (Made by the drivers' usage
    readers, so it lives on the ground floor; the planner's model re-exports it.)
    """

    agent: str
    window: str
    used_percent: float
    resets_at: datetime | None
    seen_at: datetime

    def current(self, now: datetime) -> bool:
        """False once the window has reset: its usage then says nothing about the agent any more. A window
        of unknown reset and length is taken to last `UNKNOWN_WINDOW` from when it was seen, not for ever."""
        return (self.resets_at or self.seen_at + UNKNOWN_WINDOW) > now


# how long a usage window whose reset and length were not reported is taken to last: the shortest window the
# drivers know (claude's and codex's five hours), so a stale 100 % never outlives the real reset
UNKNOWN_WINDOW = timedelta(hours=5)


def kept_usage(on_record: UsageWindow | None, report: UsageWindow, now: datetime) -> UsageWindow | None:
    """What stands of one window once `report` comes in, given what is `on_record` for it; None: the record
    stays as it is. Any process may report a window (a worker even writes its CLI's transcript), and reports
    race, so a report cannot make the record say less than it knew:

    - a report seen in the future was seen `now`, at the latest;
    - a report of a window that has reset by `now` (a late one) never replaces a window that has not;
    - within one window (the same reset) the use only grows: 80 % then 30 % stays 80 %;
    - between two windows that have not reset the report seen last stands: a reset far in the future (a
      forged one) cannot keep the next true report out.
    """
    seen = min(report.seen_at, now)
    report = replace(report, seen_at=seen)
    if on_record is None or not on_record.current(now):
        return report
    if not report.current(now):
        return None
    if report.resets_at is not None and report.resets_at == on_record.resets_at:
        kept = replace(
            report,
            used_percent=max(report.used_percent, on_record.used_percent),
            seen_at=max(seen, on_record.seen_at),
        )
        return None if kept == on_record else kept
    return report if seen >= on_record.seen_at else None
