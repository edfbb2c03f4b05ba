"""How much of its rate-limit windows an agent has used, in one line: the planner's answers, the status board
and `teleclaude hook statusline` (each refresh of Claude Code's status line, so apart from render.py's
model of the planner's answers) show it alike."""

from __future__ import annotations

from teleclaude.agents.moments import datetime, timedelta, tzinfo
from teleclaude.planner.core.terminal import printable

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable

    from teleclaude.agents.usage import UsageWindow


def usage_text(windows: Iterable[UsageWindow], now: datetime, zone: tzinfo) -> str:
    """`5h 83% ↺ 19:00 · 7d 41% ↺ Sat 29 09:00`: each window not yet reset, the share used and, when its CLI
    said, when it resets (in `zone`; the day too when that is 20 hours or more away)."""
    return " · ".join(
        window_text(w.window, w.used_percent, w.resets_at, now, zone) for w in windows if w.current(now)
    )


def window_text(
    window: str, used_percent: float, resets_at: datetime | None, now: datetime, zone: tzinfo
) -> str:
    """One window of `usage_text`: `5h 83% ↺ 19:00`."""
    text = f"{printable(window)} {used_percent:.0f}%"
    if resets_at is not None:
        here = resets_at.astimezone(zone)
        soon = resets_at - now < timedelta(hours=20)
        text += f" ↺ {here:%H:%M}" if soon else f" ↺ {here:%a %d %H:%M}"
    return text
