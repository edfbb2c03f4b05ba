"""A step that moves to another agent: the new worker's first message carries the continuation note
teleclaude wrote from facts (runtime/core/handover.py): the commits since the step began, the plan boxes
ticked since, the last status and why the previous worker stopped. Real claude, then real codex, against the
scripted model server."""

from __future__ import annotations

import threading

from teleclaude.demo.model_server import Fail, Text, shell
from teleclaude.demo.workers import git
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime.core.marks import SESSION_KEY
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .watching import events_until, sessions_list, turn_ended

TICK_AND_COMMIT = (
    "sed -i 's/- \\[ \\] Write src/- [x] Write src/' todos/greeting/implementation-plan.md && "
    "mkdir -p src && printf 'print(1)\\n' > src/greeting.py && "
    "git add -A && git commit -qm 'Write src/greeting.py'"
)


def test_the_second_agent_s_first_request_carries_the_continuation_note(
    runtime, codex, project, model_server, monkeypatch
):
    limited = threading.Event()
    model_server.add(
        shell(TICK_AND_COMMIT, "Build the first task"),
        Fail("rate_limit", resets_in=3 * 3600, hold=limited),
    )
    first = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), "claude", "med"))
    assert isinstance(first, Started), first
    model_server.wait_for(lambda r: r.turn and "Build the first task" in r.text(), timeout=120)
    monkeypatch.setenv(SESSION_KEY, first.session.key)  # as its worker reports it over MCP
    reported = runtime.report_status(first.session.id, "task one built; the docstring is next")
    assert not hasattr(reported, "code"), reported
    limited.set()
    events_until(runtime, first.session.id, EventKind.RATE_LIMITED)
    runtime.end_session(first.session.id)
    assert runtime.store.get(first.session.id).state is SessionState.CANCELLED

    model_server.add(Text("DONE: next-build greeting - 3 tasks built"))
    second = runtime.start(Dispatch(Step.BUILD, "greeting", str(project), "codex", "med"))
    assert isinstance(second, Started), second
    assert second.session.handed_over_from == first.session.id
    request = model_server.wait_for(lambda r: r.turn and "$next-build greeting" in r.text(), timeout=120)
    sent = request.text()
    for fact in (
        f"handed over from claude tc-{first.session.id}",
        "usage limit",
        "Write src/greeting.py",  # the commit, and the box it ticked
        "boxes ticked: Write src/greeting.py",
        "task one built; the docstring is next",
    ):
        assert fact in sent, (fact, sent)
    assert [e.detail for e in turn_ended(runtime, second.session.id)] == ["stop hook"]
    assert f'handed_over_from="tc-{first.session.id}"' in sessions_list(project)
    assert "Write src/greeting.py" in git(project, "log", "--oneline", "-1")
