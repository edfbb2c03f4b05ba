"""The agent matrix (docs/design.md §3) and the choice of an agent given who is unavailable and how much of
each agent's rate-limit windows is used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from teleclaude.agents import NAMES
from teleclaude.config.notify import NotifyConfig
from teleclaude.config.spend import SpendConfig
from teleclaude.planner.core.model import AgentChoice, Step, Unavailability, UsageWindow

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from teleclaude.config.checks import Checks
    from teleclaude.config.profiles import RuntimeConfig, Untrusted

THINKING_MODES: tuple[str, ...] = ("fast", "med", "slow")
DEFAULT_HEADROOM = 90.0  # percent of any one window: above it, an agent goes after those below it


def _row(*pairs: str) -> tuple[AgentChoice, ...]:
    return tuple(AgentChoice(*pair.split(":")) for pair in pairs)


DEFAULT_MATRIX: Mapping[str, tuple[AgentChoice, ...]] = {
    "requirements": _row("claude:slow", "gemini:slow"),
    "plan": _row("claude:slow", "gemini:slow"),
    "bugs": _row("codex:med", "claude:med", "gemini:med"),
    "build": _row("gemini:med", "claude:med", "codex:med"),
    "review": _row("codex:slow", "claude:slow", "gemini:slow"),
    "fix": _row("claude:med", "gemini:med", "codex:med"),
    "finalize": _row("claude:med", "gemini:med", "codex:med"),
    "commit": _row("claude:fast", "gemini:fast", "codex:fast"),
}


@dataclass(frozen=True)
class Config:
    """Settings a `teleclaude.toml` may override."""

    matrix: Mapping[str, tuple[AgentChoice, ...]] = field(default_factory=lambda: dict(DEFAULT_MATRIX))
    agents: tuple[str, ...] = NAMES
    max_review_rounds: int = 3
    headroom: float = DEFAULT_HEADROOM  # [matrix] headroom
    runtime: RuntimeConfig | None = None  # None: the defaults (the planner never needs them)
    notify: NotifyConfig = field(default_factory=NotifyConfig)  # [notify]: its urls only from trusted files
    checks: Checks | None = None  # [checks]; None: merges are not gated
    spend: SpendConfig = field(default_factory=SpendConfig)  # [prices] and [budget]

    def gate_withheld(self) -> Untrusted | None:
        """The project file's [checks] commands when they were left out, untrusted: nothing is gated
        with them, and nothing may be merged without them."""
        untrusted = self.runtime.untrusted if self.runtime else None
        if untrusted and any(key.startswith("checks.") for key in untrusted.keys):
            return untrusted
        return None

    def row(self, step: Step) -> tuple[AgentChoice, ...]:
        """The step's row, keeping only agents this installation has."""
        return tuple(c for c in self.matrix.get(step.task, ()) if c.agent in self.agents)


def active_unavailability(rows: Mapping[str, Unavailability], now: datetime) -> dict[str, Unavailability]:
    """Drop rows whose time has passed: an agent recovers by itself."""
    return {agent: u for agent, u in rows.items() if u.until > now}


def over_headroom(windows: Iterable[UsageWindow], headroom: float, now: datetime) -> tuple[UsageWindow, ...]:
    """The windows that have not reset by `now` and are used `headroom` percent or more."""
    return tuple(w for w in windows if w.current(now) and w.used_percent >= headroom)


def choose_agent(
    config: Config,
    step: Step,
    unavailable: Mapping[str, Unavailability],
    now: datetime,
    usage: Mapping[str, Iterable[UsageWindow]] | None = None,
) -> AgentChoice | None:
    """In the step's row, the first agent that is not unavailable at `now` and whose every window is under
    the headroom; when each is over it, the first that is not unavailable; None means nobody is. An agent
    with no usage on record counts as under."""
    blocked = active_unavailability(unavailable, now)
    free = [c for c in config.row(step) if c.agent not in blocked]
    usage = usage or {}
    roomy = (c for c in free if not over_headroom(usage.get(c.agent, ()), config.headroom, now))
    return next(roomy, free[0] if free else None)
