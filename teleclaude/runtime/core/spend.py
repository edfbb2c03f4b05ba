"""What the workers used, priced, summed and held against `[budget]` (pure).

Each worker's stop hook reads its CLI's record of the session (the driver's `tokens` reader) and keeps a
`Reading` (the session's use so far) in the session store whenever it changed. A session's use is its last
reading; a turn's is the difference between two readings; a day's is the sum of the differences read that
day. What no reading says is unknown: a total counts the sessions it could not count (`unknown`), never
as 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from teleclaude.agents.tokens import Tokens, add, count, dollars
from teleclaude.config.spend import BUDGET_KEYS, Budget, SpendConfig

WARN_AT = 0.8  # of a budget: a warning


@dataclass(frozen=True)
class Reading:
    """A session's use so far, as read at `at` (one row of the store)."""

    session_id: str
    at: datetime
    tokens: Tokens


class Pricing(Enum):
    REPORTED = "reported"  # the CLI said what it cost
    ESTIMATE = "estimate"  # its tokens at the price table's price
    SUBSCRIPTION = "subscription"  # a plan's login: its price is the plan
    UNKNOWN = "unknown"  # no tokens, or a model the price table does not name


@dataclass(frozen=True)
class Cost:
    usd: float | None
    pricing: Pricing


def cost(tokens: Tokens, agent: str, config: SpendConfig) -> Cost:
    if agent in config.subscription:
        return Cost(None, Pricing.SUBSCRIPTION)
    if tokens.cost_usd is not None:
        return Cost(tokens.cost_usd, Pricing.REPORTED)
    price = config.price(tokens.model)
    if price is None or tokens.input is None or tokens.output is None:
        return Cost(None, Pricing.UNKNOWN)
    cached = min(tokens.cached or 0, tokens.input)
    usd = ((tokens.input - cached) * price.input + cached * price.cached + tokens.output * price.output) / 1e6
    return Cost(usd, Pricing.ESTIMATE)


@dataclass(frozen=True)
class Total:
    """What some sessions used: the sums of what is known, and how many sessions each sum leaves out."""

    sessions: int = 0
    tokens: int = 0
    input: int = 0
    cached: int = 0
    output: int = 0
    unknown: int = 0  # sessions whose tokens are unknown
    usd: float = 0.0
    unpriced: int = 0  # sessions whose dollars are unknown (no price, no tokens)
    estimate: bool = False  # some of `usd` is an estimate from the price table
    subscription: int = 0  # sessions of a plan's login: in tokens only

    def plus(self, tokens: Tokens | None, agent: str, config: SpendConfig) -> Total:
        if tokens is None or tokens.total is None:
            return replace(
                self,
                sessions=self.sessions + 1,
                unknown=self.unknown + 1,
                unpriced=self.unpriced + (agent not in config.subscription),
                subscription=self.subscription + (agent in config.subscription),
            )
        priced = cost(tokens, agent, config)
        return Total(
            self.sessions + 1,
            self.tokens + tokens.total,
            self.input + (tokens.input or 0),
            self.cached + (tokens.cached or 0),
            self.output + (tokens.output or 0),
            self.unknown,
            self.usd + (priced.usd or 0.0),
            self.unpriced + (priced.pricing is Pricing.UNKNOWN),
            self.estimate or priced.pricing is Pricing.ESTIMATE,
            self.subscription + (priced.pricing is Pricing.SUBSCRIPTION),
        )

    @property
    def known(self) -> bool:
        return self.sessions > self.unknown

    def text(self) -> str:
        """`1.2M tokens, $3.40 (estimate)`; what is unknown said so, never as 0."""
        if not self.sessions:
            return "nothing used"
        if not self.known:
            return "unknown"
        parts = [f"{tokens_text(self.tokens)} tokens"]
        priced = self.sessions - self.unpriced - self.subscription
        if priced > 0:
            parts.append(usd_text(self.usd) + (" (estimate)" if self.estimate else ""))
        if self.subscription:
            parts.append("subscription")
        if self.unknown:
            parts.append(f"{self.unknown} session{'s' if self.unknown != 1 else ''} unknown")
        elif self.unpriced and priced <= 0 and not self.subscription:
            parts.append("$ unknown")
        return ", ".join(parts)

    def as_json(self) -> dict[str, object]:
        return {
            "sessions": self.sessions,
            "tokens": self.tokens if self.known else None,
            "input": self.input if self.known else None,
            "cached": self.cached if self.known else None,
            "output": self.output if self.known else None,
            "unknown_sessions": self.unknown,
            "usd": round(self.usd, 6) if self.sessions - self.unpriced - self.subscription > 0 else None,
            "estimate": self.estimate,
            "subscription_sessions": self.subscription,
            "text": self.text(),
        }


