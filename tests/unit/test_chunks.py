"""Chunked parsing gives exactly what one parse of the whole file gives; the parse limits refuse input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teleclaude.errors import ErrorCode
from teleclaude.planner.core import markdown
from teleclaude.planner.core.markdown import Block, TooComplex, task_items
from teleclaude.planner.core.model import PlanStatus, Problem, Roadmap, RoadmapItem
from teleclaude.planner.core.plan import parse_plan_chunks, tasks_by_group
from teleclaude.planner.core.roadmap import _item, parse_roadmap_chunks

LINES = (
    "- [ ] alpha — one",
    "- [x] beta (after: alpha) — two",
    "* [>] gamma: three",
    "1. [ ] delta four",
    "  - [ ] nested-one — under the item above",
    "    - [x] nested-two",
    "  continuation of the item above",
    "",
    "```",
    "- [ ] fenced — not an item",
    "~~~",
    "> - [ ] quoted — not an item",
    "<div>",
    "- [ ] in-html",
    "</div>",
    "## Group 1: Build",
    "# Group 5: After",
    "Some paragraph text",
    "---",
    "    - [ ] indented-code",
    "- [ ] Free text title",
    "- [ ] BAD_slug",
    "+ [X] epsilon — plus bullet",
)
documents = st.lists(st.sampled_from(LINES), max_size=60).map(lambda lines: "\n".join(lines) + "\n")


def whole_roadmap(text: str) -> Roadmap:
    items: list[RoadmapItem] = []
    problems: list[Problem] = []
    for task in task_items(text):
        item = _item(task, problems)
        if item is not None:
            items.append(item)
    return Roadmap(tuple(items), tuple(problems))


def whole_plan(text: str) -> PlanStatus:
    grouped = list(tasks_by_group(markdown.blocks(text)))
    has_groups = any(group is not None for group, _ in grouped)
    build = [task for group, task in grouped if group in range(1, 5) or not has_groups]
    return PlanStatus(len(build), sum(not task.checked for task in build), has_groups)


@pytest.fixture
def every_item_a_boundary(monkeypatch):
    monkeypatch.setattr(markdown, "CHUNK_SPREAD", 1)  # every column-0 item may end a chunk


@settings(max_examples=150, deadline=None)
@given(documents)
def test_chunks_parse_like_the_whole_file(text):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(markdown, "CHUNK_SPREAD", 1)
        assert parse_roadmap_chunks(text, {})[0] == whole_roadmap(text)
        assert parse_plan_chunks(text, {})[0] == whole_plan(text)


def test_a_fence_that_spans_a_boundary_grows_the_chunk(every_item_a_boundary):
    text = "- [ ] a\n```\n- [ ] fake\n- [ ] fake-two\n```\n- [ ] b\n"
    roadmap, used = parse_roadmap_chunks(text, {})
    assert [(i.slug, i.line) for i in roadmap.items] == [("a", 1), ("b", 6)]
    assert None in used.values()  # the chunk that ended inside the fence was not taken


def test_unchanged_chunks_are_reused_and_a_changed_one_is_parsed_again(every_item_a_boundary, monkeypatch):
    text = "".join(f"- [ ] item-{i} — text\n" for i in range(20))
    _, used = parse_roadmap_chunks(text, {})
    parsed: list[str] = []

    def blocks_noted(chunk: str) -> tuple[Block, ...]:
        parsed.append(chunk)
        return _blocks(chunk)

    monkeypatch.setattr(markdown, "blocks", blocks_noted)
    roadmap, _ = parse_roadmap_chunks(text.replace("[ ] item-7 ", "[x] item-7 "), used)
    # the changed chunk, and the one before it (its key holds the line after it)
    assert [chunk.splitlines()[0] for chunk in parsed] == ["- [ ] item-6 — text", "- [x] item-7 — text"]
    item_7, item_8 = roadmap.find("item-7"), roadmap.find("item-8")
    assert item_7 is not None and item_7.marker.value == "x"
    assert item_8 is not None and item_8.line == 9


_blocks = markdown.blocks


def test_a_file_met_again_unchanged_is_read_from_its_listing_alone(every_item_a_boundary, monkeypatch):
    text = "".join(f"- [ ] item-{i} — text\n" for i in range(20))
    first, used = parse_roadmap_chunks(text, {})
    monkeypatch.setattr(markdown, "_summarize_chunk", lambda *args: pytest.fail("a chunk was parsed again"))
    again, kept = parse_roadmap_chunks(text, used)
    assert again == first and kept == used  # nothing to write back either


def test_a_listing_that_names_a_chunk_not_kept_is_ignored(every_item_a_boundary):
    text = "".join(f"- [ ] item-{i} — text\n" for i in range(20))
    first, used = parse_roadmap_chunks(text, {})
    listing = next(
        value for value in used.values() if value and isinstance(value[0], list) and len(value) == 20
    )
    gone = dict(used)
    del gone[listing[5][1]]  # one chunk's entry lost: the listing cannot be used, the chunks still can
    assert parse_roadmap_chunks(text, gone)[0] == first


def test_a_cache_of_the_wrong_shape_is_ignored():
    text = "- [ ] alpha — one\n- [x] beta — two\n"
    _, used = parse_roadmap_chunks(text, {})
    for bad in ("nonsense", [[["a"]], []], [[[1, 2, 3, 4, 5]], [["x"]]], None):
        forged = dict.fromkeys(used, bad)
        assert parse_roadmap_chunks(text, forged)[0] == whole_roadmap(text)
        assert parse_plan_chunks(text, dict.fromkeys(used, bad))[0] == whole_plan(text)


@pytest.mark.parametrize(
    "text",
    [
        "".join("  " * i + f"- [ ] d{i}\n" for i in range(150)),  # 298 columns of indentation
        ">" * 250 + " - [ ] quoted\n",
        "\t" * 60 + "- [ ] tabs\n",
    ],
)
def test_nesting_past_the_limit_is_a_file_error(text):
    with pytest.raises(TooComplex) as raised:
        parse_roadmap_chunks(text, {})
    assert raised.value.code is ErrorCode.FILE_ERROR


def test_nesting_within_the_limit_is_read():
    text = "".join("  " * i + f"- [ ] d{i}\n" for i in range(100))  # 198 columns
    assert parse_roadmap_chunks(text, {})[0].items


def test_a_chunk_past_the_limit_is_a_file_error(monkeypatch):
    monkeypatch.setattr(markdown, "MAX_CHUNK_CHARS", 100)
    with pytest.raises(TooComplex):
        parse_roadmap_chunks("- [ ] a\n" + "  text\n" * 40, {})
