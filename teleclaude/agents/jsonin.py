"""`loads`: `json.loads` of a text, without importing `json`, whose decoder and encoder import `re` (and
`re` imports `enum`): together more than half of Python's own start, which the agent hooks cannot afford.
It runs the same C scanner `json.loads` runs (`_json`), set up as `json`'s default decoder sets it up, so
it reads what `json.loads` reads and refuses what it refuses, with a `ValueError` (the scanner's own
`JSONDecodeError` for a fault inside the text, which imports `json` then). Where `_json` is missing (an
interpreter without the accelerator) it is `json.loads`."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

WHITESPACE = " \t\n\r"  # json's own (decoder.WHITESPACE)
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Decoder:
    """What the scanner reads of its decoder: `json.JSONDecoder()`'s settings."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _scanner() -> Callable[[str, int], tuple[object, int]] | None:
    try:
        from _json import make_scanner
    except ImportError:
        return None
    return make_scanner(_Decoder())  # type: ignore[arg-type]  # what it reads of a decoder: typeshed names a scanner


_scan = _scanner()


def loads(text: str) -> object:
    """The value of a JSON text, as `json.loads(text)` gives it; a ValueError where it raises one."""
    if _scan is None or not isinstance(text, str):
        import json

        return json.loads(text)
    if text.startswith("\ufeff"):
        raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig)")
    start = len(text) - len(text.lstrip(WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"Expecting value: char {stop.value}") from None
    if text[end:].strip(WHITESPACE):
        raise ValueError(f"Extra data: char {end}")
    return value
