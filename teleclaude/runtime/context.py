"""What the runtime's services share: the settings, the session store, tmux, the clock and the environment,
one way to save a state change, and the errors every service answers with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import Tmux
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.config.spend import Budget
from teleclaude.errors import Error, ErrorCode, call
from teleclaude.planner.core.terminal import untypable
from teleclaude.runtime.core.sessions import Change, Session, SessionState, transition


@dataclass
class Context:
    """Mutable on purpose: a test swaps `config`, `clock` or `env` here, for every service at once."""

    config: RuntimeConfig
    store: SessionStore
    availability: AvailabilityStore
    tmux: Tmux
    clock: Callable[[], datetime]
    env: Mapping[str, str]
    # called before a turn's end is saved (Change.TURN_ENDED or an exit): a remote worker's branch comes
    # back here first, so whoever reads the event finds the work on the main checkout's branch
    before_turn_end: Callable[[Session], None] = lambda session: None
    # the turns of these workers on other computers are read next (their panes show them over): their
    # branches come back before, one fetch a computer, and `before_turn_end` skips them meanwhile
    turn_ends_ahead: Callable[[list[Session]], AbstractContextManager[object]] = lambda sessions: (
        nullcontext()
    )
    run_id: str = ""  # set by `teleclaude run`: the sessions it starts carry it (their run's timeline)
    budget: Budget | None = (
        None  # `teleclaude run --budget`: the project's [budget] with these limits instead
    )

    def change(
        self,
        session: Session,
        change: Change,
        detail: str = "",
        *,
        expect: SessionState | None = None,
        error: str | None = None,
        exit_code: int | None = None,
    ) -> Session:
        """`transition` saved with its event, unless another observer changed the stored row first.

        `expect` is the state this observer read from the store (by default `session.state`); the answer is
        the stored row either way.
        """
        if change in TURN_END_CHANGES:
            self.before_turn_end(session)
        changed, events = transition(session, change, self.clock(), detail, error=error, exit_code=exit_code)
        saved = self.store.save(changed, expect=expect or session.state, events=events)
        return saved or self.store.get(session.id) or session


TURN_END_CHANGES = (Change.TURN_ENDED, Change.EXITED_OK, Change.EXITED_FAILED)


def unknown_session(session_id: str) -> Error:
    return Error(
        ErrorCode.UNKNOWN_SESSION,
        f"no session {session_id!r}.\nThe session list shows the sessions there are.",
        next_step=call("list_sessions"),
    )


def bad_argument(message: str) -> Error:
    return Error(ErrorCode.INVALID_ARGUMENT, message)


def refused_text(what: str, text: str) -> Error | None:
    """INVALID_ARGUMENT when `text` holds a character a worker's terminal would obey rather than show (the
    one rule for text typed into a pane, or run as a worker's command: `terminal.untypable`)."""
    char = untypable(text)
    if char is None:
        return None
    return bad_argument(
        f"{what} holds {char}, a control character, bidi override or line separator that a terminal obeys "
        "instead of showing: refused, nothing was sent.\nSend it again as plain text on one line."
    )
