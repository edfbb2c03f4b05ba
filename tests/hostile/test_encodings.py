"""Issue 13.7: encodings and states that used to read as "nothing to do". Bare-CR and UTF-16 roadmaps are
read and rewritten in their own line ends and encoding; a roadmap with git conflict markers is
`ERROR: ROADMAP_CONFLICT`; an item after a form feed, NEL or U+2028 is text for the planner and an error for
`teleclaude lint`, so the two never disagree."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner import checks
from teleclaude.planner.core.markdown import decode
from teleclaude.planner.core.model import Dispatch, Marker
from teleclaude.planner.core.roadmap import parse_roadmap, rewrite_marker

from .conftest import PREPARED, committed_repo

ROADMAP = "# Roadmap\n\n- [x] old — done long ago\n- [ ] feat — the feature, café\n"


def make_repo(root: Path, roadmap: bytes) -> Path:
    return committed_repo(root, {**PREPARED, "todos/roadmap.md": roadmap})


def lint_codes(root: Path) -> set[str]:
    findings = checks.lint_files(root)
    assert not isinstance(findings, Error), findings
    return {finding.code for finding in findings if finding.is_error}


ENCODINGS = {
    "bare CR": lambda text: text.replace("\n", "\r").encode(),
    "CRLF": lambda text: text.replace("\n", "\r\n").encode(),
    "UTF-8 with BOM": lambda text: codecs.BOM_UTF8 + text.encode(),
    "UTF-16 LE": lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    "UTF-16 BE, CRLF": lambda text: codecs.BOM_UTF16_BE + text.replace("\n", "\r\n").encode("utf-16-be"),
    "Latin-1": lambda text: text.replace("—", "-").encode("latin-1"),
}


@pytest.mark.parametrize("encode", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_the_item_is_claimed_in_the_files_own_encoding(tmp_path, encode):
    root = make_repo(tmp_path, encode(ROADMAP))
    assert lint_codes(root) == set()
    action = app.next_work(cwd=root)
    assert isinstance(action, Dispatch) and action.slug == "feat", action
    assert (root / "todos/roadmap.md").read_bytes() == encode(ROADMAP.replace("[ ] feat", "[>] feat"))


def test_utf16_without_a_byte_order_mark_is_refused_and_linted(tmp_path):
    root = make_repo(tmp_path, ROADMAP.encode("utf-16-le"))
    action = app.next_work(cwd=root)
    assert isinstance(action, Error) and action.code is ErrorCode.FILE_ERROR, action
    assert "ENCODING" in lint_codes(root)


CONFLICTED = (
    "# Roadmap\n- [ ] feat — the feature\n<<<<<<< HEAD\n- [x] other — ours\n=======\n"
    "- [ ] other — theirs\n>>>>>>> topic\n"
)


@pytest.mark.parametrize("slug", [None, "feat"])
def test_a_roadmap_with_conflict_markers_is_refused(tmp_path, slug):
    root = make_repo(tmp_path, CONFLICTED.encode())
    action = app.next_work(slug, cwd=root)
    assert isinstance(action, Error) and action.code is ErrorCode.ROADMAP_CONFLICT, action
    assert isinstance(app.next_prepare(cwd=root), Error)
    assert (root / "todos/roadmap.md").read_text() == CONFLICTED
    assert not (root / "trees").exists()
    assert "CONFLICT_MARKER" in lint_codes(root)


@pytest.mark.parametrize("separator", ["\f", "\v", "\x85", "\u2028", "\u2029"])
def test_an_item_after_a_line_separator_is_never_no_work_with_a_clean_lint(tmp_path, separator):
    roadmap = f"# Roadmap\n\nOne paragraph.{separator}- [ ] feat — the feature\n"
    root = make_repo(tmp_path, roadmap.encode())
    action = app.next_work(cwd=root)
    assert "HIDDEN_ITEM" in lint_codes(root)
    assert isinstance(action, Error) and action.code is ErrorCode.NO_WORK  # markdown: running text


# --- the rewrite, for every encoding and line end (hypothesis) --------------------------------------

slugs = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
words = st.text(alphabet="abc xyzé漢😀—", max_size=12).map(str.strip)
markers = st.sampled_from(" x>")
line_ends = st.sampled_from(["\n", "\r\n", "\r"])
codecs_ = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom", "latin-1"])


def encode(text: str, codec: str) -> bytes:
    if codec == "utf-16-be-bom":
        return codecs.BOM_UTF16_BE + text.encode("utf-16-be")
    if codec == "latin-1":
        return text.encode("latin-1", "replace")
    return text.encode(codec)


@given(
    st.lists(st.tuples(slugs, markers, words, st.booleans()), min_size=1, max_size=8),
    line_ends,
    codecs_,
    markers,
)
def test_a_rewrite_changes_exactly_one_byte_and_only_that_marker(rows, end, codec, new_mark):
    lines = ["# Roadmap"]
    for slug, mark, words_, blank in rows:
        lines += [""] if blank else []
        lines.append(f"- [{mark}] {slug} — {words_}".rstrip())
    data = encode(end.join(lines) + end, codec)
    before = parse_roadmap(decode(data))
    assert [item.slug for item in before.items] == [row[0] for row in rows]
    new = Marker.from_char(new_mark)
    for item in before.items:
        after_data = rewrite_marker(data, item.line, new)
        changed = [i for i, (a, b) in enumerate(zip(data, after_data, strict=True)) if a != b]
        assert len(after_data) == len(data) and len(changed) == (item.marker is not new)
        after = parse_roadmap(decode(after_data))
        expected = [
            i if i.line != item.line else type(i)(i.slug, new, i.line, i.after, i.description)
            for i in before.items
        ]
        assert list(after.items) == expected
