"""A worker's pane as the services use it: its view, its output read consistently, and lines typed into it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext, suppress
from functools import partial

from teleclaude.adapters.captures import Asked
from teleclaude.adapters.fleet import Fleet
from teleclaude.adapters.tmux import Tmux, TmuxError
from teleclaude.errors import ErrorCode, Failure, call
from teleclaude.runtime.context import Context, refused_text
from teleclaude.runtime.core.blockers import blocked_text, find_blocker
from teleclaude.runtime.core.screens import shows_typed, typed_at
from teleclaude.runtime.core.sessions import (
    Chunk,
    Cursor,
    InvalidCursor,
    PaneView,
    Session,
    StaleView,
    read_since,
)

log = logging.getLogger("teleclaude.runtime")
Glanced = tuple[PaneView | None, list[str]]  # a pane's view and screen (`Tmux.glance`)
# seconds for a typed line to show before Enter is pressed all the same (a CLI may show a long line otherwise,
# as a placeholder for pasted text); a loaded machine takes seconds to draw it
SHOWN_WAIT = 10.0
# a look at a pane whose output is not reported as events is a tmux client (~2.5 ms of CPU): the pause between
# looks grows by this much after each, up to LOOK_EVERY (a CLI that answers at once is seen as soon; one slow
# to answer, on a loaded machine, is not looked at fifty times a second meanwhile)
BACK_OFF = 1.5
LOOK_EVERY = 0.25
UNREAD_WAIT = 60.0  # seconds a CLI may leave an Enter unread (a loaded machine) before it counts as lost


class WorkerBlocked(Failure):
    """A dialog is open in the worker: a typed line would answer it."""

    code = ErrorCode.WORKER_BLOCKED


class NotSent(Failure):
    """The typed line is still in the CLI's input after Enter was pressed again: the CLI did not take it."""

    code = ErrorCode.TMUX_FAILED


class Untypable(Failure):
    """The text holds a character the worker's terminal would obey (Ctrl-C, a carriage return, ESC)."""

    code = ErrorCode.INVALID_ARGUMENT


