"""Issue 39.9: what a hook's input or the database holds reaches a terminal escaped. `hook stop-failure`
quoted the `error` field of its JSON in its warning as it came, and `teleclaude report` printed the agents and
steps it had stored raw: an ANSI sequence cleared the user's screen and set its title."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from teleclaude.adapters.sessions_db import RunRow, SessionStore
from teleclaude.runtime.core.sessions import Session, SessionState

from .conftest import hook

CLEAR_AND_TITLE = "\x1b[2J\x1b[H\x1b]0;pwned\x07"
# what a terminal acts on: C0 (but line breaks), DEL, C1, line separators, bidi overrides
OBEYED = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_the_stop_failure_hook_warns_with_the_error_it_was_given_escaped(subprocess_env, tmp_path):
    env = {**subprocess_env, "TELECLAUDE_SESSION_ID": "s1", "TELECLAUDE_TURN_END_TO_PANE": "1"}
    env.pop("TMUX", None)  # not in a pane: the hook cannot mark it, and warns naming the error
    failure = {"hook_event_name": "StopFailure", "error": f"rate_limit{CLEAR_AND_TITLE}\u202e"}
    done = hook(env, tmp_path, "stop-failure", "--agent", "claude", stdin=json.dumps(failure))
    assert (done.returncode, done.stdout) == (0, "")
    assert "rate_limit\\x1b[2J" in done.stderr  # the warning names it, escaped
    assert OBEYED.findall(done.stderr) == []


def test_the_text_report_shows_stored_agents_steps_and_outcomes_escaped(repo, cli):
    store = SessionStore()
    start = datetime.now(UTC) - timedelta(minutes=5)
    root = str(repo.resolve())
    store.add_run(RunRow("r1", root, "", start))
    agent, step = f"claude{CLEAR_AND_TITLE}", f"next-build\r{CLEAR_AND_TITLE}"
    session = Session("s1", agent, step, "feat", root, None, SessionState.DONE, start, start, run_id="r1")
    store.add(session)
    store.end_run("r1", start + timedelta(minutes=1), f"COMPLETE{CLEAR_AND_TITLE}")
    done = cli("report", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "claude\\x1b[2J" in done.stdout and "next-build\\x0d\\x1b" in done.stdout
    assert OBEYED.findall(done.stdout) == []
