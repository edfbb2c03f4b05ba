"""Real tmux on a private socket per test, fake agent CLIs first on PATH, a prepared demo repository."""

from __future__ import annotations

import fcntl
import os
import pty
import secrets
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.adapters.tmux import Tmux
from teleclaude.demo import stand_in as fake_agent
from teleclaude.demo.scenario import commit_all, make_repository
from teleclaude.planner import api as app
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.sessions import Event, EventKind, Output, Waited
from teleclaude.runtime.run_report import Countdown, StatusLine

from ..tmux_reaper import reaper, stop

# prompt_stable: the stand-in never replaces its prompt by a dialog (the real CLIs' own waits are for theirs)
FAST = """[runtime]
socket = "{socket}"
idle_threshold = 0.4
poll_interval = 0.05
startup_timeout = 15
settle = 0.1
prompt_stable = 0.1
"""


class FakeClock:
    """The runtime's clock, moved on by the test (`runtime.context.clock = clock`)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


def back_at_countdown(project: Path, agent: str, seen: list[StatusLine]) -> Callable[[StatusLine], None]:
    """A run's status-line callback keeping each line in `seen`; at the run's first countdown (every agent
    out) `agent` is marked available, as a user does (`teleclaude agents available`): the rest ends on that
    event, not at a reset the test would have to time against a loaded machine's start."""

    def status(line: StatusLine) -> None:
        if isinstance(line, Countdown) and not any(isinstance(shown, Countdown) for shown in seen):
            app.mark_agent_available(agent, cwd=project)
        seen.append(line)

    return status


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    """A private tmux server for one test; killed afterwards, with every process it ran."""
    name = f"tc-test-{secrets.token_hex(4)}"
    tmux = Tmux(name)
    watcher = reaper(name)  # kills it even when the run is killed before this finalizer runs
    yield name
    pids = [view.pane_pid for view in tmux.views().values()]
    tmux.kill_server()
    stop(watcher)
    assert tmux.views() == {}
    assert_gone(pids)
    socket_file = Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", name)
    socket_file.unlink(missing_ok=True)  # a killed server can leave its socket file behind


def assert_gone(pids: list[int], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.05)
    assert alive == [], f"processes left running: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead; only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def fake_agents(tmp_path, monkeypatch) -> Path:
    bin_dir = fake_agent.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("FAKE_AGENT", raising=False)
    for name in ("CLAUDE", "GEMINI", "CODEX", "OPENCODE"):
        monkeypatch.delenv(f"FAKE_AGENT_{name}", raising=False)
    return bin_dir


@pytest.fixture
def project(tmp_path, tmux_socket, copy_repository) -> Path:
    root = copy_repository(make_repository, tmp_path / "project")
    (root / "teleclaude.toml").write_text(FAST.format(socket=tmux_socket))
    commit_all(root, "Runtime settings for the tests")
    return root


@pytest.fixture
def runtime(project, fake_agents) -> Runtime:
    return open_runtime(project)


class Watch:
    """Every event of the sessions waited on, however many waits it took.

    A wait marks the events it returns as delivered; a wait whose answer is thrown away loses them. So every
    wait of a test goes through one `Watch`, which keeps what each wait returned.
    """

    def __init__(self, runtime: Runtime, *session_ids: str) -> None:
        self.runtime = runtime
        self.session_ids = list(session_ids)
        self.seen: list[Event] = []

    def wait(self, timeout: float) -> Waited:
        waited = self.runtime.wait_for_sessions(self.session_ids, timeout=timeout)
        assert isinstance(waited, Waited), waited
        self.seen += waited.events
        return waited

    def until(self, kind: EventKind, count: int = 1, seconds: float = 60) -> list[Event]:
        """The events seen so far, once `count` of `kind` are among them."""
        deadline = time.monotonic() + seconds
        while self.kinds().count(kind) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"no {kind.value} event; saw {[k.value for k in self.kinds()]}\n{self.screens()}")
            self.wait(timeout=min(10.0, max(deadline - time.monotonic(), 0.0)))
        return self.seen

    def screens(self) -> str:
        """What each watched worker last showed (a failing test prints it)."""
        shown = []
        for session_id in self.session_ids:
            read = self.runtime.get_session_output(session_id)
            rows = read.chunk.rows if isinstance(read, Output) else (str(read),)
            shown.append(f"--- {session_id}\n" + "\n".join(rows[-20:]))
        return "\n".join(shown)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.seen]


def looks_until_quiet(runtime: Runtime, monkeypatch) -> list[str]:
    """Counts the runtime's pane captures from here on (the list returned), and looks at the sessions until
    one look captures nothing: a pane quiet since the last look is not read again."""
    captures: list[str] = []
    capture = runtime.tmux.capture

    def counted(pane_id: str, *args, **kwargs) -> list[str]:
        captures.append(pane_id)
        return capture(pane_id, *args, **kwargs)

    monkeypatch.setattr(runtime.tmux, "capture", counted)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        before = len(captures)
        runtime.list_sessions()
        if len(captures) == before:
            return captures
        time.sleep(0.3)
    pytest.fail("a quiet pane was captured at every look")


@pytest.fixture
def watch() -> type[Watch]:
    """`watch(runtime, session_id, ...)`: a `Watch` (a fixture, since test modules cannot import conftest)."""
    return Watch


@contextmanager
def attached_client(
    socket: str, target: str, size: tuple[int, int] | None = None
) -> Iterator[subprocess.Popen]:
    """A real tmux client attached to the session `target` from a terminal (a pty) of `size` (columns,
    rows), as a user attaches; killed when the block ends."""
    master, slave = pty.openpty()
    if size:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    client = subprocess.Popen(
        ["tmux", "-L", socket, "attach", "-t", f"={target}"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm"},
        start_new_session=True,
    )
    os.close(slave)
    try:
        yield client
    finally:
        client.kill()
        client.wait()
        os.close(master)
