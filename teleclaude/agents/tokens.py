"""What a worker used, as its CLI's own record of the session says: tokens in and out, and the dollars when
the CLI reports them. Made by the drivers' token readers (`AgentProfile.tokens`), so it lives on the ground
floor; the runtime's `core/spend.py` prices, sums and budgets it.

A count the record does not give is None: unknown, never 0. A hostile record (a negative count, a
non-number, a number past `MOST`) counts as unknown too, never as a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

# read without this module's dataclasses by a worker's stop hook (transcripts.py, answers.py), and kept here
# for the rest
from teleclaude.agents.answers import MOST_USD as MOST_USD
from teleclaude.agents.answers import dollars as dollars
from teleclaude.agents.transcripts import MOST as MOST
from teleclaude.agents.transcripts import add as add
from teleclaude.agents.transcripts import count as count
from teleclaude.agents.transcripts import json_lines as json_lines

TYPE_CHECKING = False  # typing's own, without importing typing (every driver imports this module)
if TYPE_CHECKING:
    from teleclaude.agents.transcripts import Reading


@dataclass(frozen=True)
class Tokens:
    """A session's use so far (a CLI's record is cumulative: each reading replaces the last).

    `input` counts every input token, those read from the provider's cache too (`cached`, a part of it);
    `output` every output token, the model's reasoning too (`reasoning`, a part of it). `cost_usd` is what
    the CLI itself says the session cost (None: it says nothing). `model`: the last model it named."""

    input: int | None = None
    cached: int | None = None
    output: int | None = None
    reasoning: int | None = None
    cost_usd: float | None = None
    model: str = ""

    @property
    def known(self) -> bool:
        return self.input is not None and self.output is not None

    @property
    def total(self) -> int | None:
        """Input and output tokens, None when either is unknown."""
        if self.input is None or self.output is None:
            return None
        return self.input + self.output

    def ahead_of(self, before: Tokens) -> bool:
        """A later reading of the same cumulative record that says more than `before`: not the same, and
        no count or cost below `before`'s (one `before` knew and this one does not: not ahead)."""
        if self == before:
            return False
        pairs = (
            (self.input, before.input),
            (self.cached, before.cached),
            (self.output, before.output),
            (self.reasoning, before.reasoning),
            (self.cost_usd, before.cost_usd),
        )
        return all(old is None or (new is not None and new >= old) for new, old in pairs)


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens: fresh input, input read from the provider's cache, output."""

    input: float
    cached: float
    output: float


@dataclass(frozen=True)
class DatabaseRecord:
    """A CLI that keeps what its sessions used in an SQLite database of its own: `where(environ)` names the
    file (from the CLI's environment: its HOME), `query` (bound as the CLI's own id of the session) selects
    its rows and `read(rows)` sums them: pure, never raises; None when the rows say nothing usable. The file
    is only ever read (adapters/records.py)."""

    where: Callable[[Mapping[str, str]], str]
    query: str
    read: Callable[[list[tuple[object, ...]]], Tokens | None]


@dataclass(frozen=True)
class TokenReport:
    """Where the CLI records what a session used, and its reader.

    `read(text)` gives the session's use so far from the whole text of the file the CLI's stop hook names
    (`transcript_path`): pure, never raises; None when the text says nothing usable. A CLI that keeps it in
    a database has `database` instead; one with neither has `read=None`, and `lacking` says why."""

    read: Callable[[str], Tokens | None] | None = None
    lacking: str = "what it used was not looked for"
    # the list prices of the models the driver names, by a part of their names (`[prices]` overrides them)
    prices: Mapping[str, Price] = field(default_factory=dict)
    # a record that is a database (read instead of the stop hook's `transcript_path`)
    database: DatabaseRecord | None = None


def summed(
    messages: Iterable[tuple[int | None, int | None, int | None, int | None]], model: str = ""
) -> Tokens | None:
    """The sum of each response's (input, cached, output, reasoning); None when there were none. A
    response with an unknown input or output makes that sum unknown (never a count short of the truth)."""
    rows = list(messages)
    if not rows:
        return None
    totals: list[int | None] = [0, 0, 0, 0]
    for row in rows:
        totals = [add(total, part) for total, part in zip(totals, row, strict=True)]
    return Tokens(totals[0], totals[1], totals[2], totals[3], model=model)


def of_reading(reading: Reading) -> Tokens | None:
    """What a transcript's `Reading` says the session used; None when it read no message."""
    used = reading.used()
    return None if used is None else Tokens(*used[:4], model=used[4])
