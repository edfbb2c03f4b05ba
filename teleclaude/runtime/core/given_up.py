"""A worker on a computer that stays unreachable is given up (issue 40 §4: "taken up again … elsewhere").

A computer that stops answering (sshd stopped, network down) leaves its workers RUNNING and unread
(observer.py `_unreachable`): when it answers again each goes on where it was. One that stays away longer than
`[runtime] unreachable_wait` has its workers given up: each session ends (CANCELLED, its `last_error` says
why), and its lane's step is asked again and started elsewhere (here, or another computer with a lane to
spare, never one that is unreachable), from the item's branch as it was last brought back. When the computer
answers again later, the old worker there is ended and what it committed since is kept here under a ref no
one merges (`kept_ref`). Pure: the clock and what ssh reaches are values; runtime/given_up.py carries it out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from teleclaude.runtime.core.sessions import Event, EventKind, Session, SessionState

GIVEN_UP = "given up"  # how a given-up session's `last_error` begins
SWEPT = "ended on its computer"  # how the event begins that says its old worker there was ended (`swept`)
KEPT = "refs/teleclaude/given-up"  # its commits made there since the last bring-back: never merged
SWEEP_EVERY = 30.0  # seconds between two tries to reach a computer whose given-up workers are not ended yet
# the states of a worker its lane waits on; any other (a turn ended, a limit, attention) the lane reacts to
WAITED_ON = frozenset({SessionState.PENDING, SessionState.RUNNING, SessionState.STALLED})


def down_since(before: Mapping[str, datetime], down: Iterable[str], now: datetime) -> dict[str, datetime]:
    """Since when each computer ssh cannot reach now has been unreachable, as the run saw it: since it was
    first seen down (`before`), else since now; a computer that answers again is forgotten."""
    return {name: before.get(name, now) for name in sorted(set(down))}


def gives_up(session: Session, since: Mapping[str, datetime], now: datetime, wait: float) -> bool:
    """Whether the run gives up `session`'s worker: its lane waits on it (`WAITED_ON`), on a computer
    unreachable for longer than `wait` seconds (`since`: `down_since`). `wait` 0: never (a computer is waited
    for however long)."""
    if wait <= 0 or session.state not in WAITED_ON or session.computer not in since:
        return False
    return (now - since[session.computer]).total_seconds() > wait


def why(computer: str, since: datetime, now: datetime) -> str:
    """The given-up session's `last_error` (and its event's detail)."""
    seconds = round((now - since).total_seconds())
    return f"{GIVEN_UP}: {computer} could not be reached for {seconds} s; its step is taken up elsewhere"


def is_given_up(session: Session) -> bool:
    return session.state is SessionState.CANCELLED and session.last_error.startswith(GIVEN_UP)


def moved_to(
    lane_computer: str, in_use: Iterable[str], remote_lanes: Mapping[str, int], down: Iterable[str]
) -> str:
    """Where a lane whose worker was given up goes on: the first other computer with a lane to spare that ssh
    reaches (in the order of teleclaude.toml), else this machine; never `lane_computer` (its clone there
    holds the old worker's branch until it is back and swept: `kept_ref`)."""
    used, out = Counter(in_use), {lane_computer, *down}
    for name, lanes in remote_lanes.items():
        if name not in out and used[name] < lanes:
            return name
    return "local"


def holding(pending: Iterable[Session], slug: str) -> frozenset[str]:
    """The computers whose clone still holds a given-up worker of item `slug` (`pending`: not yet ended
    there, its worktree and branch not yet kept and removed): the item's steps go elsewhere meanwhile, else
    one would start in the old worker's worktree beside it, and the sweep remove that worktree under it."""
    return frozenset(s.computer for s in pending if s.slug == slug)


def kept_ref(slug: str, session_id: str) -> str:
    """Where the commits a given-up worker made since its last bring-back are kept (fetched once its computer
    answers again): a ref no branch, merge or finalize touches."""
    return f"{KEPT}/{slug}/{session_id}"


def sweeps(pending: Iterable[Session], down: Iterable[str], last_try: float, now: float) -> list[Session]:
    """The given-up sessions to end on their computers now (`now`, `last_try`: monotonic seconds): those of
    a computer not known down, or of one not tried for `SWEEP_EVERY` seconds (a computer no worker uses is
    not looked at by the run: only a try tells that it is back)."""
    gone = set(down)
    due = now - last_try >= SWEEP_EVERY
    return [s for s in pending if s.computer not in gone or due]


@dataclass(frozen=True)
class Kept:
    """A given-up worker's commits since its last bring-back, fetched here once its computer was back (`ref`
    empty: it had made none)."""

    session: str
    computer: str
    slug: str
    ref: str = ""

    def text(self) -> str:
        if not self.ref:
            return f"{self.session} on {self.computer} (given up) ended there; it had committed nothing more"
        return (
            f"{self.session} on {self.computer} (given up) ended there; its later commits are kept at "
            f"{self.ref}: git log HEAD..{self.ref}"
        )


def swept(kept: Kept, at: datetime) -> Event:
    """The event in a given-up session's history once its old worker was ended on its computer: a later run
    does not try again."""
    return Event(kept.session, EventKind.ENDED, at, f"{SWEPT}: {kept.text()}")


def unswept(sessions: Iterable[Session], events: Iterable[Event]) -> list[Session]:
    """The given-up sessions whose old worker was never ended on its computer (it came back only after the
    run that gave it up ended, or not yet): a run tries them again."""
    done = {e.session_id for e in events if e.kind is EventKind.ENDED and e.detail.startswith(SWEPT)}
    return [s for s in sessions if is_given_up(s) and s.id not in done]
