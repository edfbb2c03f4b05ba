"""A regular expression compiled when first used, not as its module is imported.

`re`'s parser and compiler are Python: the patterns the planner's modules define at import cost a cold
`teleclaude next-work` (whose roadmap and plan come from the parse cache, never parsed again) several
percent of its whole run, most of them never used by it. `compiled(source, flags)` stands for
`re.compile(source, flags)`: its first use compiles it, and later calls go to the compiled pattern's own
methods.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import AnyStr

_METHODS = ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split")


def compiled(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    return _Pattern(source, flags)  # type: ignore[return-value]  # it answers as the re.Pattern it stands for


class _Pattern:
    def __init__(self, source: str | bytes, flags: int) -> None:
        self._source, self._flags = source, flags

    def __getattr__(self, name: str) -> object:  # not yet compiled: a name this object does not have
        pattern = re.compile(self._source, self._flags)
        self.__dict__.update({method: getattr(pattern, method) for method in _METHODS})
        self.__dict__["_compiled"] = pattern
        return getattr(pattern, name)

    def __repr__(self) -> str:
        return f"compiled({self._source!r}, {self._flags!r})"
