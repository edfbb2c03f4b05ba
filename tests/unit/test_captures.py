"""Several panes' rows in one tmux invocation, cut apart by counting (adapters/captures.py): what a pane shows
never moves a boundary. The rows match a real tmux's in tests/runtime/test_remote.py."""

from __future__ import annotations

import pytest

from teleclaude.adapters.captures import captures_args, rows_captured, split_captures

A = ("%1", -2, 3, 10)  # rows -2..3 of a pane with 10 rows of history (4 on screen)
B = ("%7", 0, 1, 0)


@pytest.mark.parametrize(
    ("first", "last", "history", "height", "count"),
    [
        (-2, 3, 10, 4, 6),
        (0, 23, 0, 24, 24),
        (-50, 3, 10, 4, 14),  # before the oldest row of history: from it
        (0, 40, 0, 24, 24),  # past the screen's bottom: to it
        (3, -2, 10, 4, 6),  # reversed: swapped
        (-50, -40, 10, 4, 1),  # both before the history: its oldest row
    ],
)
def test_the_rows_tmux_prints_for_a_range(first, last, history, height, count):
    assert rows_captured(first, last, history, height) == count


def test_each_capture_comes_back_with_its_own_rows_padded_to_the_range():
    lines = ["10 4", "a", "b", "c", "d", "e", "", "0 2", "x", "y"]
    assert split_captures([A, B], lines) == {A: ["a", "b", "c", "d", "e", ""], B: ["x", "y"]}


@pytest.mark.parametrize(
    "shown",
    [
        ["0 2", "x", "y", "10 4"],  # rows that read like a header: counted as rows all the same
        ["10 4", "", "", ""],
    ],
)
def test_what_a_pane_shows_never_moves_a_boundary(shown):
    lines = ["10 4", *shown, "zz", "zz", "0 2", "x", "y"]
    assert split_captures([A, B], lines) == {A: [*shown, "zz", "zz"], B: ["x", "y"]}


@pytest.mark.parametrize(
    "lines",
    [
        ["10 4", "a", "b", "c", "d", "e", "f", "extra", "0 2", "x", "y"],  # one line more than counted
        ["10 4", "a", "b", "c", "d", "e", "f", "0 2", "x"],  # one less (tmux stopped)
        ["10 4", "a", "b", "c", "d", "e", "f"],  # the second capture missing (its pane gone)
        ["a", "b", "c", "d", "e", "f", "g", "0 2", "x", "y"],  # no header first
        [],
    ],
    ids=["more", "fewer", "stopped", "no-header", "nothing"],
)
def test_output_whose_count_does_not_add_up_is_no_answer(lines):
    assert split_captures([A, B], lines) == {}


def test_a_pane_whose_history_grew_meanwhile_is_left_to_its_own_capture():
    lines = ["11 4", "a", "b", "c", "d", "e", "f", "0 2", "x", "y"]  # it scrolled: its rows moved
    assert split_captures([A, B], lines) == {B: ["x", "y"]}


def test_only_tmux_pane_ids_go_on_the_command_line():
    assert captures_args([B]) == [
        *("display-message", "-p", "-t", "%7", "#{history_size} #{pane_height}", ";"),
        *("capture-pane", "-p", "-t", "%7", "-S", "0", "-E", "1"),
    ]
    for bad in ("%1;kill-server", "=tc-1", "%", "-t", "box:%1"):
        with pytest.raises(ValueError):
            captures_args([(bad, 0, 1, 0)])
