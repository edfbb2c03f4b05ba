"""A pattern compiled at its first use answers as `re.compile` of the same source does."""

from __future__ import annotations

import re

from teleclaude.planner.core.lazy_re import compiled


def test_it_answers_as_the_compiled_pattern():
    source, flags = r"^(\w+)-(\d+)$", re.MULTILINE
    lazy, eager = compiled(source, flags), re.compile(source, flags)
    text = "alpha-1\nbeta-22\n-\n"
    assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in eager.finditer(text)]
    assert lazy.sub(r"\2", text) == eager.sub(r"\2", text)
    assert lazy.pattern == source and lazy.flags == eager.flags and lazy.groups == 2
    assert lazy.fullmatch("x-1") is not None and lazy.match("-") is None


def test_bytes_too():
    assert compiled(rb"a+").findall(b"caaab") == [b"aaa"]
