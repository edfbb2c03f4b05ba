"""How often `teleclaude run` looks at its busy workers' panes.

A look lists every pane (a tmux client) and reads those that printed since the last; at thirty quiet workers
it was most of a run's own CPU while they worked. What a worker does that matters comes without a look: its
hooks (a turn's end, a tool use, a StopFailure) and its pane's exit wake the run's wait at once. The looks
are for what only a pane shows (a limit message, a dialog, a worker silent too long, a pane gone): after a
look that found nothing new the next comes later, each time twice as late, up to LONGEST poll intervals;
one that found a pane that printed, or a worker whose state changed, brings them back to every interval.
A wait someone asked for `fresh` (MCP's wait_for_sessions) looks every interval all the same.

Workers on another computer wake the run through one waiter a computer (adapters/ssh.py `_Waker`), which
says only that one of them moved: the run lists that computer's panes and looks first at the workers whose
panes show why (`moved_first`), so their news is told before a look at every pane.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from teleclaude.runtime.core.sessions import PaneView, Session

STRETCH = 2.0  # after a look that found nothing new, the next comes this many times later
LONGEST = 4.0  # poll intervals: the latest the next look comes while nothing is new


def look_every(every: float, poll: float, news: bool) -> float:
    """Seconds from this look to the next, after the last came `every` seconds after the one before: `poll`
    when this look found news (a pane printed, a session changed), else `every` stretched, from `poll` up to
    LONGEST × `poll`."""
    if news:
        return poll
    return min(max(every, poll) * STRETCH, LONGEST * poll)


def moved(view: PaneView | None) -> bool:
    """The pane shows why its computer's waiter was woken: its CLI exited (its wrapper's exit status is on
    it before the wake, its end may come after), its hook marked a turn's end or a stop failure; or it is
    gone."""
    return view is None or view.dead or bool(view.turn_end or view.stop_failure)


def turn_over(view: PaneView | None) -> bool:
    """The pane shows its worker's turn ended (its stop hook's mark) or its CLI exited: its branch comes back
    before that is saved (a stop failure brings nothing back)."""
    return view is not None and (view.dead or bool(view.turn_end))


def moved_first(
    sessions: Iterable[Session], views: Mapping[str, PaneView], computers: Iterable[str]
) -> frozenset[str]:
    """The live workers on `computers` (those whose waiter woke) whose panes moved (`moved`) by `views`:
    looked at before the rest. A worker whose pane is not open yet (still starting) is not among them."""
    woken = set(computers)
    return frozenset(
        s.id
        for s in sessions
        if s.computer in woken and not s.state.is_final and s.pane_id and moved(views.get(s.pane_id))
    )


def due(every: float, poll: float) -> float:
    """`every` kept within `poll` .. LONGEST × `poll` (the setting may change between looks)."""
    return min(max(every, poll), LONGEST * poll)
