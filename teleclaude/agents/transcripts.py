"""What a CLI's transcript (the JSON Lines file its stop hook names) says its session used, read line by line:
the drivers' token readers (`TokenReport.read`) are made of these, and a worker's stop hook reads with them
alone only what its transcript holds new since its last read (runtime/hooks/transcript.py), without `json`
(its decoder imports `re`), `dataclasses` or a driver: at every turn's end, and a transcript grows with each.
"""

from __future__ import annotations

from teleclaude.agents.jsonin import loads

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    Counts = tuple[int | None, int | None, int | None, int | None]  # input, cached, output, reasoning
    # a line's message: (its id, its counts, the model it names or None), None for any other line; a line
    # that only names the model: (an id, None, the model)
    Message = Callable[[dict[str, Any]], "tuple[str, Counts | None, str | None] | None"]

# more tokens than any one session can use (a thousand billion): a bigger number is a forged or broken one
MOST = 10**12
NONE: Counts = (0, 0, 0, 0)


def count(value: object) -> int | None:
    """A token count as a record gives it: a whole number from 0 to MOST, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and (not finite(value) or value != int(value)):
        return None
    number = int(value)
    return number if 0 <= number <= MOST else None


def finite(number: float) -> bool:
    """`math.isfinite`, without loading `math`'s module (inf - inf and nan - nan are nan, not 0)."""
    return number - number == 0


def add(one: int | None, other: int | None) -> int | None:
    """Unknown stays unknown: a sum with an unknown part is unknown."""
    return None if one is None or other is None else one + other


def json_lines(text: str) -> Iterable[dict[str, Any]]:
    """The JSON objects of a JSON Lines text; a line cut short, or anything but an object, is skipped."""
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            value = loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


# A line per content block of each reply message, `{"type": "assistant", "message": {"id", "model", "usage":
# {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}}}`: the lines of
# one message repeat its usage, the last with its final output count (the driver's transcript)
def assistant_usage(line: dict[str, Any]) -> tuple[str, Counts, str | None] | None:
    """A reply message's line: its id, (input, the part of it read from the cache, output, None), and its
    model (None: a synthetic message, or none named)."""
    message = line.get("message")
    if line.get("type") != "assistant" or not isinstance(message, dict):
        return None
    usage, name = message.get("usage"), message.get("id")
    if not isinstance(usage, dict) or not isinstance(name, str):
        return None
    model = message.get("model")
    named = model[:100] if isinstance(model, str) and model != "<synthetic>" else None
    fresh, written, read = (
        count(usage.get(key, 0))
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    whole = None if fresh is None or written is None or read is None else fresh + written + read
    return name, (whole, read, count(usage.get("output_tokens")), None), named


# A rollout file's line is one event, `{"type", "payload"}`: each `token_count` event's
# `info.total_token_usage` is the session's use so far (`{"input_tokens", "cached_input_tokens",
# "output_tokens", "reasoning_output_tokens"}`: input counts the cached, output the reasoning), a
# `turn_context` event names the model of a turn (the driver's rollout)
TOTALS = "totals"  # the one message of a rollout: each total replaces the last


def rollout_totals(line: dict[str, Any]) -> tuple[str, Counts | None, str | None] | None:
    """A `token_count` event with the session's totals: (TOTALS, them, None); a `turn_context` event naming
    its model: (TOTALS, None, the model); None for any other line."""
    payload = line.get("payload")
    if not isinstance(payload, dict):
        return None
    model = payload.get("model") if line.get("type") == "turn_context" else None
    named = model[:100] if isinstance(model, str) else None
    info = payload.get("info") if payload.get("type") == "token_count" else None
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if not isinstance(total, dict):
        return None if named is None else (TOTALS, None, named)
    counts = (
        count(total.get("input_tokens")),
        count(total.get("cached_input_tokens", 0)),
        count(total.get("output_tokens")),
        count(total.get("reasoning_output_tokens", 0)),
    )
    return TOTALS, counts, named


# A gemini chat file (JSON Lines) has a line each time a message is written, the same `id` again as it grows:
# each model message `{"id", "type": "gemini", "model", "tokens": {"input", "output", "cached", "thoughts",
# "tool"}}` (the driver's chat): input is the prompt, the cached part included, and `tool` the tool-use
# prompt besides it; output leaves the thoughts out
def chat_tokens(line: dict[str, Any]) -> tuple[str, Counts, str | None] | None:
    """A model message's line: its id, (input with the tool prompt, cached, output with the thoughts, the
    thoughts), and its model (None: none named)."""
    tokens, name = line.get("tokens"), line.get("id")
    if line.get("type") != "gemini" or not isinstance(tokens, dict) or not isinstance(name, str):
        return None
    model = line.get("model")
    prompt, tool, out, thoughts = (
        count(tokens.get(key, 0)) for key in ("input", "tool", "output", "thoughts")
    )
    whole_in = None if prompt is None or tool is None else prompt + tool
    whole_out = None if out is None or thoughts is None else out + thoughts
    return (
        name,
        (whole_in, count(tokens.get("cached", 0)), whole_out, thoughts),
        model[:100] if isinstance(model, str) else None,
    )


class Reading:
    """What a transcript's messages used so far, each message counted once (its last line), as its lines
    are read: `fed(text)` reads more of them. The newest message stays open (its further lines may come in
    the next text: a CLI writes a message's blocks one by one); the others are summed in `closed`, their ids
    kept in `ids`: `again` says a message closed by an earlier text came again (read the whole file then)."""

    __slots__ = ("closed", "seen", "newest", "last", "model", "ids", "again")

    def __init__(
        self,
        closed: Counts = NONE,
        seen: bool = False,
        newest: str = "",
        last: Counts = NONE,
        model: str = "",
        ids: tuple[str, ...] = (),
        again: bool = False,
    ) -> None:
        self.closed, self.seen, self.newest, self.last, self.model = closed, seen, newest, last, model
        self.ids, self.again = ids, again

    def fed(self, text: str, message: Message) -> Reading:
        """This reading with the messages of `text`'s lines (`message` reads one) added."""
        messages = {self.newest: self.last} if self.seen else {}
        newest, model, before, again = self.newest, self.model, frozenset(self.ids), self.again
        for line in json_lines(text):
            found = message(line)
            if found is None:
                continue
            model = model if found[2] is None else found[2]
            if found[1] is None:  # the model named alone
                continue
            newest = found[0]
            messages[newest] = found[1]
            again = again or newest in before
        if not messages:
            return (
                self
                if model == self.model
                else Reading(self.closed, self.seen, self.newest, self.last, model, self.ids, again)
            )
        last = messages.pop(newest)
        closed = self.closed
        for counts in messages.values():
            closed = summed(closed, counts)
        ids = self.ids + tuple(name for name in messages if name not in before)
        return Reading(closed, True, newest, last, model, ids, again)

    def used(self) -> tuple[int | None, int | None, int | None, int | None, str] | None:
        """(input, cached, output, reasoning, model) of the messages read; None when there were none."""
        if not self.seen:
            return None
        return (*summed(self.closed, self.last), self.model)


def summed(one: Counts, other: Counts) -> Counts:
    return (add(one[0], other[0]), add(one[1], other[1]), add(one[2], other[2]), add(one[3], other[3]))