class Panes:
    def __init__(self, context: Context) -> None:
        self.context = context

    def views(self) -> dict[str, PaneView]:
        """Every pane of the runtime's tmux server; none when tmux cannot be asked (logged)."""
        try:
            return self.context.tmux.views()
        except TmuxError as error:
            log.warning("cannot list tmux panes: %s", error)
            return {}

    def read(self, session: Session, view: PaneView, cursor: Cursor | None, lines: int, size: int) -> Chunk:
        """read_since on a consistent picture: again with a fresh view while the pane scrolls under us."""
        return self.look(session, view, cursor, lines, size)[0]

    def look(
        self, session: Session, view: PaneView, cursor: Cursor | None, lines: int, size: int
    ) -> tuple[Chunk, list[str]]:
        """`read` and the screen of the same moment, usually in one tmux client (`_Block`): a look at a pane
        that printed was ~4 clients (the rows at the reading position, the new rows, the cursor's row, the
        screen), most of a run's own CPU."""
        tmux = self.context.tmux
        for _ in range(20):
            try:
                block = _Block(tmux, session.pane_id, view)
                chunk = read_since(view, cursor, block.rows, lines, size)
                return chunk, block.rows(0, view.height - 1)
            except StaleView:
                view = tmux.views().get(session.pane_id) or view
        capture = partial(tmux.capture, session.pane_id)
        chunk = read_since(view, cursor, capture, lines, size)  # a pane that never stops: take it as it is
        return chunk, tmux.screen(session.pane_id, view)

    def captured_ahead(
        self, sessions: Iterable[Session], views: Mapping[str, PaneView] | None
    ) -> AbstractContextManager[object]:
        """Within: the first capture a look at each of `sessions` on another computer takes (`look`) taken
        ahead, one ssh client a computer (a wake-up's moved panes: their looks then wait on no ssh client
        each). A pane that printed nothing since its last look is not read: its capture goes unused."""
        tmux = self.context.tmux
        if views is None or not isinstance(tmux, Fleet):
            return nullcontext()
        asked = []
        for session in sessions:
            view = views.get(session.pane_id)
            if session.computer in tmux.remotes and view is not None and view.pane_pid == session.pane_pid:
                found = first_capture(session, view)
                asked += [found] if found is not None else []
        return tmux.captured_ahead(asked)

    def press_enter(
        self, session: Session, attempts: int = 3, typed: str = "", seen: Glanced | None = None
    ) -> bool:
        """Enter, then up to 1 s for the screen to change, pressed again with twice the wait each time (the
        last up to `command_wait`): agent CLIs drop an Enter that comes too soon, and on a loaded machine a
        slow one (opencode) takes seconds to show a taken Enter. With `typed`, the typed line must move or
        new rows appear (a footer that changes by itself, as a git branch appearing, is not a taken Enter),
        and is first awaited on the screen:
        its echo arriving after the Enter was pressed is not the Enter taken either. The first Enter comes
        the agent's `settle` after the line showed: a CLI may take an Enter read right after the last typed
        key as a newline (tests/realcli/NOTES.md), and on a loaded machine it reads the keys late, so a wait
        counted from the typing may be over before it read them.

        Every look compares with the screen from before the first Enter: an Enter taken just after its wait
        ran out is still seen taken (compared with a screen looked at after it, it never would be). An
        Enter its CLI has not read yet (`unread_input`) is not pressed again: its wait counts from then.
        `seen`: the pane as glanced at in the client that typed the line (`Tmux.glance`'s `typed`)."""
        tmux = self.context.tmux
        if typed:
            self.until_screen(session, partial(shows_typed, typed=typed), SHOWN_WAIT, seen=seen)
        time.sleep(self.context.config.settle_of(session.agent))
        pane = session.pane_id
        mark = tmux.output_mark(pane)
        view, screen = tmux.glance(pane, press="Enter")  # the screen before the first Enter, in its client
        if view is None or view.dead:
            return True  # nothing left to press Enter in; observing says what happened
        before = _where(screen, typed)
        for attempt in range(attempts):
            if attempt:
                tmux.send_key(pane, "Enter")
            # the last Enter is waited on up to `command_wait`: a CLI starved of CPU may take that long to
            # redraw, and an Enter it took must not be told as dropped (nor its line typed again)
            last = attempt == attempts - 1
            window = max(2.0**attempt, self.context.config.command_wait if last else 0)
            pressed = time.monotonic()
            deadline = pressed + window
            pause = 0.02
            while (left := deadline - time.monotonic()) > 0 or self._unread(session, pressed):
                # looked at again when it printed, and every 0.25 s all the same: an event that comes late
                # (a loaded machine) must not make a taken Enter look dropped, and be pressed again
                tmux.await_output(pane, mark, min(left, 0.25) if left > 0 else 0.25, poll=pause)
                pause = backed_off(pause)
                mark = tmux.output_mark(pane)
                view, screen = tmux.glance(pane)
                if view is None or view.dead or _where(screen, typed) != before:
                    return True
                if left <= 0:  # its CLI had not read the Enter: the wait counts from when it has
                    deadline = time.monotonic() + window
        return False

    def _unread(self, session: Session, pressed: float) -> bool:
        """The worker's CLI has not read every key typed into it yet (a loaded machine), at most UNREAD_WAIT
        seconds after the Enter: an Enter not read was not dropped, and pressed again it would only queue."""
        if time.monotonic() - pressed > UNREAD_WAIT:
            return False
        return bool(self.context.tmux.unread_input(session.pane_id))

    def until_screen(
        self,
        session: Session,
        shows: Callable[[list[str]], bool],
        seconds: float,
        pause: float = 0.02,
        seen: Glanced | None = None,
    ) -> None:
        """Up to `seconds` for the pane's screen to satisfy `shows` (or for the pane to be gone or dead):
        looked at again when it printed, after `pause` and longer pauses (`backed_off`) when its output is
        not reported as events. `seen`: its first look, taken already (with the keys just typed)."""
        tmux, pane = self.context.tmux, session.pane_id
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            mark = tmux.output_mark(pane)
            view, screen = seen or tmux.glance(pane)
            seen = None
            if view is None or view.dead or shows(screen):
                return
            # a pane that died prints nothing: looked at every 0.25 s all the same
            tmux.await_output(pane, mark, min(0.25, deadline - time.monotonic()), poll=pause)
            pause = backed_off(pause)

    def type_line(
        self, session: Session, text: str, interrupt: bool = False
    ) -> tuple[PaneView | None, list[str]]:
        """Type one line into the worker and press Enter (Escape first to interrupt it), checked as delivery's
        is (`press_enter` with the line): an Enter the CLI dropped is pressed again, and one still not taken
        raises NotSent. Never into a dialog, where the keys would pick one of its options, and never a
        character the terminal would obey (Untypable). Returns the pane's view and screen from before the
        line was typed."""
        refused = refused_text("the text", text)
        if refused is not None:
            raise Untypable(refused.message)
        tmux, settle = self.context.tmux, self.context.config.settle_of(session.agent)
        view, screen = tmux.glance(session.pane_id)
        blocker = find_blocker(session.agent, screen)
        if blocker is not None:
            raise WorkerBlocked(blocked_text(session.agent, blocker, session.workdir, screen))
        if interrupt:
            tmux.send_key(session.pane_id, "Escape")
            time.sleep(settle)
        seen = tmux.glance(session.pane_id, typed=text)  # the line typed, and the first look for it
        if not self.press_enter(session, attempts=2, typed=text, seen=seen):
            unsent = NotSent(
                f"{session.agent}: {text!r} is still in the worker's input: the screen did not change after "
                "Enter, pressed twice (the CLI busy or redrawing).\nRead the session's output and send the "
                "message again once the worker shows its prompt, or end the session if it stays stuck."
            )
            unsent.next_call = call("get_session_output", session_id=session.id)
            raise unsent
        return view, screen

    def type_or_log(self, session: Session, text: str, interrupt: bool = False) -> None:
        """`type_line` for the supervisor and the cycle: a failure is logged, not raised."""
        try:
            self.type_line(session, text, interrupt)
        except (TmuxError, WorkerBlocked, NotSent, Untypable) as error:
            log.warning("session %s: could not type into its pane: %s", session.id, error)


