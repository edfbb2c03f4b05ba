"""Text typed into a worker's pane is obeyed by its terminal, not shown: Ctrl-C kills the agent, a carriage
return submits a line of its own, ESC ends a bracketed paste. One rule (`terminal.untypable`) refuses such
text with INVALID_ARGUMENT wherever it would reach a pane or a worker's command, before anything is typed
or recorded; plain text arrives exactly as given."""

from __future__ import annotations

import time
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core.terminal import printable, untypable
from teleclaude.runtime.core.sessions import SessionState, StartRequest

from .conftest import first_line

HOSTILE = [
    "stop\x03now",  # Ctrl-C: the agent dies (status 130)
    "first\rsecond",  # a second line, submitted
    "tab\there",
    "del\x7fete",
    "csi\x9b2J",  # a one-byte CSI
    "right\u202eleft",
    "iso\u2066late",
    "line\u2028sep",
    "paste\x1b[201~end",  # a bracketed paste's end
    "nul\x00byte",
    "lone\udcffsurrogate",  # what invalid UTF-8 on the command line decodes to
]
BIDI = set("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def _screen(runtime, session) -> str:
    view = runtime.tmux.views()[session.pane_id]
    return "\n".join(runtime.tmux.screen(session.pane_id, view))


def _alive(runtime, session) -> bool:
    view = runtime.tmux.views().get(session.pane_id)
    return view is not None and not view.dead


@pytest.mark.slow  # the worker runtime in tmux
def test_a_message_with_a_control_character_is_refused_and_nothing_is_typed(worker_runtime, start_worker):
    runtime = worker_runtime
    session = start_worker()
    before = _screen(runtime, session)
    for text in HOSTILE:
        answer = runtime.send_message(session.id, text)
        assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_ARGUMENT, (text, answer)
    time.sleep(0.3)
    assert _alive(runtime, session)  # Ctrl-C never reached it
    assert _screen(runtime, session) == before  # nothing typed, not even the plain words around it
    assert runtime.store.get(session.id).state is SessionState.RUNNING
    # plain text is typed exactly as given, a trailing `;` included (tmux would take it as its own)
    for text in ("run the tests;", "keep a\\; too"):
        assert not isinstance(runtime.send_message(session.id, text), Error)
        deadline = time.monotonic() + 5
        while f"(queued: {text})" not in _screen(runtime, session) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"(queued: {text})" in _screen(runtime, session)


@pytest.mark.slow  # the worker runtime in tmux
def test_sessions_send_refuses_a_carriage_return_with_the_code(
    worker_runtime, worker_project, cli, start_worker
):
    runtime = worker_runtime
    session = start_worker()
    before = _screen(runtime, session)
    sent = cli("sessions", "send", session.id, "a\rb", cwd=worker_project)
    assert first_line(sent.stdout + sent.stderr) == "ERROR: INVALID_ARGUMENT"
    assert sent.returncode != 0
    time.sleep(0.3)
    assert _alive(runtime, session) and _screen(runtime, session) == before


@pytest.mark.slow  # the worker runtime in tmux
def test_run_agent_command_refuses_args_a_terminal_obeys_and_records_nothing(worker_runtime, worker_project):
    runtime = worker_runtime
    for args in ("slug\x7f", "slug\x9b2J", "slug\u202e", "slug\x1b[201~", "slug\x00"):
        answer = runtime.run_agent_command(
            StartRequest("local", "emit", args, str(worker_project), "claude", "med")
        )
        assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_ARGUMENT, (args, answer)
    assert runtime.store.sessions() == []
    assert runtime.tmux.session_names() == set()


@pytest.mark.slow  # the worker runtime in tmux
def test_a_wait_cmd_with_a_nul_is_refused_before_a_cycle_is_recorded(worker_runtime, start_worker):
    runtime = worker_runtime
    session = start_worker()
    for wait_cmd in ("true \x00x", "true \x1b[2J"):
        answer = runtime.report_status(session.id, "done", wait_cmd=wait_cmd)
        assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_ARGUMENT, answer
        assert runtime.store.get(session.id).cycle_started_at is None
        assert runtime.store.get(session.id).status_text == ""


def _obeyed(char: str) -> bool:
    """An oracle apart from the rule's own pattern: controls (C0, DEL, C1), surrogates, bidi marks, overrides
    and isolates, and the Unicode line and paragraph separators."""
    return unicodedata.category(char) in ("Cc", "Cs") or char in BIDI


# every code point, surrogates included, and often one of the few the rule is about
CHARACTERS = st.one_of(
    st.characters(exclude_categories=[]), st.sampled_from([*BIDI, "\x00", "\t", "\x7f", "\x9b", "\ud800"])
)


@given(st.text(CHARACTERS))
def test_the_rule_refuses_exactly_what_a_terminal_obeys(text):
    refused = untypable(text)
    obeyed = [char for char in text if _obeyed(char)]
    assert (refused is None) == (not obeyed)
    assert (refused is None) == (printable(text) == text)  # the rule is the escaping's, never a second list
    if obeyed:
        assert refused == printable(obeyed[0])
