"""The one door to tmux: a private server (`tmux -L SOCKET`), every command bounded by a timeout.

Commands go through libtmux's `Server.cmd`, run on a small thread pool so a wedged tmux server costs the
caller a `TmuxError` after `timeout` seconds instead of a hang. Nothing here builds a shell string: the
agent's command line is passed to tmux as separate arguments, which tmux executes directly.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from teleclaude.adapters.tmux_control import PaneEvents
from teleclaude.errors import ErrorCode, Failure
from teleclaude.runtime.core.marks import MOVED_CHANNEL
from teleclaude.runtime.core.sessions import PaneView, StaleView

if TYPE_CHECKING:
    import libtmux

log = logging.getLogger("teleclaude")
STRAGGLER_GRACE = 1.0  # seconds a pane's process has to end after tmux hung up on it
SCAN_EVERY = 0.2  # seconds between two scans of every process for the groups of ended panes (`_Stragglers`)

_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="tmux")
VIEW_FORMAT = "\t".join(
    "#{" + name + "}"
    for name in (
        "pane_id",
        "pane_pid",
        "history_size",
        "history_limit",
        "cursor_y",
        "pane_height",
        "alternate_on",
        "pane_dead",
        "window_activity",
        "@teleclaude_exit",
        "@teleclaude_turn_end",
        "@teleclaude_stop_failure",
        "@teleclaude_usage",
        "@teleclaude_spend",
        "@teleclaude_cost",
    )
)
# Every pane's view, after the server's clock (the panes' activity times are on it): one tmux invocation
VIEWS_COMMAND = ("display-message", "-p", "%s", ";", "list-panes", "-a", "-F", VIEW_FORMAT)
# A worker on another computer cannot reach this machine's database, so its stop hook marks its own pane
# instead (`mark_own_pane`, when the launcher gave it this variable), and the observer reads the mark with
# the pane's other facts, over the ssh connection it already uses, then clears it. Its StopFailure hook
# (an API error ended the turn) does the same with the failure, as JSON in printable ASCII, and its usage
# hook (a status line, a prompt or stop hook) with the usage its CLI reported. Any process
# of the user can set these options: a mark counts only when sealed with its session's key
# (runtime/core/marks.py).
TURN_END_OPTION = "@teleclaude_turn_end"
STOP_FAILURE_OPTION = "@teleclaude_stop_failure"
USAGE_OPTION = "@teleclaude_usage"
SPEND_OPTION = "@teleclaude_spend"  # its stop hook's: what its session used so far (core/spend.py `encode`)
COST_OPTION = "@teleclaude_cost"  # its status line's: what its CLI says the session cost so far, in dollars
TURN_END_TO_PANE = "TELECLAUDE_TURN_END_TO_PANE"
# Enters the folder, runs the agent, records its exit status on the pane (tmux 3.3 leaves
# #{pane_dead_status} empty), then signals the session's wait-for channel and MOVED_CHANNEL. Inputs arrive
# as positional parameters, never as code; the folder reaches `cd` untouched, so tmux never expands a `#`.
_EXIT_SIGNAL = (
    'folder=$1; channel=$2; shift 2; cd -- "$folder" && "$@"; status=$?; '
    'tmux set-option -p -t "$TMUX_PANE" @teleclaude_exit "$status"; '
    'tmux wait-for -S "$channel" \\; wait-for -S ' + MOVED_CHANNEL + '; exit "$status"'
)


def load() -> None:
    """Import libtmux now (it is imported at the first command otherwise). It reads `sys.stdout.encoding`
    at import: a process that puts its own `sys.stdout` in place, as the board's Textual app does with one
    that has no `encoding`, imports it before."""
    import libtmux.exc  # noqa: F401


class TmuxError(Failure):
    code = ErrorCode.TMUX_FAILED
    next_step = "Check that tmux works: tmux -V"


@dataclass(frozen=True)
class Started:
    pane_id: str
    pane_pid: int


class Tmux:
    def __init__(self, socket: str, timeout: float = 10.0) -> None:
        self.socket = socket
        self.timeout = timeout
        self._server: libtmux.Server | None = None
        self._events: PaneEvents | None = None

    def on(self, computer: str) -> Tmux:
        """The tmux server of `computer`: this one (adapters.fleet.Fleet also answers for other computers)."""
        return self

    def unreachable(self) -> frozenset[str]:
        """The computers whose tmux cannot be reached now (adapters.fleet.Fleet): none for this one."""
        return frozenset()

    # --- the one command path ------------------------------------------------------------------------------

    def cmd(self, *args: str, check: bool = True) -> list[str]:
        """Run one tmux command on this server; its stdout lines. Raises TmuxError on failure or timeout."""
        future = _POOL.submit(self._call, args)
        try:
            returncode, stdout, stderr = future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise TmuxError(f"tmux {args[0]} did not answer within {self.timeout:g}s") from None
        if check and returncode != 0:
            raise TmuxError(f"tmux {args[0]} failed: {' '.join(stderr) or f'exit status {returncode}'}")
        return stdout

    def _call(self, args: Sequence[str]) -> tuple[int, list[str], list[str]]:
        import libtmux
        import libtmux.exc

        if self._server is None:  # a path (an orchestrator's server, from its $TMUX) or a name under -L
            program = shutil.which("tmux")  # found once: else libtmux looks along PATH at every command
            self._server = (
                libtmux.Server(socket_path=self.socket, tmux_bin=program)
                if "/" in self.socket
                else libtmux.Server(socket_name=self.socket, tmux_bin=program)
            )
        try:
            result = self._server.cmd(*args)
        except libtmux.exc.TmuxCommandNotFound:
            return 127, [], ["tmux is not installed (apt install tmux, brew install tmux)"]
        return result.returncode, result.stdout, result.stderr

    # --- sessions ------------------------------------------------------------------------------------------

    def start(
        self,
        name: str,
        cwd: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        channel: str,
        history_limit: int,
        size: tuple[int, int],
    ) -> Started:
        """A detached session running `argv` in `cwd`; when it exits, `channel` is signalled."""
        # a pane gets the PATH of the tmux client that creates it (tmux 3.2+), whatever `-e PATH=…` says: the
        # worker's PATH is set by env(1) in front of its command instead
        path = ["env", f"PATH={env['PATH']}"] if "PATH" in env else []
        environment = [
            part for key, value in env.items() if key != "PATH" for part in ("-e", f"{key}={value}")
        ]
        width, height = size
        lines = self.cmd(
            # options first, in the same invocation: they must hold when the pane is created
            *("set-option", "-g", "history-limit", str(history_limit), ";"),
            *("set-option", "-g", "remain-on-exit", "on", ";"),
            # tmux expands formats in -c: `##` is a literal `#` (for panes a user opens; the worker cds)
            *("new-session", "-d", "-s", name, "-c", cwd.replace("#", "##")),
            *("-x", str(width), "-y", str(height)),
            *environment,
            *("-P", "-F", "#{pane_id}\t#{pane_pid}"),
            *path,
            *("sh", "-c", _EXIT_SIGNAL, "teleclaude-worker", cwd, channel, *argv),
            # the window keeps its size: a client that attaches (a smaller terminal) or a resize-window would
            # re-wrap every row, and the output cursor (rows counted at this width) would lose its place
            *(";", "set-option", "-w", "-t", f"={name}:", "window-size", "manual"),
            *(";", "set-hook", "-w", "-t", f"={name}:", "window-resized"),
            f"resize-window -x {width} -y {height}",
        )
        pane_id, pid = lines[-1].split("\t")
        return Started(pane_id, int(pid))

    def kill_session(self, name: str) -> None:
        """End the session; its panes' processes that outlive the hang-up are ended in the background
        (`_STRAGGLERS`): a run ending thirty workers at once does not wait for each in turn."""
        target = f"={name}"
        if not self.local_processes:
            self.cmd("kill-session", "-t", target, check=False)
            return
        # one client for both (a run ending thirty workers at once pays for each client it starts)
        listed = self.cmd(
            "list-panes", "-t", target, "-F", "#{pane_pid}", ";", "kill-session", "-t", target, check=False
        )
        _STRAGGLERS.add([int(pid) for pid in listed if pid.isdigit()])

    def session_names(self) -> set[str]:
        try:
            return set(self.cmd("list-sessions", "-F", "#{session_name}"))
        except TmuxError as error:
            if _no_server(error):
                return set()
            raise

    def kill_server(self) -> None:
        groups = self._pane_groups("-a")
        self.cmd("kill-server", check=False)
        self._end_stragglers(groups)

    local_processes = True  # the panes' processes are this computer's (not over ssh)

    def _pane_groups(self, *target: str) -> list[int]:
        """The process groups of the panes of `target`: tmux makes each pane's process a group leader."""
        if not self.local_processes:
            return []
        try:
            return [int(pid) for pid in self.cmd("list-panes", *target, "-F", "#{pane_pid}") if pid.isdigit()]
        except TmuxError:
            return []

    @staticmethod
    def _end_stragglers(groups: list[int], grace: float = STRAGGLER_GRACE) -> None:
        """tmux hangs up on a killed pane's process; a CLI that lives on after that (one blocked in a read, or
        handling SIGHUP) would be left running with no pane: after `grace` its group is killed."""
        deadline = time.monotonic() + grace
        pause = 0.01  # most are gone within a few ms: an ended session's end is on the way to the next start
        while groups and time.monotonic() < deadline:
            alive = _live_groups(groups)
            groups = [group for group in groups if group in alive]
            if groups:
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        for group in groups:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)

    # --- panes ---------------------------------------------------------------------------------------------

    def views(self) -> dict[str, PaneView]:
        """Every pane of this server by id; empty when the server is not running. Listed with the server's
        clock, which the panes' activity times are on (in one invocation: no output is read in between)."""
        try:
            lines = self.cmd(*VIEWS_COMMAND)
        except TmuxError as error:
            if _no_server(error):
                return {}
            raise
        return views_of(lines)

    def glance(self, pane_id: str, press: str = "", typed: str = "") -> tuple[PaneView | None, list[str]]:
        """One pane's view and its screen, in one tmux client (a start's prompt wait looks many times a
        second; `views` lists every pane of the server); `(None, [])` when the pane or its server is gone. A
        delivery's keys go in the same client (each client is ~2.5 ms of CPU): `typed`, text typed before
        (as `send_text`; a pane gone then raises as there), `press`, a key pressed after (an Enter, and the
        screen from just before it)."""
        show_view = ("display-message", "-p", "-t", pane_id, VIEW_FORMAT)
        before = ("send-keys", "-t", pane_id, "-l", "--", _literal(typed), ";") if typed else ()
        then = (";", "send-keys", "-t", pane_id, press) if press else ()
        try:
            lines = self.cmd(*before, *show_view, ";", "capture-pane", "-p", "-t", pane_id, *then)
        except TmuxError as error:
            gone = any(f"can't find {what}" in str(error) for what in ("pane", "window"))
            if not typed and (_no_server(error) or gone):
                return None, []
            raise
        view = _view(lines[0], 0)
        rows = lines[1 : 1 + view.height]
        return view, rows + [""] * (view.height - len(rows))  # libtmux drops trailing blank rows

    def capture(self, pane_id: str, start: int, end: int, history_size: int | None = None) -> list[str]:
        """Rows start..end inclusive in tmux numbering (0 = top visible row, negative = history).

        That numbering moves when rows scroll into the history, so with `history_size` (from the view the
        rows were computed from) the rows are taken in the same tmux invocation as a fresh history size,
        and `StaleView` says the screen scrolled in between.
        """
        if end < start:
            return []
        capture = ("capture-pane", "-p", "-t", pane_id, "-S", str(start), "-E", str(end))
        if history_size is None:
            rows = self.cmd(*capture)
        else:
            lines = self.cmd("display-message", "-p", "-t", pane_id, "#{history_size}", ";", *capture)
            if not lines or lines[0] != str(history_size):
                raise StaleView(pane_id)
            rows = lines[1:]
        return rows + [""] * (end - start + 1 - len(rows))  # libtmux drops trailing blank rows

    def screen(self, pane_id: str, view: PaneView) -> list[str]:
        return self.capture(pane_id, 0, view.height - 1)

    def send_text(self, pane_id: str, text: str) -> None:
        self.cmd("send-keys", "-t", pane_id, "-l", "--", _literal(text))

    def send_key(self, pane_id: str, key: str) -> None:
        self.cmd("send-keys", "-t", pane_id, key)

    def unread_input(self, pane_id: str) -> int | None:
        """How many bytes typed into the pane its program has not read yet (its terminal's input queue): a
        key still there was not dropped, the program has not got to it (a loaded machine). None when that
        cannot be told (the pane gone, its terminal on another computer or not openable here)."""
        if not self.local_processes:
            return None
        import fcntl
        import struct
        import termios

        try:
            (tty,) = self.cmd("display-message", "-p", "-t", pane_id, "#{pane_tty}")
        except (TmuxError, ValueError):
            return None
        if not tty.startswith("/dev/"):
            return None
        try:  # opened only to ask: never its controlling terminal, never waited on
            fd = os.open(tty, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return None
        finally:
            os.close(fd)

    def clear_mark(self, pane_id: str, option: str) -> None:
        """Take away a hook's mark on the pane (`mark_own_pane`): it has been recorded."""
        self.cmd("set-option", "-p", "-u", "-t", pane_id, option)

    def wait_for(self, channel: str) -> subprocess.Popen[bytes]:
        """A `tmux wait-for CHANNEL` client that ends when the channel is signalled; poll() it, kill() it."""
        return subprocess.Popen(
            [*self._client(), "wait-for", channel],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def signal(self, channel: str) -> None:
        """`tmux wait-for -S CHANNEL`: wakes whoever waits on it. Run directly, not through libtmux: it is
        the one tmux command of a hook's process, where importing libtmux costs more than the command."""
        try:
            subprocess.run(
                [*self._client(), "wait-for", "-S", channel],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as error:
            raise TmuxError(f"tmux wait-for failed: {error}") from None

    def _client(self) -> list[str]:
        """A tmux client of this server, up to its command."""
        return [shutil.which("tmux") or "tmux", "-S" if "/" in self.socket else "-L", self.socket]

    # --- output as events (adapters/tmux_control.py) -------------------------------------------------------

    def control_argv(self, session: str) -> list[str]:
        """A control-mode client attached to `session` (by its exact name)."""
        return [*self._client(), "-N", "-C", "attach-session", "-t", f"={session}"]

    def follow(self) -> None:
        """From here on, panes that are `watch`ed report their output as events (a long-lived observer
        such as `teleclaude run`: a single look is cheaper with a capture than with a client)."""
        if self._events is None:
            self._events = PaneEvents(self.control_argv)

    def unfollow(self) -> None:
        """End every control client (`follow` again to start over)."""
        if self._events is not None:
            self._events.close()
            self._events = None

    def watch(self, session: str, pane_id: str) -> None:
        """Report `pane_id`'s output (a pane of `session`) as events, when following."""
        if self._events is not None:
            self._events.watch(session, pane_id)

    def unwatch(self, session: str) -> None:
        if self._events is not None:
            self._events.close(session)

    def output_mark(self, pane_id: str) -> int | None:
        """A number that changes whenever the pane prints; None when its output is not reported as events
        (not following, not watched, or its client not attached yet): only a capture can tell."""
        return self._events.mark(pane_id) if self._events is not None else None

    def await_output(self, pane_id: str, mark: int | None, timeout: float, poll: float = 0.05) -> bool:
        """Up to `timeout` seconds for the pane to print after `mark`; without a mark, `poll` seconds (the
        caller looks again). True when it printed or nothing can be said."""
        if mark is None or self._events is None:
            time.sleep(max(0.0, min(poll, timeout)))
            return True
        return self._events.wait(pane_id, mark, timeout)


def mark_own_pane(value: str, option: str = TURN_END_OPTION, wake: str = "") -> bool:
    """From inside a pane (a worker's hook): put a mark (the turn end, a stop failure) on that pane, in the
    tmux server it runs in ($TMUX, $TMUX_PANE), then signal the `wake` channel, if any, and MOVED_CHANNEL in
    the same client (the run's wait on the worker). False when not in a pane or tmux refused."""
    pane = os.environ.get("TMUX_PANE", "")
    if not pane or not os.environ.get("TMUX"):
        return False
    signal = [";", "wait-for", "-S", wake, ";", "wait-for", "-S", MOVED_CHANNEL] if wake else []
    set_it = ["set-option", "-p", "-t", pane, option, _literal(value), *signal]  # else `;` ends the command
    try:
        done = subprocess.run(
            [shutil.which("tmux") or "tmux", *set_it],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no tmux on the hook's PATH, or it hung
        return False
    return done.returncode == 0


def _literal(text: str) -> str:
    """`text` as `send-keys -l` types it whole: tmux ends a command at an argument ending in `;` and drops
    that `;` (an argument ending in `\\;` keeps it, without the backslash)."""
    return f"{text[:-1]}\\;" if text.endswith(";") else text


def _view(row: str, listed_at: int) -> PaneView:
    (
        pane_id,
        pid,
        history,
        limit,
        cursor_y,
        height,
        alternate,
        dead,
        activity,
        status,
        turn_end,
        failure,
        usage,
        spend,
        cost,
    ) = row.split("\t")
    return PaneView(
        pane_id,
        int(pid or 0),
        int(history),
        int(limit),
        int(cursor_y),
        int(height),
        alternate == "1",
        # the wrapper records its CLI's exit status, then signals the exit channel, then exits: a waiter woken
        # by that signal can list the pane before tmux has seen the wrapper end
        dead == "1" or status != "",
        int(status) if status else None,
        turn_end,
        failure,
        usage,
        int(activity or 0),
        listed_at,
        spend,
        cost,
    )


def views_of(lines: list[str]) -> dict[str, PaneView]:
    """`VIEWS_COMMAND`'s output as the panes' views."""
    lines = list(lines)
    clock = lines.pop(0) if lines and "\t" not in lines[0] else ""
    listed_at = int(clock) if clock.isdigit() else 0
    return {view.pane_id: view for view in (_view(row, listed_at) for row in lines)}


def _no_server(error: TmuxError) -> bool:
    """No server, or one whose last session just ended (it is exiting: "no current target")."""
    text = str(error)
    signs = ("no server running", "error connecting to", "No such file", "server exited", "no current target")
    return any(sign in text for sign in signs)


class _Stragglers:
    """Process groups of ended panes, each killed once its grace is over unless it ended by then: one thread
    looks at all of them together (one /proc scan a round), and the process waits for them at its exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[int, float] = {}  # group -> when it is killed (monotonic)
        self._members: dict[int, set[int]] = {}  # group -> its processes a scan of /proc found
        self._thread: threading.Thread | None = None
        atexit.register(self.finish)

    def add(self, groups: list[int], grace: float = STRAGGLER_GRACE) -> None:
        if not groups:
            return
        with self._lock:
            for group in groups:
                self._due.setdefault(group, time.monotonic() + grace)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="tmux-stragglers", daemon=True)
                self._thread.start()

    def _watch(self) -> None:
        pause, scanned = 0.01, float("-inf")  # most are gone within a few ms
        while True:
            with self._lock:
                due = dict(self._due)
                if not due:
                    self._thread = None
                    return
            # a scan of every process tells a group whose leader is gone (a zombie, where init does not reap
            # it, is no process): one every SCAN_EVERY for all of them (thirty hand-overs, one scan each,
            # were a third of a run's own CPU), and before any group is killed
            now = time.monotonic()
            scan = now - scanned >= SCAN_EVERY or any(now >= deadline for deadline in due.values())
            alive = _live_groups(list(due), self._members, scan)
            scanned = now if scan else scanned
            with self._lock:
                for group, deadline in due.items():
                    if group in alive and now >= deadline:
                        with suppress(ProcessLookupError, PermissionError):
                            os.killpg(group, signal.SIGKILL)
                    if group not in alive or now >= deadline:
                        self._due.pop(group, None)
                        self._members.pop(group, None)
                if not self._due:
                    self._thread = None
                    return
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def finish(self) -> None:
        """Wait until every group handed over has ended or been killed."""
        thread = self._thread
        if thread is not None:
            thread.join(STRAGGLER_GRACE + 1.0)


_STRAGGLERS = _Stragglers()


def _live_groups(
    candidates: list[int], members: dict[int, set[int]] | None = None, scan: bool = True
) -> set[int]:
    """Those of `candidates` that have a process not yet ended. On Linux a zombie does not count: once its
    tmux server is gone, a pane's process is a child of init, which in a container may never reap it. A group
    with no process at all, or whose leader (the pane's process) or a process of it found by an earlier scan
    (`members`, kept up to date) lives, is told without reading every process's /proc entry (~10 ms on a
    busy machine: the stragglers of thirty sessions ended at once scanned it every 10-50 ms); only the
    others are looked for there, unless `scan` is False: then they count as alive."""
    if not os.path.exists("/proc/self/stat"):
        return {group for group in candidates if _signalable(group)}
    groups, unsure = set(), set()
    for group in candidates:
        if not _signalable(group):
            continue
        if any(_in_group(pid, group) for pid in (group, *(members or {}).get(group, ()))):
            groups.add(group)
        else:
            unsure.add(group)
    if not unsure or not scan:
        return groups | unsure
    for name in os.listdir("/proc"):
        found = _proc_state(f"/proc/{name}/stat") if name.isdigit() else None
        if found is not None and found[0] != "Z" and found[1] in unsure:
            groups.add(found[1])
            if members is not None:
                members.setdefault(found[1], set()).add(int(name))
    return groups


def _in_group(pid: int, group: int) -> bool:
    """The process `pid` lives (not a zombie) in process group `group`."""
    found = _proc_state(f"/proc/{pid}/stat")
    return found is not None and found[0] != "Z" and found[1] == group


def _proc_state(stat: str) -> tuple[str, int] | None:
    """A process's state letter and process group, from its /proc stat (read with `os`: a scan reads every
    process's); None when it ended meanwhile."""
    try:
        fd = os.open(stat, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        state, _, group = os.read(fd, 4096).rsplit(b") ", 1)[1].split()[:3]
        return state.decode(), int(group)
    except (OSError, IndexError, ValueError):
        return None
    finally:
        os.close(fd)


def _signalable(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
