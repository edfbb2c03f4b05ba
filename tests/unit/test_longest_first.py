"""The whole suite's order (tests/longest_first.py): each worker's first run of tests starts with its share
of the recorded long ones, longest first, and every test is handed out once."""

from __future__ import annotations

from ..longest_first import RECORD, arranged, recorded


def test_each_workers_run_starts_with_its_long_tests_longest_first_and_every_test_comes_once():
    collection = [f"t{i}" for i in range(20)]
    seconds = {"t3": 10.0, "t17": 90.0, "t5": 40.0, "t11": 60.0, "t19": 30.0, "gone": 99.0}
    order = arranged(collection, 4, seconds)
    assert sorted(order) == list(range(20))
    runs = [[collection[i] for i in order[start : start + 5]] for start in range(0, 20, 5)]
    assert [run[0] for run in runs] == ["t17", "t11", "t5", "t19"]  # the four longest, one a worker
    assert runs[3][1] == "t3"  # the next to the share that was the shortest
    assert runs[0][1:] == ["t0", "t1", "t2", "t4"]  # then the others in collection order
    assert arranged(collection, 4, {}) == list(range(20))


def test_the_record_names_tests_with_their_seconds():
    seconds = recorded(RECORD.read_text())
    assert seconds and all(took >= 5 and "::" in nodeid for nodeid, took in seconds.items())
