"""Workers on other computers: OpenSSH's `ssh` client runs tmux (and git) on the remote host.

Nothing here is a protocol of its own: every remote action is one `ssh … HOST -- COMMAND` whose command is
an argument list joined with `shlex.join`, because ssh hands the remote login shell one string (it joins its
arguments with spaces). So each argument reaches the remote program exactly as given, whatever it holds.
Connections are shared through OpenSSH control masters (`ControlMaster=auto`), so the many small tmux
commands an observer sends cost one round trip each, not one handshake each. sshd lets one connection carry
`MaxSessions` channels (10 by default; a computer's `max_sessions`), and long-lived clients hold theirs:
`Connections` counts this process's channels per connection and opens one more connection
(a control master of its own, `ControlPath …%C.N`) when those it has are full, rather than letting ssh fall
back to a handshake per command; kept while the computer's workers need it, closed once they are over.

An ssh client costs the run ~4 ms of CPU (its process, the mux handshake) and ~25 ms: a hand-over took a
dozen. A run lists a computer's panes every second: through `_Lister`, one long-lived ssh whose remote shell
runs the fixed listing at each empty line it reads, rather than an ssh client each time; a start's prompt
wait and a delivery glance at a pane many times: through a second `_Lister` (the glancer), which glances at
the pane whose id it reads. A wake-up's moved panes are captured in one ssh client (adapters/captures.py).
It hears its workers
there (a turn's end, a stop failure, an exit) through `_Waker`, one long-lived ssh whose remote shell waits
on the tmux server's `MOVED_CHANNEL` and prints a line each time it is signalled, rather than a `tmux
wait-for` ssh client per worker.

`Fleet` (adapters/fleet.py) is the runtime's tmux when teleclaude.toml names other computers: this machine's
private tmux server and each `RemoteTmux` as one.
"""

from __future__ import annotations

import os
import secrets
import select
import shlex
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

from teleclaude.adapters.captures import PANE, Asked, captures_args, split_captures
from teleclaude.adapters.tmux import VIEW_FORMAT, VIEWS_COMMAND, Tmux, TmuxError, views_of
from teleclaude.config.profiles import Computer
from teleclaude.errors import ErrorCode
from teleclaude.runtime.core.marks import MOVED_CHANNEL
from teleclaude.runtime.core.sessions import PaneView

SEPARATOR = ":"  # tmux itself never puts a colon in a session name or pane id
RESERVED = 2  # channels of a connection left to short commands: long-lived ones (lister, waker) the rest
DOWN_LOOK = 2.0  # seconds between two tries to reach a computer that could not be reached
_AHEAD = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ahead")  # `RemoteTmux.captured_ahead`


