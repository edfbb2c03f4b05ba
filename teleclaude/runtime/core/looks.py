"""How often `teleclaude run` looks at its busy workers' panes.

A look lists every pane (a tmux client) and reads those that printed since the last; at thirty quiet workers
it was most of a run's own CPU while they worked. What a worker does that matters comes without a look: its
hooks (a turn's end, a tool use, a StopFailure) and its pane's exit wake the run's wait at once. The looks
are for what only a pane shows (a limit message, a dialog, a worker silent too long, a pane gone): after a
look that found nothing new the next comes later, each time twice as late, up to LONGEST poll intervals;
one that found a pane that printed, or a worker whose state changed, brings them back to every interval.
A wait someone asked for `fresh` (MCP's wait_for_sessions) looks every interval all the same.
"""

from __future__ import annotations

STRETCH = 2.0  # after a look that found nothing new, the next comes this many times later
LONGEST = 4.0  # poll intervals: the latest the next look comes while nothing is new


def look_every(every: float, poll: float, news: bool, remote: bool = False) -> float:
    """Seconds from this look to the next, after the last came `every` seconds after the one before: `poll`
    when this look found news (a pane printed, a session changed) or watches a worker on another computer
    (`remote`: its wake-up crosses ssh, where a computer's `MaxSessions` may leave a `wait-for` client
    unopened; at thirty workers over ssh, looked at up to four intervals apart, a turn's end was heard
    1.7 s (p50) to 8.8 s (p95) after its hook), else
    `every` stretched, from `poll` up to LONGEST × `poll`."""
    if news or remote:
        return poll
    return min(max(every, poll) * STRETCH, LONGEST * poll)


def due(every: float, poll: float) -> float:
    """`every` kept within `poll` .. LONGEST × `poll` (the setting may change between looks)."""
    return min(max(every, poll), LONGEST * poll)
