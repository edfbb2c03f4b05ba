"""Other processes of this user, as Linux's /proc shows them: their parent, command line and environment;
whether child processes ended (`Exits`), a sleep until one does (`sleep_until_ended`)."""

from __future__ import annotations

import os
import select
import time
from contextlib import suppress
from pathlib import Path

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Iterable
    from subprocess import Popen


def parent_pid(pid: int) -> int:
    """The process's parent (0 when it is gone or unreadable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0


def cmdline(pid: int) -> list[str]:
    try:
        return [
            part for part in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        ]
    except OSError:
        return []


def environ(pid: int) -> dict[str, str]:
    """The environment the process was started with ({} when it is not readable: another user's)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if b"=" in item)
    return {key: value for key, _, value in pairs}


def ancestors(pid: int, limit: int = 8) -> list[int]:
    """The process's parent, its parent, and so on (up to `limit`, never init)."""
    found: list[int] = []
    while len(found) < limit:
        pid = parent_pid(pid)
        if pid <= 1:
            break
        found.append(pid)
    return found


def waited_for_cpu(group: int) -> float | None:
    """The seconds the processes of process group `group` have spent ready to run while others had the CPU
    (a loaded machine): the most of any one of them, its main thread's (`/proc/PID/schedstat`). None when
    /proc does not tell (not Linux, no such group)."""
    most: float | None = None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            if int(fields[2]) != group:  # after the name: state, parent, process group
                continue
            waited = int((entry / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        most = waited if most is None else max(most, waited)
    return most


def end(
    processes: dict[str, Popen[bytes]], pipes: dict[str, int | None], pidfds: Pidfds | None = None
) -> None:
    """Kill and reap `processes`, close `pipes` (both emptied) and `pidfds`: what an owner of long-lived
    clients leaves."""
    for process in processes.values():
        process.kill()
        process.wait()
    processes.clear()
    for pipe in pipes.values():
        if pipe is not None:
            with suppress(OSError):
                os.close(pipe)
    pipes.clear()
    if pidfds is not None:
        pidfds.close()


class Pidfds:
    """The pidfds of long-lived child processes that are selected on again and again (a run's wait-for
    clients, one a worker: every look and every sleep of its wait selects on them), each opened once and
    closed when its process is `drop`ped (reopening them all at each was ~80 opens a second at thirty)."""

    def __init__(self) -> None:
        self._fds: dict[Popen[bytes], int] = {}

    def of(self, processes: Iterable[Popen[bytes]]) -> list[int] | None:
        """The pidfd of each of `processes`, opened now for those it has none of yet; None where Linux has
        no pidfds (or one could not be opened: a process reaped already)."""
        found = []
        for process in processes:
            fd = self._fds.get(process)
            if fd is None:
                if process.returncode is not None:  # reaped: its pid may be another's now
                    return None
                try:
                    fd = self._fds[process] = os.pidfd_open(process.pid)
                except (AttributeError, OSError):
                    return None
            found.append(fd)
        return found

    def drop(self, process: Popen[bytes]) -> None:
        fd = self._fds.pop(process, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class Exits:
    """Called: whether one of `processes` still running when it was made has ended since, or one of `fds` is
    readable (one select on their pidfds and those, no wait); never a process's end, where Linux has no
    pidfds. `pidfds`: where their pidfds are kept (else each is opened here and closed at the exit)."""

    def __init__(
        self, processes: Iterable[Popen[bytes]], fds: Iterable[int] = (), pidfds: Pidfds | None = None
    ) -> None:
        self.fds: list[int] = []
        self.others = list(fds)
        self.owned = pidfds is None
        if pidfds is not None:
            kept = pidfds.of(processes) or []
            ended = set(select.select(kept, [], [], 0)[0]) if kept else set()  # a readable pidfd: ended
            self.fds = [fd for fd in kept if fd not in ended]
            return
        try:
            for process in processes:
                if process.poll() is None:
                    self.fds.append(os.pidfd_open(process.pid))
        except (AttributeError, OSError):
            self.__exit__()

    def __enter__(self) -> Exits:
        return self

    def __exit__(self, *_: object) -> None:
        if self.owned:
            for fd in self.fds:
                os.close(fd)
        self.fds = []

    def __call__(self) -> bool:
        watched = [*self.fds, *self.others]
        return bool(watched) and bool(select.select(watched, [], [], 0)[0])


def sleep_until_ended(
    processes: Iterable[Popen[bytes]], seconds: float, fds: Iterable[int] = (), pidfds: Pidfds | None = None
) -> tuple[bool, frozenset[int]]:
    """Sleep `seconds`, or less when one of `processes` ends or one of `fds` is readable: in one select on
    their pidfds (`Exits`', or those kept in `pidfds`) where Linux has them, else a look every 50 ms. Whether
    a process ended, and the `fds` readable then."""
    processes, fds = list(processes), list(fds)
    kept = pidfds.of(processes) if pidfds is not None else None
    if kept is not None:  # one already ended is readable at once
        ready = select.select([*kept, *fds], [], [], max(seconds, 0.0))[0]
        return any(fd in kept for fd in ready), frozenset(fd for fd in ready if fd in fds)
    if any(p.poll() is not None for p in processes):
        return True, frozenset()
    with Exits(processes) as exits:
        if len(exits.fds) == len(processes):  # a pidfd for each: one select
            ready = select.select([*exits.fds, *fds], [], [], max(seconds, 0.0))[0]
            return any(fd in exits.fds for fd in ready), frozenset(fd for fd in ready if fd in fds)
    deadline = time.monotonic() + max(seconds, 0.0)
    while True:
        ended = any(p.poll() is not None for p in processes)
        readable = frozenset(select.select(fds, [], [], 0)[0]) if fds else frozenset[int]()
        if ended or readable or time.monotonic() >= deadline:
            return ended, readable
        time.sleep(0.05)
