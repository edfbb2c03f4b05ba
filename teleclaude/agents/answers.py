"""What a CLI that keeps its sessions' messages in an SQLite database of its own says a session used, as
plain values: a worker's stop hook reads it at every turn's end, so this module imports no driver
(`dataclasses`, `enum`, `re`) nor `math`; the driver's reader (`DatabaseRecord`) makes its `Tokens` of the
same values (its module says what the database holds)."""

from __future__ import annotations

from teleclaude.agents.transcripts import add, count, finite

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    Used = tuple[int | None, int | None, int | None, int | None, float | None, str]

MOST_USD = 10.0**7  # tokens.py's: more dollars than any one session costs

# each answer of the session and of its subagents' sessions (`parent_id`), oldest first: its `data` has
# `tokens: {input, output, reasoning, cache: {read, write}}` (input without what was read from or written to
# the cache, output without the reasoning), `cost` (0 for a model its catalogue gives no price) and `modelID`
MESSAGES = """
WITH RECURSIVE tree(id) AS (
    SELECT ? UNION SELECT session.id FROM session JOIN tree ON session.parent_id = tree.id
)
SELECT json_extract(data, '$.tokens.input'), json_extract(data, '$.tokens.cache.read'),
    json_extract(data, '$.tokens.cache.write'), json_extract(data, '$.tokens.output'),
    json_extract(data, '$.tokens.reasoning'), json_extract(data, '$.cost'), json_extract(data, '$.modelID')
FROM message
WHERE session_id IN (SELECT id FROM tree) AND json_extract(data, '$.role') = 'assistant'
ORDER BY time_created, id
"""


def data_file(environ: Mapping[str, str], name: str) -> str:
    """The file `name` in the user's XDG data folder ($XDG_DATA_HOME, else ~/.local/share); "" for none."""
    data = environ.get("XDG_DATA_HOME", "")
    if not data.startswith("/"):  # the XDG rule: a relative path is ignored
        data = f"{environ.get('HOME', '')}/.local/share" if environ.get("HOME") else ""
    return f"{data}/{name}" if data else ""


def answers_used(rows: Sequence[tuple[object, ...]]) -> Used | None:
    """The session's answers (each a row of MESSAGES) summed: (input, cached, output, reasoning, the cost it
    reports when it gave one, the last model named); None for no answer. A cost of 0 is a model it has no
    price for: unknown, never $0."""
    if not rows:
        return None
    totals: tuple[int | None, ...] = (0, 0, 0, 0)
    usd: float | None = 0.0
    model = ""
    for fresh, read, written, out, reasoning, cost, name in rows:
        fresh, read, written, out, reasoning = (count(v) for v in (fresh, read, written, out, reasoning))
        whole = None if fresh is None or read is None or written is None else fresh + read + written
        counted = (whole, read, None if out is None or reasoning is None else out + reasoning, reasoning)
        totals = tuple(add(total, part) for total, part in zip(totals, counted, strict=True))
        spent = dollars(cost)
        usd = None if usd is None or spent is None else usd + spent
        model = name if isinstance(name, str) and name else model
    return (totals[0], totals[1], totals[2], totals[3], usd if usd else None, model[:100])


def dollars(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if finite(number) and 0 <= number <= MOST_USD else None
