"""Roadmap parsing and the byte-exact marker rewrite."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Marker
from teleclaude.planner.core.roadmap import (
    MarkerRewriteError,
    may_be_pending,
    parse_roadmap,
    rewrite_marker,
    slug_problem,
)

DESIGN_EXAMPLE = """# Roadmap
## Payments
- [>] auth-tokens — Replace session cookies with signed tokens.
- [ ] billing-export (after: auth-tokens) — CSV export of invoices.
  Continuation lines belong to the item above.
- [x] legacy-cleanup — Removed the old exporter.
"""


def test_design_example_items():
    items = parse_roadmap(DESIGN_EXAMPLE).items
    assert [(i.slug, i.marker, i.line, i.after) for i in items] == [
        ("auth-tokens", Marker.ACTIVE, 3, ()),
        ("billing-export", Marker.PENDING, 4, ("auth-tokens",)),
        ("legacy-cleanup", Marker.DONE, 6, ()),
    ]
    assert items[1].description == "CSV export of invoices. Continuation lines belong to the item above."


@pytest.mark.parametrize(
    "line, slug, after, description",
    [
        ("* [ ] a-1: colon separated", "a-1", (), "colon separated"),
        ("+ [ ] b - dash separated", "b", (), "dash separated"),
        ("- [ ] c", "c", (), ""),
        ("- [ ] d (after: a, b) plain", "d", ("a", "b"), "plain"),
        ("- [X] e — capital X", "e", (), "capital X"),
        ("- [ ] **f** — emphasis is ignored", "f", (), "emphasis is ignored"),
        ("- [ ] `g` — code span", "g", (), "code span"),
    ],
)
def test_item_forms(line, slug, after, description):
    (item,) = parse_roadmap(line + "\n").items
    assert (item.slug, item.after, item.description) == (slug, after, description)


def test_items_under_any_heading_and_nested():
    text = "# A\n## B\n### C\n- [ ] top\n  - [ ] nested\n    - [>] deeper\n"
    assert [i.slug for i in parse_roadmap(text).items] == ["top", "nested", "deeper"]


def test_items_in_code_quotes_and_html_are_not_items():
    text = (
        "```\n- [ ] fenced\n```\n"
        "~~~md\n- [ ] tilde\n~~~\n"
        "    - [ ] indented-code\n\n"
        "> - [ ] quoted\n\n"
        "<div>\n- [ ] in-html\n</div>\n\n"
        "- [ ] real\n"
    )
    roadmap = parse_roadmap(text)
    assert [i.slug for i in roadmap.items] == ["real"]
    assert roadmap.items[0].line == text.splitlines().index("- [ ] real") + 1


def test_same_line_inside_and_outside_a_fence_resolves_to_the_real_one():
    text = "```\n- [ ] same\n```\n- [ ] same\n"
    (item,) = parse_roadmap(text).items
    assert item.line == 4


@pytest.mark.parametrize("slug", ["../x", "-rf", "A", "x" * 64, "a--b", "a-", "a_b", "ü"])
def test_malformed_slug_is_a_problem_naming_the_line(slug):
    roadmap = parse_roadmap(f"- [ ] ok\n- [ ] {slug} — desc\n")
    assert [i.slug for i in roadmap.items] == ["ok"]
    assert [(p.line, p.code) for p in roadmap.problems] == [(2, "INVALID_SLUG")]


@pytest.mark.parametrize("slug", ["a", "0", "a-b-c", "x" * 63, "v2-api"])
def test_valid_slugs(slug):
    assert slug_problem(slug) is None


def test_crlf_bom_and_trailing_spaces_keep_line_numbers():
    data = "\ufeff# R\r\n\r\n- [ ] one   \r\n- [>] two\r\n".encode()
    roadmap = parse_roadmap(decode(data))
    assert [(i.slug, i.line) for i in roadmap.items] == [("one", 3), ("two", 4)]


# --- rewriting ------------------------------------------------------------------------------------


def test_rewrite_changes_exactly_the_marker():
    data = DESIGN_EXAMPLE.encode()
    new = rewrite_marker(data, 4, Marker.ACTIVE)
    assert new == data.replace(b"- [ ] billing-export", b"- [>] billing-export")


@pytest.mark.parametrize(
    "data, line",
    [
        (b"# R\r\n- [ ] one\r\n- [ ] two\r\n", 3),  # CRLF
        (b"\xef\xbb\xbf- [ ] first", 1),  # BOM, no final newline
        (b"- [ ] a   \n\t- [ ] tabbed  ", 2),  # trailing spaces, tab indent
        ("- [ ] caf\u00e9 \u2014 d\u00e9j\u00e0\n".encode("latin-1", "replace"), 1),  # not UTF-8
    ],
)
def test_rewrite_keeps_every_other_byte(data, line):
    new = rewrite_marker(data, line, Marker.DONE)
    assert len(new) == len(data)
    assert [i for i, (a, b) in enumerate(zip(data, new, strict=True)) if a != b] == [
        data.split(b"\n")[line - 1].index(b"[") + 1 + sum(len(x) + 1 for x in data.split(b"\n")[: line - 1])
    ]


def test_rewrite_refuses_a_line_that_is_not_an_item():
    with pytest.raises(MarkerRewriteError):
        rewrite_marker(b"# R\n- [ ] a\n", 1, Marker.DONE)
    with pytest.raises(MarkerRewriteError):
        rewrite_marker(b"- [ ] a\n", 5, Marker.DONE)


line_text = st.text(alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=30)
markers = st.sampled_from(["[ ]", "[x]", "[X]", "[>]"])


@given(
    before=st.lists(line_text, max_size=5),
    after=st.lists(line_text, max_size=5),
    indent=st.sampled_from(["", "  ", "\t"]),
    bullet=st.sampled_from(["-", "*", "+", "1."]),
    marker=markers,
    rest=line_text,
    newline=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
    new=st.sampled_from(list(Marker)),
)
def test_property_rewrite_changes_at_most_one_byte(
    before, after, indent, bullet, marker, rest, newline, final, new
):
    lines = [*before, f"{indent}{bullet} {marker} {rest}", *after]
    data = (newline.join(lines) + (newline if final else "")).encode()
    rewritten = rewrite_marker(data, len(before) + 1, new)
    assert len(rewritten) == len(data)
    changed = [i for i, (a, b) in enumerate(zip(data, rewritten, strict=True)) if a != b]
    assert len(changed) <= 1
    if changed:
        assert rewritten[changed[0] : changed[0] + 1] == new.value.encode()


@given(st.text(max_size=400))
def test_property_parser_never_raises(text):
    roadmap = parse_roadmap(text)
    for item in roadmap.items:
        assert slug_problem(item.slug) is None and item.line >= 1


@given(st.binary(max_size=300))
def test_property_parser_never_raises_on_bytes(data):
    parse_roadmap(decode(data))


@given(st.text(max_size=300), st.sampled_from(["feat", "a", "x-1"]))
def test_property_may_be_pending_never_misses_a_pending_item(text, slug):
    item = parse_roadmap(text).find(slug)
    if item is not None and item.marker is Marker.PENDING:
        assert may_be_pending(text, slug)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("- [>] feat — x\n", False),
        ("- [x] feat\n", False),
        ("- [ ] other\n", False),
        ("- [ ] **feat** — x\n", True),
        ("  * [ ] feat\n", True),
    ],
)
def test_may_be_pending(text, expected):
    assert may_be_pending(text, "feat") is expected


@given(
    before=st.lists(line_text, max_size=4),
    decoration=st.sampled_from(["", "**", "_", "`"]),
    indent=st.sampled_from(["", "  ", "   "]),
    rest=line_text,
)
def test_property_may_be_pending_finds_decorated_pending_items(before, decoration, indent, rest):
    text = "\n".join([*before, "", f"{indent}- [ ] {decoration}feat{decoration} {rest}"]) + "\n"
    item = parse_roadmap(text).find("feat")
    if item is not None and item.marker is Marker.PENDING:
        assert may_be_pending(text, "feat")