class Connections:
    """This process's ssh connections to one computer and the channels each carries now: short commands
    (counted while they run) and long-lived clients (counted while their process lives). A channel goes to
    the first connection with room (`MaxSessions` in all, `RESERVED` of them left to short commands), else
    to a new one. A connection opened for a burst is kept while the computer's workers need it (its
    control master ends by itself after `ControlPersist` unused): closed as each burst ended, the next
    burst paid a handshake again, and the run's clients waited on the `ssh -O exit` under this lock. The
    connections beyond the first nothing uses are closed once the computer's workers are over (`release`)."""

    def __init__(self, computer: Computer) -> None:
        self.computer = computer
        self.limit = max(computer.max_sessions, 1)
        self._lock = threading.Lock()
        self._short: list[int] = [0]  # per connection: short commands in flight
        self._long: list[list[subprocess.Popen[bytes]]] = [[]]  # per connection: long-lived clients

    @contextmanager
    def short(self) -> Iterator[int]:
        """The connection (its number) a short command runs through."""
        with self._lock:
            number = self._pick(self.limit)
            self._short[number] += 1
        try:
            yield number
        finally:
            with self._lock:
                self._short[number] -= 1

    def long(self, start: Callable[[int], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """A long-lived client, started by `start(number)` on a connection with room for it."""
        with self._lock:
            number = self._pick(max(self.limit - RESERVED, 1))
            process = start(number)
            self._long[number].append(process)
            return process

    def count(self) -> int:
        """Connections opened (the first is always counted)."""
        with self._lock:
            return len(self._short)

    def release(self) -> None:
        """Close the connections beyond the first that no channel uses (the computer's workers are over)."""
        with self._lock:
            idle = []
            while len(self._short) > 1 and not self._short[-1] and not self._live(len(self._short) - 1):
                self._short.pop()
                self._long.pop()
                idle.append(len(self._short))
        for number in idle:
            close(self.computer, number)

    def _pick(self, long_room: int) -> int:
        for number in range(len(self._short)):
            live = self._live(number)
            if live + self._short[number] < self.limit and (long_room == self.limit or live < long_room):
                return number
        self._short.append(0)
        self._long.append([])
        return len(self._short) - 1

    def _live(self, number: int) -> int:
        self._long[number] = [p for p in self._long[number] if p.poll() is None]
        return len(self._long[number])


_CONNECTIONS: dict[tuple[str, str, int | None, str | None], Connections] = {}
_CONNECTIONS_LOCK = threading.Lock()


def connections(computer: Computer) -> Connections:
    """This process's connections to `computer` (one `Connections` per destination)."""
    key = (computer.name, computer.host, computer.port, computer.user)
    with _CONNECTIONS_LOCK:
        found = _CONNECTIONS.get(key)
        if found is None or found.limit != max(computer.max_sessions, 1):
            found = _CONNECTIONS[key] = Connections(computer)
        return found


def ssh_options(computer: Computer, user: bool = True, connection: int = 0) -> list[str]:
    """The `ssh` command line up to (not including) the destination; `user=False` leaves `-l USER` out;
    `connection`: which of the computer's shared connections (`Connections`) it goes through."""
    control = Path(tempfile.gettempdir(), f"teleclaude-ssh-{os.getuid()}")
    control.mkdir(mode=0o700, exist_ok=True)
    path = f"{control}/%C" + (f".{connection}" if connection else "")
    # a connection whose peer went silent ends after two unanswered keepalives (30 s), not six minutes on
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]
    argv += ["-o", "ServerAliveCountMax=2"]
    argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={path}", "-o", "ControlPersist=60"]
    for option in computer.ssh_options:
        argv += ["-o", option]
    if computer.identity_file:
        argv += ["-o", "IdentitiesOnly=yes", "-i", os.path.expanduser(computer.identity_file)]
    if computer.user and user:
        argv += ["-l", computer.user]
    return argv


def ssh_argv(computer: Computer, remote: Sequence[str], connection: int = 0) -> list[str]:
    """`ssh … HOST -- 'arg' 'arg' …`: `remote` runs there as exactly these arguments."""
    port = ["-p", str(computer.port)] if computer.port else []
    return [*ssh_options(computer, connection=connection), *port, "--", computer.host, shlex.join(remote)]


def run(
    computer: Computer, remote: Sequence[str], timeout: float, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `remote` there; its output. Raises RemoteError on failure (ssh's own failures are status 255)."""
    try:
        with connections(computer).short() as connection:
            done = subprocess.run(
                ssh_argv(computer, remote, connection),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="surrogateescape",
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise RemoteError(f"{computer.name}: {remote[0]} did not answer within {timeout:g}s") from None
    except OSError as error:
        raise RemoteError(f"cannot run ssh ({error}); install OpenSSH's client") from None
    if check and done.returncode == 255:
        raise Unreachable(f"{computer.name}: ssh to {computer.host} failed: {_why(done)}")
    if check and done.returncode != 0:
        raise RemoteError(f"{computer.name}: {remote[0]} failed: {_why(done)}")
    return done


def reach(computer: Computer, timeout: float) -> None:
    """Connect to `computer` (Unreachable when ssh cannot): the control master it leaves is what the git
    and tmux commands that follow use, so this costs no second handshake."""
    run(computer, ["true"], timeout)


def git_url(computer: Computer) -> str:
    """The remote clone as a git remote (git runs `ssh_options` for it: see `git_ssh_command`)."""
    user = f"{computer.user}@" if computer.user else ""
    port = f":{computer.port}" if computer.port else ""
    return f"ssh://{user}{computer.host}{port}{computer.project}"


def git_ssh_command(computer: Computer, connection: int = 0) -> str:
    """`core.sshCommand` for git: a shell string, so quoted word by word (git adds `-p PORT` and the host,
    and the user from the URL)."""
    return shlex.join(ssh_options(computer, user=False, connection=connection))


class RemoteError(TmuxError):
    pass


class Unreachable(RemoteError):
    """ssh itself failed (its exit status 255): no connection, no login, or a host key that does not match."""

    code = ErrorCode.COMPUTER_UNREACHABLE
    next_step = (
        "Check that `ssh` to it works from here (network, port, key, known_hosts), or run the step on "
        "another computer."
    )


class RemoteTmux(Tmux):
    """A private tmux server (`tmux -L SOCKET`) on another computer, driven through ssh."""

    local_processes = False

    def __init__(self, computer: Computer, socket: str, timeout: float = 10.0) -> None:
        super().__init__(socket, timeout)
        self.computer = computer
        self.down_since: float | None = None  # monotonic: when ssh there last failed (None: it answers)
        self._lister: _Lister | None = None
        self._lister_lock = threading.Lock()
        self._glancer: _Lister | None = None  # a lister of its own for glances, used while free (`_glanced`)
        self._glancer_lock = threading.Lock()
        self._waker_lock = threading.Lock()  # apart from the lister's: a wake is read during a listing
        self._waker: _Waker | None = None
        self._waker_ended = float("-inf")  # monotonic: when the last waker's ssh ended
        self._ahead: Future[dict[Asked, list[str]]] | None = None  # captures taken ahead, each taken once

    def _call(self, args: Sequence[str]) -> tuple[int, list[str], list[str]]:
        try:
            done = run(self.computer, [*self._tmux(), *args], self.timeout, check=False)
        except RemoteError:  # no answer within the timeout: a silent network counts as down
            self._down()
            raise
        if done.returncode == 255:
            self._down()
            return 255, [], [f"ssh to {self.computer.name} failed: {_why(done)}"]
        self.down_since = None
        return done.returncode, _lines(done.stdout), _lines(done.stderr)

    def views(self) -> dict[str, PaneView]:
        """Through the computer's `_Lister` while it answers; else (and for every failure: no server, ssh
        down) one `ssh … tmux list-panes`, as before."""
        found = self._listed()
        if found is None:
            found = super().views()
        if self.down_since is not None:  # not "no server": ssh's own failure can read like tmux's
            raise Unreachable(f"{self.computer.name}: ssh to {self.computer.host} failed")
        return found

    def glance(self, pane_id: str, press: str = "", typed: str = "") -> tuple[PaneView | None, list[str]]:
        """A look alone goes through the computer's glancer while it is free (`_glanced`: a start's prompt
        wait and a delivery look many times, an ssh client each was most of a hand-over's CPU); keys typed or
        pressed, and a look the glancer cannot answer, through an ssh client as before."""
        found = None if press or typed else self._glanced(pane_id)
        return found if found is not None else super().glance(pane_id, press, typed)

    def _glanced(self, pane_id: str) -> tuple[PaneView, list[str]] | None:
        """The pane's view and screen through the glancer, a `_Lister` of its own (the looks' listings never
        wait on a glance); None while another thread uses it (no one waits for it), while ssh there is down,
        or when it gave no answer (a pane gone, say: the ssh client then tells why)."""
        if not PANE.fullmatch(pane_id) or not self._glancer_lock.acquire(blocking=False):
            return None
        try:
            if self._glancer is None and self.down_since is None:
                self._glancer = _Lister(self.computer, self._tmux())
            found = self._glancer.glance(pane_id, self.timeout) if self._glancer is not None else None
            if self._glancer is not None and self._glancer.process is None:  # its answers can't be trusted
                self._glancer = None
            return found
        finally:
            self._glancer_lock.release()

    def capture(self, pane_id: str, start: int, end: int, history_size: int | None = None) -> list[str]:
        taking = self._ahead
        if history_size is not None and taking is not None:
            rows = taking.result().pop((pane_id, start, end, history_size), None)
            if rows is not None:
                return rows
        return super().capture(pane_id, start, end, history_size)

    @contextmanager
    def captured_ahead(self, asked: Sequence[Asked]) -> Iterator[None]:
        """Within: the captures `asked` (the panes a wake-up looks at first) answered from one ssh client,
        started now on a thread of its own (a wake-up's fetch goes on meanwhile) and waited for by the first
        capture (adapters/captures.py); each answered once, the others captured as they come."""
        asked = [each for each in asked if PANE.fullmatch(each[0])]
        self._ahead = _AHEAD.submit(self._captures, asked) if asked else None
        try:
            yield
        finally:
            self._ahead = None

    def _captures(self, asked: Sequence[Asked]) -> dict[Asked, list[str]]:
        try:
            return split_captures(asked, self.cmd(*captures_args(asked)))
        except TmuxError:  # a pane gone (tmux stops there), ssh down: each look captures its own
            return {}

    def _listed(self) -> dict[str, PaneView] | None:
        with self._lister_lock:
            if self._lister is None and self.down_since is None:
                self._lister = _Lister(self.computer, self._tmux())
            lines = self._lister.ask(self.timeout) if self._lister is not None else None
            if lines is None and self._lister is not None:
                self._lister.close()
                self._lister = None
        return None if lines is None else views_of(lines)

    def stop_listing(self) -> None:
        """End the computer's `_Lister` and glancer (its lanes are over; the next `views` or `glance` starts
        one again), and close the connections there nothing uses any more."""
        stopped = False
        with self._lister_lock:
            if self._lister is not None:
                self._lister.close()
                self._lister, stopped = None, True
        with self._glancer_lock:
            if self._glancer is not None:
                self._glancer.close()
                self._glancer, stopped = None, True
        if stopped:  # (called every second for each computer not in use: most times there is nothing)
            connections(self.computer).release()

    def stop_waking(self) -> None:
        """End the computer's `_Waker` (no worker there is waited on; the next `wake_fd` starts one)."""
        with self._waker_lock:
            if self._waker is not None:
                self._waker.close()
                self._waker = None

    def wake_fd(self) -> int | None:
        """The pipe of the computer's `_Waker`, started if need be: readable when a worker there ended a turn,
        failed to stop or exited, or when the waker's ssh ended (its connection dropped). None while ssh there
        is down, or for `DOWN_LOOK` seconds after a waker ended (a computer refusing it is not asked again at
        every wait: the looks see its workers meanwhile)."""
        with self._waker_lock:
            rested = time.monotonic() - self._waker_ended >= DOWN_LOOK
            if self._waker is None and self.down_since is None and rested:
                self._waker = _Waker(self.computer, [*self._tmux(), "wait-for", MOVED_CHANNEL])
            return self._waker.fileno() if self._waker is not None else None

    def rung(self) -> None:
        """Read what came on `wake_fd`'s pipe; a waker whose ssh ended is closed (the next `wake_fd` after
        `DOWN_LOOK` starts another)."""
        with self._waker_lock:
            if self._waker is not None and not self._waker.drain():
                self._waker.close()
                self._waker, self._waker_ended = None, time.monotonic()

    def _down(self) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()

    def _tmux(self) -> list[str]:
        """tmux there: -u as ssh gives it no locale (else it prints a tab as `_`); a pane gets the PATH of the
        tmux client that creates it (tmux 3.2+), so `path` is set on the client, not with `-e`."""
        path = ["env", f"PATH={self.computer.path}"] if self.computer.path else []
        return [*path, "tmux", "-u", "-L", self.socket]

    def wait_for(self, channel: str) -> subprocess.Popen[bytes]:
        def start(connection: int) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                ssh_argv(self.computer, [*self._tmux(), "wait-for", channel], connection),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        return connections(self.computer).long(start)

    def signal(self, channel: str) -> None:
        self.cmd("wait-for", "-S", channel, check=False)

    def control_argv(self, session: str) -> list[str]:
        """The control client runs there, through the same ssh connection the commands use; closing its
        stdin here ends ssh's, which detaches it there."""
        return ssh_argv(self.computer, [*self._tmux(), "-N", "-C", "attach-session", "-t", f"={session}"])


class _Lister:
    """One long-lived `ssh` to a computer whose remote shell answers each line that comes in with a fixed
    tmux command's output, then a line of a random token and tmux's exit status: an empty line lists every
    pane (`ask`: a run looks at its panes there every second without an ssh client each time); a tmux pane id
    (`%N`, checked here and there) glances at that pane (`glance`: its view and screen, as `Tmux.glance`).
    The commands are fixed at the start (quoted with `shlex.join`) and a pane id reaches tmux as one argument
    (`"$pane"`), so nothing this side sends is ever run there. A glance's answer is cut by counting (its view
    line, as many rows as its pane is high, then the token line), so a row showing the token ends nothing.
    Only an answer that succeeded is taken; anything else (a failure, no answer in time, ssh gone) is None,
    and the caller asks the one-shot way, which tells what went wrong. A lister whose answer did not add up
    or came late closes itself (`process` None): what it reads next could be the rest of that answer."""

    def __init__(self, computer: Computer, tmux: Sequence[str]) -> None:
        self.token = secrets.token_hex(16)
        listing = shlex.join([*tmux, *VIEWS_COMMAND])
        look = f'{shlex.join([*tmux, "display-message", "-p", "-t"])} "$pane" '
        look += f'{shlex.join([VIEW_FORMAT, ";", "capture-pane", "-p", "-t"])} "$pane"'
        script = (
            f"while read -r pane; do case $pane in '') {listing} 2>/dev/null ;; %|%*[!0-9]*) false ;; "
            f'%*) {look} 2>/dev/null ;; *) false ;; esac; echo "{self.token} $?"; done'
        )
        self._buffer = b""
        self.process = _long_shell(computer, script)
        # when nothing holds the lister, or at exit (atexit.register(self.close) kept every one, unreaped)
        self._ended = weakref.finalize(self, _end, self.process)

    def ask(self, timeout: float) -> list[str] | None:
        """Every pane's view (`VIEWS_COMMAND`'s lines); None when the listing did not succeed."""
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        if not self._send(b"\n"):
            return None
        while (line := self._line(deadline)) is not None:
            word, _, status = line.partition(" ")
            if word == self.token:
                return lines if status == "0" else None
            lines.append(line)
        return None

    def glance(self, pane_id: str, timeout: float) -> tuple[PaneView, list[str]] | None:
        """The pane's view and its screen's rows; None when tmux failed (the pane gone) or no answer came."""
        deadline = time.monotonic() + timeout
        if not PANE.fullmatch(pane_id) or not self._send(f"{pane_id}\n".encode()):
            return None
        first = self._line(deadline)
        if first is None or first.startswith(f"{self.token} "):  # tmux failed: no view line
            return None
        if not first.startswith(f"{pane_id}\t"):  # no such pane: tmux shows an empty view, then fails
            end = self._line(deadline)
            if end is None or not end.startswith(f"{self.token} ") or end == f"{self.token} 0":
                self.close()
            return None
        try:
            view = views_of([first]).get(pane_id) if first.count("\t") == VIEW_FORMAT.count("\t") else None
        except ValueError:  # (tmux's own numbers: never)
            view = None
        rows = [] if view is None else [self._line(deadline) for _ in range(view.height)]
        if view is None or None in rows or self._line(deadline) != f"{self.token} 0":
            self.close()  # its stream is out of step
            return None
        return view, [row for row in rows if row is not None]

    def _send(self, line: bytes) -> bool:
        process = self.process
        if process is None or process.stdin is None or process.poll() is not None:
            return False
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except OSError:
            return False
        return True

    def _line(self, deadline: float) -> str | None:
        """The next line it answered; None (and closed) when none came by `deadline` or ssh ended."""
        process = self.process
        fd = process.stdout.fileno() if process is not None and process.stdout is not None else None
        while fd is not None and b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            chunk = os.read(fd, 1 << 16) if left > 0 and select.select([fd], [], [], left)[0] else b""
            if not chunk:  # no answer in time, or ssh ended
                fd = None
            self._buffer += chunk
        if fd is None:
            self.close()
            return None
        raw, _, self._buffer = self._buffer.partition(b"\n")
        return raw.decode(errors="surrogateescape")

    def close(self) -> None:
        self.process = None
        self._ended()


class _Waker:
    """One long-lived `ssh` to a computer whose remote shell waits on its tmux server's `MOVED_CHANNEL` and
    prints an empty line each time it is signalled: every worker's turn end, stop failure and exit there
    signals it, so a run watching fifteen workers there holds one ssh client, not a `tmux wait-for` client
    each. With no server there (the first worker still starting) it tries again each second. Fixed commands
    only (`shlex.join`); nothing it reads is run. Its remote shell ends with its stdin (this side's ssh gone),
    taking its `tmux wait-for` client along (`kill 0`: its own process group, a session of sshd's)."""

    def __init__(self, computer: Computer, waiting: Sequence[str]) -> None:
        script = (
            "exec 3<&0; ( cat <&3 >/dev/null; kill 0 ) & "
            f"while :; do if {shlex.join(waiting)} 2>/dev/null; then echo; else sleep 1; fi; done"
        )
        self.process = _long_shell(computer, script)
        self._ended = weakref.finalize(self, _end, self.process)

    def fileno(self) -> int | None:
        stdout = self.process.stdout if self.process is not None else None
        return stdout.fileno() if stdout is not None else None

    def drain(self) -> bool:
        """Read every line that came; False once its ssh ended (its pipe at its end), or never started."""
        fd = self.fileno()
        if fd is None:
            return False
        while select.select([fd], [], [], 0)[0]:
            try:
                if not os.read(fd, 4096):
                    return False
            except OSError:
                return False
        return True

    def close(self) -> None:
        self.process = None
        self._ended()


def _long_shell(computer: Computer, script: str) -> subprocess.Popen[bytes] | None:
    """A long-lived `ssh` to `computer` running the fixed `script` in `sh`, its stdin and stdout piped here
    (on a connection with a channel to spare); None when ssh could not be started."""
    try:
        return connections(computer).long(
            lambda connection: subprocess.Popen(
                ssh_argv(computer, ["sh", "-c", script], connection),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        )
    except OSError:
        return None


def _end(process: subprocess.Popen[bytes] | None) -> None:
    """A lister's ssh ended and reaped, its pipes closed."""
    if process is not None and process.poll() is None:
        process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout) if process is not None else ():
        if stream is not None:
            with suppress(OSError):
                stream.close()


def qualify(tmux: Tmux, name: str) -> str:
    """A pane id or session name as the runtime stores it: `NAME:` in front when on another computer."""
    return f"{tmux.computer.name}{SEPARATOR}{name}" if isinstance(tmux, RemoteTmux) else name


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _why(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join(done.stderr.split()) or f"exit status {done.returncode}"


def close(computer: Computer, connection: int | None = None) -> None:
    """End the shared connection `connection` to `computer` (every one without: else a control master
    lingers for ControlPersist)."""
    port = ["-p", str(computer.port)] if computer.port else []
    numbers = [connection] if connection is not None else range(_opened(computer))
    for number in numbers:
        subprocess.run(
            [*ssh_options(computer, connection=number), *port, "-O", "exit", "--", computer.host],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )


def _opened(computer: Computer) -> int:
    key = (computer.name, computer.host, computer.port, computer.user)
    with _CONNECTIONS_LOCK:
        found = _CONNECTIONS.get(key)
    return found.count() if found else 1
