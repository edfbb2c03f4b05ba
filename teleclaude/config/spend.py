"""`[prices]` and `[budget]` of teleclaude.toml: what a model's tokens cost, and how much an item, a run and a
day may spend.

`[prices]`: `"MODEL" = {input = 3.0, cached = 0.3, output = 15.0}`, dollars per million tokens, for a model
whose name contains MODEL (the longest such key wins; the shipped `default_prices()` are the list prices of
the models the drivers name, overridden key by key); `subscription = ["NAME", …]`: agents logged in with a
plan, shown in tokens and as "subscription" (what they cost is the plan, not the tokens).

`[budget]`: `item_tokens`, `item_usd`, `run_tokens`, `run_usd`, `day_tokens`, `day_usd` (a day is the UTC
day, across runs and projects). Each must be more than 0; a key left out sets no limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cache

from teleclaude.config.checks import ChecksError

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from teleclaude.agents.tokens import Price

    _Prices = Mapping[str, Price]
else:  # agents/tokens.py imported when a price is first read, not by every read of the settings
    _Prices = Mapping

EXAMPLE = """\
# [budget]: what a night may cost. `teleclaude run` checks it before each worker: at 80 % of a limit a
# warning; at 100 % an item is parked (the others go on), or the run stops between steps (never in a
# merge). A day is the UTC day, every run together. Tokens count for every login; dollars are what the CLI
# reports, else the list price of its model (an estimate; [prices] overrides it).
# [budget]
# item_usd = 5
# run_tokens = 20000000
# day_usd = 40
"""

BUDGET_KEYS = ("item_tokens", "item_usd", "run_tokens", "run_usd", "day_tokens", "day_usd")
PRICE_KEYS = ("input", "cached", "output")


# the list prices (USD per million tokens) of the models the drivers name, as their providers publish them
# (each driver's `TokenReport.prices`); a cost from these is an estimate (marked so): what a CLI reports
# itself is used instead
@cache
def default_prices() -> dict[str, Price]:
    from teleclaude.agents import PROFILES

    return {model: price for profile in PROFILES.values() for model, price in profile.tokens.prices.items()}


class DefaultPrices(_Prices):
    """`default_prices()`, read when first asked: the drivers that name them are imported then, not by every
    call that reads the settings (the planner's next step reads no price)."""

    def __getitem__(self, model: str) -> Price:
        return default_prices()[model]

    def __iter__(self) -> Iterator[str]:
        return iter(default_prices())

    def __len__(self) -> int:
        return len(default_prices())

    def __repr__(self) -> str:
        return repr(default_prices())


@dataclass(frozen=True)
class Budget:
    """The limits of `[budget]`; None: no limit."""

    item_tokens: int | None = None
    item_usd: float | None = None
    run_tokens: int | None = None
    run_usd: float | None = None
    day_tokens: int | None = None
    day_usd: float | None = None

    @property
    def any(self) -> bool:
        return any(getattr(self, key) is not None for key in BUDGET_KEYS)


@dataclass(frozen=True)
class SpendConfig:
    prices: Mapping[str, Price] = field(default_factory=DefaultPrices)
    subscription: tuple[str, ...] = ()  # agents logged in with a plan
    budget: Budget = Budget()

    def price(self, model: str) -> Price | None:
        """The price of the longest key `model` contains; None for a model no key names."""
        name = model.lower()
        keys = [key for key in self.prices if key.lower() in name]
        return self.prices[max(keys, key=len)] if keys and name else None


class SpendError(ChecksError):
    """A `[prices]` or `[budget]` problem: its file and key, as a `[checks]` problem names them."""


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def parse_budget(path: str, value: Any, earlier: SpendConfig | None = None) -> SpendConfig:
    spend = earlier or SpendConfig()
    if not isinstance(value, dict):
        raise SpendError(
            path, "budget", "must be a table: [budget] with item_usd = 5, run_tokens = 2000000, …"
        )
    budget = spend.budget
    for key, item in value.items():
        where = f"budget.{key}"
        if key not in BUDGET_KEYS:
            raise SpendError(path, where, f"unknown key; the keys are {', '.join(BUDGET_KEYS)}")
        if not _number(item) or item <= 0:
            raise SpendError(
                path, where, f"must be a number more than 0 (leave it out for no limit), not {item!r}"
            )
        if key.endswith("_tokens"):
            if item != int(item):
                raise SpendError(path, where, f"must be a whole number of tokens, not {item!r}")
            item = int(item)
        number: Any = item if key.endswith("_tokens") else float(item)
        budget = replace(budget, **{key: number})
    return replace(spend, budget=budget)


def parse_prices(path: str, value: Any, earlier: SpendConfig | None = None) -> SpendConfig:
    spend = earlier or SpendConfig()
    if not isinstance(value, dict):
        raise SpendError(path, "prices", 'must be a table: [prices] with "MODEL" = {input = …, output = …}')
    prices = dict(spend.prices)
    subscription = spend.subscription
    for key, item in value.items():
        where = f"prices.{key}"
        if key == "subscription":
            if not isinstance(item, list) or not all(isinstance(name, str) and name for name in item):
                raise SpendError(path, where, f'must be a list of agent names, e.g. ["NAME"], not {item!r}')
            subscription = tuple(item)
            continue
        if not isinstance(item, dict) or not key.strip():
            raise SpendError(path, where, "must be a table: {input = 3.0, cached = 0.3, output = 15.0}")
        for name, number in item.items():
            if name not in PRICE_KEYS:
                raise SpendError(
                    path, f"{where}.{name}", f"unknown key; the keys are {', '.join(PRICE_KEYS)}"
                )
            if not _number(number) or number < 0:
                raise SpendError(
                    path, f"{where}.{name}", f"must be dollars per million tokens, not {number!r}"
                )
        if "input" not in item or "output" not in item:
            raise SpendError(path, where, "needs input and output (dollars per million tokens)")
        from teleclaude.agents.tokens import Price

        prices[key] = Price(
            float(item["input"]),
            float(item["cached"] if "cached" in item else item["input"]),
            float(item["output"]),
        )
    return replace(spend, prices=prices, subscription=subscription)