def scan_cursor(session: Session, view: PaneView) -> Cursor:
    """Where the runtime's own reading of the pane got to (InvalidCursor when its record is not one)."""
    if session.scan_cursor:
        return Cursor.decode(session.scan_cursor)
    return Cursor.start(view.pane_id, view.pane_pid)


class _Asked(Exception):
    pass


def first_capture(session: Session, view: PaneView) -> Asked | None:
    """The capture a look at the pane takes first (`look` reading from `scan_cursor`: its `_Block`), as
    `Tmux.capture`'s arguments; None when it starts with none of the block's."""
    asked: list[tuple[int, int]] = []

    def first(start: int, end: int) -> list[str]:
        if end < start:  # (no capture: `_Block.rows`)
            return []
        asked.append((start, end))
        raise _Asked

    with suppress(_Asked, InvalidCursor):
        read_since(view, scan_cursor(session, view), first, 1, 1)
    bottom = view.height - 1
    if not asked or asked[0][1] > bottom:
        return None
    return session.pane_id, min(asked[0][0], 0), bottom, view.history_size


class _Block:
    """A pane's rows from the first range asked for (or the screen's top row, when that is lower) to the
    screen's bottom, captured once with the view's history size checked (`StaleView` when it scrolled);
    later ranges inside it are cut from it, others captured on their own."""

    def __init__(self, tmux: Tmux, pane_id: str, view: PaneView) -> None:
        self.tmux, self.pane_id, self.view = tmux, pane_id, view
        self.start: int | None = None
        self.kept: list[str] = []

    def rows(self, start: int, end: int) -> list[str]:
        bottom = self.view.height - 1
        if end < start:
            return []
        if self.start is None and end <= bottom:
            self.start = min(start, 0)
            self.kept = self.tmux.capture(self.pane_id, self.start, bottom, self.view.history_size)
        if self.start is not None and self.start <= start and end <= bottom:
            return self.kept[start - self.start : end - self.start + 1]
        return self.tmux.capture(self.pane_id, start, end, self.view.history_size)


def backed_off(pause: float, longest: float = LOOK_EVERY) -> float:
    """The pause before the next look at a pane without output events (BACK_OFF), up to `longest`."""
    return max(pause, min(pause * BACK_OFF, longest))


def _where(screen: list[str], typed: str) -> object:
    """The whole screen; or with `typed`, the rows showing it (`typed_at`), and how many rows are not blank
    (the CLI cleared or moved the typed line, or printed below it). On a full screen the count stays the
    same when the screen scrolls: then only the typed line moving up says the Enter was taken."""
    if not typed:
        return screen
    return typed_at(screen, typed), sum(1 for row in screen if row.strip())
