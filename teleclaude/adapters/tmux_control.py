"""Pane output as events: tmux control-mode clients (`tmux -C attach-session`) that say when a pane printed.

tmux sends a control client `%output %PANE BYTES` for every read from a pane of the session it is attached
to (and of no other session: tmux 3.3's control.c checks the client's own session), so there is one client
per watched session, started with the same argv prefix the tmux adapter runs its commands with (over ssh for
another computer's panes). A client is never sent a command: its stdin stays open only to keep it attached.
The bytes are never decoded, shown or run: a line is counted for its pane id and dropped, so a pane cannot
make this side do anything. What the observer gets is a mark per pane (it changes whenever the pane
printed) and a wait for the next output; the screen itself is still read with `capture-pane`.

A client ends by itself when its session ends or its server exits, and when its stdin closes, so also when
this process is killed; `close` ends them at once (and at exit). It is started with `-N`, so it never
starts a server of its own.

Nothing follows by default, and `teleclaude run` does not: tmux 3.3a's server segfaults (a NULL session,
"segfault at 20" in the kernel log) when a control client attaches while another client creates a session,
which five concurrent worker starts each followed by its client's attach hit in 2 to 6 of 15 to 20 tries,
and the crash ends every worker of that server. Other tmux clients, of other runs, the MCP server or a
worker's own `tmux` calls, cannot be kept from creating sessions at that moment, so the run reads its panes
with captures until a tmux without the fault can be told apart.
"""

from __future__ import annotations

import atexit
import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

_OUTPUT = (b"%output ", b"%extended-output ")


class PaneEvents:
    """The control clients of one tmux server, one per watched session; `argv(session)` starts one."""

    def __init__(self, argv: Callable[[str], Sequence[str]]) -> None:
        self._argv = argv
        self._lock = threading.Condition()
        self._clients: dict[str, _Client] = {}  # by session name
        self._watched: dict[str, str] = {}  # pane id -> the session whose client reports it
        self._marks: dict[str, int] = {}  # pane id -> number of its last output or client start
        self._numbers = itertools.count(1)
        atexit.register(self.close)

    def watch(self, session: str, pane_id: str) -> None:
        """Start reporting `pane_id`'s output (a pane of `session`), unless a live client already does."""
        with self._lock:
            client = self._clients.get(session)
            if client is not None and client.alive:
                self._watched.setdefault(pane_id, session)
                return
            try:
                process = subprocess.Popen(
                    list(self._argv(session)),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
            except OSError:  # no tmux or ssh to run: the observer reads with captures as before
                return
            client = self._clients[session] = _Client(session, process)
            self._watched[pane_id] = session
        threading.Thread(target=self._read, args=(client,), name=f"tmux-C {session}", daemon=True).start()

    def mark(self, pane_id: str) -> int | None:
        """A number that changes whenever the pane prints; None while no attached client reports the pane
        (not watched, still attaching, or its client ended): then nothing can be said without a capture."""
        with self._lock:
            client = self._clients.get(self._watched.get(pane_id, ""))
            if client is None or not client.ready or not client.alive:
                return None
            return self._marks.get(pane_id)

    def wait(self, pane_id: str, mark: int | None, timeout: float) -> bool:
        """Up to `timeout` seconds for the pane to print after `mark` was taken; True when it did, or when
        nothing can be said (no mark, or its client ended): the caller looks again either way."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            while True:
                now = self.mark(pane_id)
                if mark is None or now != mark:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)

    def close(self, session: str | None = None) -> None:
        """End the client of `session` (every client without one) and wait for it to exit."""
        if session is None:
            atexit.unregister(self.close)
        with self._lock:
            names = list(self._clients) if session is None else [session]
            clients = [client for name in names if (client := self._clients.pop(name, None)) is not None]
            for pane_id in [p for p, s in self._watched.items() if s in names]:
                del self._watched[pane_id]
                self._marks.pop(pane_id, None)
            self._lock.notify_all()
        for client in clients:
            client.end()

    def _read(self, client: _Client) -> None:
        stdout = client.process.stdout
        assert stdout is not None
        try:
            for line in stdout:
                if line.startswith(_OUTPUT):
                    pane_id = line.split(b" ", 2)[1].decode("ascii", "replace")
                    with self._lock:
                        self._marks[pane_id] = next(self._numbers)
                        self._lock.notify_all()
                elif line.startswith((b"%end ", b"%error ")) and not client.ready:
                    with self._lock:  # attached: from here on every output of its panes is reported
                        for pane_id in [p for p, s in self._watched.items() if s == client.session]:
                            self._marks[pane_id] = next(self._numbers)
                        client.ready = True
                        self._lock.notify_all()
                elif line.startswith(b"%session-changed "):
                    if client.attached:  # moved to another session (its own ended): not this watch's
                        break
                    client.attached = True
                elif line.startswith(b"%exit"):
                    break
        finally:
            with self._lock:
                client.alive = False
                if self._clients.get(client.session) is client:
                    del self._clients[client.session]
                self._lock.notify_all()
            client.end()
            stdout.close()


class _Client:
    def __init__(self, session: str, process: subprocess.Popen[bytes]) -> None:
        self.session = session
        self.process = process
        self.ready = False  # its attach was answered
        self.attached = False  # its first %session-changed (the attach) was seen
        self.alive = True

    def end(self) -> None:
        """Close its stdin (a control client then detaches and exits); kill it if it does not."""
        self.alive = False
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
