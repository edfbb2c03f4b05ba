"""Text typed into a worker's pane is obeyed by its terminal, not shown: Ctrl-C kills the agent, a carriage
return submits a line of its own, ESC ends a bracketed paste. One rule (`terminal.untypable`) refuses such
text with INVALID_ARGUMENT wherever it would reach a pane or a worker's command, before anything is typed
or recorded; plain text arrives exactly as given."""

from __future__ import annotations

import time
import unicodedata
from dataclasses import replace

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


def _history(runtime, pane: str) -> list[str]:
    view = runtime.tmux.views()[pane]
    return runtime.tmux.capture(pane, -view.history_size, view.height - 1)


def _times(rows: list[str], text: str) -> int:
    """How often `text` shows in `rows`, wrapped or not (the pane cuts a long line at its width)."""
    return "".join("".join(row.split()) for row in rows).count("".join(text.split()))


@pytest.mark.slow  # the worker runtime in tmux
def test_a_long_digest_into_a_full_pane_is_typed_once_with_one_enter(worker_runtime, worker_project):
    """A parent's pane whose every row holds text, and a digest longer than a row: the line wraps and the
    screen scrolls, so neither a row showing the line nor the count of rows that are not blank changes
    when the Enter is taken. It is typed once, with one Enter (the stand-in answers each line it takes)."""
    from teleclaude.runtime.core.parents import Parent
    from teleclaude.runtime.panes import Panes

    runtime = worker_runtime
    runtime.start_supervisor = lambda project: None  # the test drives the supervisor's rounds itself
    tmux = runtime.tmux
    fill = "seq 1 40; exec claude"  # a full screen of output, then the stand-in at its prompt
    tmux.cmd("new-session", "-d", "-s", "orchestrator", "-x", "60", "-y", "12", "sh", "-c", fill)
    pane = tmux.cmd("list-panes", "-t", "=orchestrator", "-F", "#{pane_id}")[0]
    socket = tmux.cmd("display-message", "-p", "-t", pane, "#{socket_path}")[0]
    parent = Parent(socket=socket, pane=pane)
    started = runtime.run_agent_command(
        StartRequest(
            "local", "next-build", "x", str(worker_project), "claude", "med", None, parent.encode(), "claude"
        )
    )
    assert not isinstance(started, Error), started
    session = started.session
    stand_in = replace(session, id="the parent", pane_id=pane)
    panes = Panes(runtime.context)
    panes.until_screen(stand_in, lambda rows: rows[-1].rstrip() == ">" and all(r.strip() for r in rows), 20)
    digest = "⏰ worker " + " ".join(f"word{n}" for n in range(30)) + " — the turn ended; call next_work."
    assert len(digest) > 2 * 60
    stored = runtime.store.get(session.id)
    runtime.store.save(replace(stored, parent_pending=digest), expect=stored.state)

    project = str(worker_project.resolve())
    for _ in range(6):  # the parent takes it once its screen held still for one look
        runtime.supervisor.round(project)
        if not runtime.store.get(session.id).parent_pending:
            break
    assert runtime.store.get(session.id).parent_pending == ""
    for _ in range(3):  # rounds after it: nothing typed again
        runtime.supervisor.round(project)
    panes.type_line(stand_in, "/emit 1")  # the stand-in takes lines in order: once this shows, all are in
    panes.until_screen(stand_in, lambda rows: any(r.startswith("running /emit 1") for r in rows), 20)
    rows = _history(runtime, pane)
    assert _times(rows, digest) == 1, "\n".join(rows)
    assert sum(row == "status: still working on it" for row in rows) == 1, "\n".join(rows)  # one Enter
