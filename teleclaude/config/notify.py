"""`[notify]`: where teleclaude sends word of what needs a human (Apprise URLs), which events, how often.

The table may be in `teleclaude.toml` (the user's or the project's) and in the user's own
`~/.config/teleclaude/notify.toml` (read last: it wins key by key), so that a token never has to be committed.
A URL holds its service's secret (a bot token, a webhook path): it is never shown whole; `Target.shown` names
it by its key and scheme alone. Whether a scheme is one Apprise knows is checked where Apprise is
(adapters/notify.py); here only the shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum

from teleclaude.planner.core.lazy_re import compiled

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

NOTIFY_KEYS = ("urls", "events", "min_interval", "digests", "timeout")
_URL = compiled(r"([a-z][a-z0-9+.-]*)://[!-~]+", re.IGNORECASE)  # printable ASCII, no space


class NotifyEvent(Enum):
    RUN_ENDED = "run_ended"  # `teleclaude run` stopped: COMPLETE, NEEDS_ATTENTION, PARKED, SELF, ERROR
    AGENTS_OUT = "agents_out"  # every agent for a step is out until a time; and again when work resumes
    PARKED = "parked"  # an item could not go on (a parallel run parks it; its review rounds are used up)
    UNRESPONSIVE = "unresponsive"  # a worker's agent was marked unresponsive
    NO_PROGRESS = "no_progress"  # a worker's digest found no progress: the supervisor's escalation
    BUDGET = "budget"  # an item, the run or the day passed 80 % of its [budget]


EVENT_NAMES = tuple(event.value for event in NotifyEvent)


class NotifyProblem(ValueError):
    """A `[notify]` value that is not right: its key (under notify) and what is wrong."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class Target:
    """One URL of `notify.urls`: where it was set and its key (`notify.urls[0]`); the URL itself never
    reaches a repr, a log or the terminal."""

    path: str
    key: str
    url: str = field(repr=False)

    @property
    def scheme(self) -> str:
        return self.url.partition("://")[0].lower()

    @property
    def shown(self) -> str:
        return f"{self.key} ({self.scheme}://…)"


@dataclass(frozen=True)
class NotifyConfig:
    targets: tuple[Target, ...] = ()
    events: frozenset[NotifyEvent] = frozenset(NotifyEvent)
    min_interval: float = 600.0  # seconds: the same notice (same event and subject) is sent once in it
    digests: bool = False  # also send each parent digest, shortened
    timeout: float = 10.0  # seconds one service may take before it counts as failed

    def wants(self, event: NotifyEvent | None) -> bool:
        """None: a digest (`digests`)."""
        if not self.targets:
            return False
        return self.digests if event is None else event in self.events


def parse_notify(path: str, value: Any, earlier: NotifyConfig | None = None) -> NotifyConfig:
    """One file's `[notify]` table over what earlier files set; raises NotifyProblem."""
    config = earlier or NotifyConfig()
    if not isinstance(value, dict):
        raise NotifyProblem("notify", "must be a table: [notify] with urls = [...]")
    for key, item in value.items():
        where = f"notify.{key}"
        if key == "urls":
            config = replace(config, targets=_targets(path, item))
        elif key == "events":
            if not isinstance(item, list) or not all(isinstance(name, str) for name in item):
                raise NotifyProblem(where, f"must be a list of event names: {', '.join(EVENT_NAMES)}")
            unknown = [name for name in item if name not in EVENT_NAMES]
            if unknown:
                names = ", ".join(EVENT_NAMES)
                raise NotifyProblem(where, f"{unknown[0]!r} is not an event; the events are {names}")
            config = replace(config, events=frozenset(NotifyEvent(name) for name in item))
        elif key in ("min_interval", "timeout"):
            if isinstance(item, bool) or not isinstance(item, int | float) or item < 0:
                raise NotifyProblem(where, f"must be a number of seconds, 0 or more, not {item!r}")
            if key == "timeout" and not 0 < item <= 300:
                raise NotifyProblem(where, f"must be more than 0 and at most 300 seconds, not {item!r}")
            seconds: Any = float(item)
            config = replace(config, **{key: seconds})
        elif key == "digests":
            if not isinstance(item, bool):
                raise NotifyProblem(where, f"must be true or false, not {item!r}")
            config = replace(config, digests=item)
        else:
            raise NotifyProblem(where, f"unknown key; the keys are {', '.join(NOTIFY_KEYS)}")
    return config


def _targets(path: str, value: Any) -> tuple[Target, ...]:
    if not isinstance(value, list):
        raise NotifyProblem("notify.urls", 'must be a list of Apprise URLs, e.g. ["ntfy://my-topic"]')
    targets = []
    for index, url in enumerate(value):
        key = f"notify.urls[{index}]"
        if not isinstance(url, str) or not _URL.fullmatch(url):  # the value is a secret: never in the message
            raise NotifyProblem(key, "is not a URL such as tgram://TOKEN/CHAT or ntfy://TOPIC (SCHEME://...)")
        targets.append(Target(path, key, url))
    return tuple(targets)


def without_secrets(urls: Any) -> str:
    """What `teleclaude trust` lists for `notify.urls`: each URL's scheme, the rest left out."""
    if not isinstance(urls, list):
        return "[…]"
    return "[" + ", ".join(f'"{str(url).partition("://")[0]}://…"' for url in urls) + "]"


# --- what is sent, and how often ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """One message: its event (None: a digest mirrored, or `notify --test`), the subject it is about (the
    key `Quiet` counts by: one message per event and subject within min_interval), a title and a body of
    plain text (what a worker wrote is made printable before it gets here)."""

    event: NotifyEvent | None
    subject: str
    title: str
    body: str

    @property
    def key(self) -> str:
        return f"{self.event.value if self.event else 'digest'}:{self.subject}"


@dataclass(frozen=True)
class Quiet:
    """De-duplication: a notice whose key was sent less than `min_interval` seconds ago is not sent again,
    so fifty flaps of one agent make one message. `sent` maps a key to when it was last sent (monotonic
    seconds)."""

    min_interval: float
    sent: tuple[tuple[str, float], ...] = ()

    def admit(self, notice: Notice, now: float) -> tuple[Quiet, bool]:
        last = dict(self.sent).get(notice.key)
        if last is not None and now - last < self.min_interval:
            return self, False
        kept = tuple((key, at) for key, at in self.sent if key != notice.key and now - at < self.min_interval)
        return replace(self, sent=(*kept, (notice.key, now))), True