def merged(totals: Iterable[Total]) -> Total:
    """One total of several (an item's, of its sessions' each)."""
    found = Total()
    for one in totals:
        found = Total(
            found.sessions + one.sessions,
            found.tokens + one.tokens,
            found.input + one.input,
            found.cached + one.cached,
            found.output + one.output,
            found.unknown + one.unknown,
            found.usd + one.usd,
            found.unpriced + one.unpriced,
            found.estimate or one.estimate,
            found.subscription + one.subscription,
        )
    return found


def usd_text(usd: float) -> str:
    """Dollars to the cent; a sum under ten cents to a hundredth of a cent (never a cost shown as $0.00)."""
    return f"${usd:.2f}" if usd >= 0.1 or usd == 0 else f"${usd:.4f}"


def tokens_text(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 10_000:
        return f"{count / 1000:.0f}k"
    return f"{count:,}"


def latest(readings: Iterable[Reading]) -> dict[str, Tokens]:
    """Session id -> its last reading's tokens (readings oldest first)."""
    return {reading.session_id: reading.tokens for reading in readings}


def turns(readings: Sequence[Reading]) -> list[Reading]:
    """One session's readings (oldest first) as what each turn used: the difference from the reading
    before (a count that shrank, a record rotated or cut, is unknown for that turn)."""
    found, before = [], Tokens(0, 0, 0, 0)
    for reading in readings:
        found.append(replace(reading, tokens=_less(reading.tokens, before)))
        before = reading.tokens
    return found


def _less(now: Tokens, before: Tokens) -> Tokens:
    def less(one: int | None, other: int | None) -> int | None:
        if one is None or other is None or one < other:
            return None
        return one - other

    usd = None
    if now.cost_usd is not None:
        usd = now.cost_usd - (before.cost_usd or 0.0) if now.cost_usd >= (before.cost_usd or 0.0) else None
    return Tokens(
        less(now.input, before.input),
        less(now.cached, before.cached),
        less(now.output, before.output),
        less(now.reasoning, before.reasoning),
        usd,
        now.model,
    )


def since(readings: Iterable[Reading], start: datetime) -> dict[str, Tokens]:
    """Session id -> what it used from `start` on (a day's): its turns read since then, summed."""
    by_session: dict[str, list[Reading]] = {}
    for reading in readings:
        by_session.setdefault(reading.session_id, []).append(reading)
    used: dict[str, Tokens] = {}
    for session_id, rows in by_session.items():
        recent = [turn.tokens for turn in turns(rows) if turn.at >= start]
        if recent:
            used[session_id] = _sum(recent)
    return used


def _sum(parts: Sequence[Tokens]) -> Tokens:
    first = parts[0]
    total = first
    for part in parts[1:]:
        usd = None if total.cost_usd is None or part.cost_usd is None else total.cost_usd + part.cost_usd
        total = Tokens(
            add(total.input, part.input),
            add(total.cached, part.cached),
            add(total.output, part.output),
            add(total.reasoning, part.reasoning),
            usd,
            part.model or total.model,
        )
    return total


def total(used: Mapping[str, Tokens], agents: Mapping[str, str], config: SpendConfig) -> Total:
    """The sum over `agents` (session id -> its agent) of what each used (`used`: a missing one is
    unknown)."""
    found = Total()
    for session_id, agent in agents.items():
        found = found.plus(used.get(session_id), agent, config)
    return found


# --- budgets -----------------------------------------------------------------------------------------------


class Scope(Enum):
    ITEM = "item"
    RUN = "run"
    DAY = "day"


class Level(Enum):
    OK = "ok"
    WARN = "warn"  # past WARN_AT of a limit
    OVER = "over"  # the limit is reached: no further step


@dataclass(frozen=True)
class Verdict:
    level: Level
    scope: Scope | None = None
    key: str = ""  # the [budget] key, e.g. item_usd
    spent: float = 0.0
    limit: float = 0.0

    def text(self) -> str:
        if self.scope is None:
            return "within budget"
        usd = self.key.endswith("_usd")
        spent = usd_text(self.spent) if usd else f"{tokens_text(int(self.spent))} tokens"
        limit = usd_text(self.limit) if usd else f"{tokens_text(int(self.limit))} tokens"
        share = f"{self.spent / self.limit:.0%}" if self.limit else "?"
        return f"{self.scope.value} spent {spent} of its budget {self.key} = {limit} ({share})"


OK = Verdict(Level.OK)


def decide(budget: Budget, item: Total, run: Total, day: Total) -> Verdict:
    """The budget verdict before a step: OVER when any limit is reached (the item's first, then the run's,
    then the day's), else WARN past 80 % of one, else OK. Unknown spend counts as nothing spent (it
    cannot be held against a limit) but a subscription's tokens count against token limits."""
    worst = OK
    for scope, spent in ((Scope.ITEM, item), (Scope.RUN, run), (Scope.DAY, day)):
        for key in BUDGET_KEYS:
            limit = getattr(budget, key)
            if limit is None or not key.startswith(scope.value + "_"):
                continue
            used = float(spent.tokens) if key.endswith("_tokens") else spent.usd
            if used >= limit:
                return Verdict(Level.OVER, scope, key, used, float(limit))
            if used >= WARN_AT * limit and worst.level is Level.OK:
                worst = Verdict(Level.WARN, scope, key, used, float(limit))
    return worst


def raised(verdict: Verdict) -> str:
    """The `--budget` argument that doubles the limit that was reached."""
    value = verdict.limit * 2
    number = f"{int(value)}" if verdict.key.endswith("_tokens") else f"{value:g}"
    return f"{verdict.key}={number}"


def encode_tokens(tokens: Tokens) -> str:
    """What a worker on another computer used, as the mark its stop hook puts on its pane (its hook cannot
    reach this machine's database): `[input, cached, output, reasoning, cost, model]`, JSON in printable
    ASCII on one row. The observer reads it back (`decode_tokens`)."""
    return json.dumps(
        [tokens.input, tokens.cached, tokens.output, tokens.reasoning, tokens.cost_usd, tokens.model[:100]]
    )


def decode_tokens(mark: str) -> Tokens:
    """A pane's spend mark as what its session used; a count that is not one is unknown, and anything that is
    not a mark at all is all unknown (never 0)."""
    try:
        row = json.loads(mark)
    except ValueError:
        return Tokens()
    if not (isinstance(row, list) and len(row) == 6):
        return Tokens()
    fresh, cached, out, reasoning, usd, model = row
    return Tokens(
        count(fresh),
        count(cached),
        count(out),
        count(reasoning),
        dollars(usd),
        model[:100] if isinstance(model, str) else "",
    )


def decode_cost(mark: str) -> float | None:
    """A pane's cost mark (dollars, as its status line said them); None for anything that is not one."""
    try:
        return dollars(float(mark))
    except ValueError:
        return None
