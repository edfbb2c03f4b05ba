"""`--dist worksteal` (the whole suite, scripts/test) with the longest tests first.

pytest-xdist's worksteal hands each of the N workers a run of the collection at the start (the first
worker its first Nth, the next the next, ...), and a worker whose queue runs dry takes the last half of
the longest queue. In collection order the long tests (real CLIs, whole runs in tmux) came wherever their
file was, often late: a 100 s test started in the last minutes was the run's tail. Here each worker's
run starts with its share of the tests `longest.txt` records, longest first, each given to the worker
whose share is the shortest so far, and goes on with the other tests in collection order: the long tests
start early, and what a worker that ran dry takes from the end of a queue is short. A test the record does
not name counts as short; a stale record only orders less well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from xdist.scheduler import WorkStealingScheduling

# "SECONDS NODE_ID" lines: the tests that took 5 s or more in whole-suite runs (their mean), as
# `bench/cpu_per_test.py FILE --longest` writes them
RECORD = Path(__file__).with_name("longest.txt")


def recorded(text: str) -> dict[str, float]:
    seconds = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            took, nodeid = line.split(maxsplit=1)
            seconds[nodeid] = float(took)
    return seconds


def arranged(collection: Sequence[str], workers: int, seconds: Mapping[str, float]) -> list[int]:
    """The indices of `collection` in the order worksteal is to hand them out to `workers` (see above)."""
    known = [i for i, nodeid in enumerate(collection) if nodeid in seconds]
    rest = [i for i, nodeid in enumerate(collection) if nodeid not in seconds]
    shares: list[list[int]] = [[] for _ in range(workers)]
    sums = [0.0] * workers
    for index in sorted(known, key=lambda i: -seconds[collection[i]]):
        shortest = sums.index(min(sums))
        shares[shortest].append(index)
        sums[shortest] += seconds[collection[index]]
    order: list[int] = []
    left = len(collection)
    for worker, share in enumerate(shares):
        size = left // (workers - worker)  # as worksteal's first hand-out splits what is pending
        others = max(0, size - len(share))
        order += share + rest[:others]
        rest = rest[others:]
        left -= size
    return order + rest


class LongestFirst(WorkStealingScheduling):
    """Worksteal whose first hand-out is `arranged`. It sets what worksteal's own `schedule` sets once every
    worker has sent its collection (pytest-xdist 3.5–3.8's attributes); another xdist without them gets
    worksteal's own order."""

    collection: list[str] | None

    def schedule(self) -> None:
        try:
            if self.collection is None and self.collection_is_completed:
                if not self._check_nodes_have_same_collection():
                    self.log("**Different tests collected, aborting run**")  # as worksteal's own
                    return
                collection: list[str] = next(iter(self.node2collection.values()))
                seconds = recorded(RECORD.read_text()) if RECORD.is_file() else {}
                order = arranged(collection, len(self.node2pending), seconds)
                self.pending[:] = order
                self.collection = collection  # last: set, worksteal takes the order as given
        except AttributeError:
            pass
        super().schedule()  # the collection known: hands the pending tests out in that order
