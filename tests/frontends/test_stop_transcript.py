"""A worker's stop whose input names its CLI's transcript (claude's, at every turn's end: what the turn used)
reads only what the transcript holds new, with the driver's own reader line by line, and records it with its
turn's end without stop.py, the driver, `json` or the store: the same readings, rows and marks as stop.py's
full path leaves (issue 40 §3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from tests.frontends.test_hook_imports import (
    SANDBOXED_STOP_NOT,
    TOOL_USE_NOT,
    _clean_project,
    driver_module,
    run,
)

# what a local worker's stop with its transcript must not import, beside what a tool use must not: stop.py
# and the runtime, the driver, and functools with collections (_sqlite3's, for its statement cache)
STOP_NOT = (
    *TOOL_USE_NOT,
    *("functools", "collections", "subprocess", "_hashlib"),
    *("teleclaude.runtime.hooks.stop", "teleclaude.runtime.api", "teleclaude.adapters.records"),
)


def _reply(number: int, blocks: int = 3, model: str = "claude-opus-4-5") -> list[str]:
    """A user's line and the lines of one reply message, as claude's transcript has them."""
    lines = [json.dumps({"type": "user", "message": {"role": "user", "content": f"go on {number}"}})]
    for block in range(blocks):
        usage = {
            "input_tokens": 10 + number,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000 * number,
            "output_tokens": 5 + block,
        }
        message = {"id": f"msg_{number}", "model": model, "content": [{"type": "text"}], "usage": usage}
        lines.append(json.dumps({"type": "assistant", "message": message}))
    return lines


def _append(path, lines: list[str], end: str = "\n") -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write("\n".join(lines) + end)


def _workers(env: dict[str, str], tmp_path, transcript) -> dict[str, str]:
    """Two running claude workers of one key, their transcript on record (as its tool uses name it): w1 for
    the hook's own process, w2 for stop.py's full path."""
    from datetime import UTC, datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState

    now = datetime.now(UTC)
    store = SessionStore(env["TELECLAUDE_DB"])
    for session_id in ("w1", "w2"):
        store.add(
            Session(
                id=session_id, agent="claude", command="next-build", args="feat", project=str(tmp_path),
                subfolder=None, state=SessionState.RUNNING, created_at=now, updated_at=now, key="k1",
                transcript=str(transcript),
            )
        )  # fmt: skip
    return {**env, "TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_SESSION_KEY": "k1"}


def _working(db: str) -> None:
    """Both at work again, as after their next message."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET state = 'running'")
    conn.close()


def _kept(db: str, session_id: str) -> tuple:
    from teleclaude.adapters.sessions_db import SessionStore

    store = SessionStore(db)
    session = store.get(session_id)
    assert session is not None
    readings = [tokens for _, _, tokens in store.spend_readings([session_id])]
    events = [(e.kind.value, e.detail) for e in store.undelivered([session_id])]
    return session.state.value, session.version, session.transcript, readings, events


@pytest.fixture
def env(subprocess_env) -> dict[str, str]:
    return {k: v for k, v in subprocess_env.items() if not k.startswith("TELECLAUDE_SESSION")}


def test_a_local_worker_s_stop_keeps_what_its_transcript_holds_new_as_stop_py_does(
    env, tmp_path, monkeypatch
):
    from teleclaude.agents.claude import transcript_tokens
    from teleclaude.runtime.hooks import stop

    project, transcript = tmp_path / "project", tmp_path / "transcript.jsonl"
    project.mkdir()
    _clean_project(project)
    worker = {**_workers(env, project, transcript), "TMUX": f"{tmp_path}/no-server,1,0"}
    raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop", "transcript_path": str(transcript)})
    for name, value in {**worker, "TELECLAUDE_SESSION_ID": "w2"}.items():
        monkeypatch.setenv(name, value)
    _append(transcript, _reply(1) + _reply(2))
    turns = [[], _reply(3, blocks=1), _reply(4)[:2]]  # the last: its message's lines still coming
    for turn, lines in enumerate(turns):
        if lines:
            _append(transcript, lines)
        _working(env["TELECLAUDE_DB"])
        done, modules = run(["hook", "stop", "--agent", "claude"], worker, raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        assert {
            m for m in modules if m in STOP_NOT or m.split(".")[0] in STOP_NOT or driver_module(m)
        } == set()
        assert stop.main("claude", StringIO(raw)) == 0  # the full path, in this process
        plain, full = _kept(env["TELECLAUDE_DB"], "w1"), _kept(env["TELECLAUDE_DB"], "w2")
        assert plain == full and plain[0] == "turn_ended" and len(plain[4]) == turn + 1
        assert plain[3][-1] == transcript_tokens(transcript.read_text())  # the whole file's reading
    _append(transcript, _reply(4)[2:] + _reply(5, model="claude-sonnet-4-5"))  # that message's last line
    _working(env["TELECLAUDE_DB"])
    assert run(["hook", "stop", "--agent", "claude"], worker, raw)[0].returncode == 0
    assert stop.main("claude", StringIO(raw)) == 0
    plain, full = _kept(env["TELECLAUDE_DB"], "w1"), _kept(env["TELECLAUDE_DB"], "w2")
    assert plain == full and plain[3][-1] == transcript_tokens(transcript.read_text())
    assert plain[3][-1].model == "claude-sonnet-4-5" and len(plain[3]) == 4  # one reading a change


@pytest.mark.parametrize("case", ["not on record", "another key", "no transcript"])
def test_a_stop_the_plain_read_cannot_keep_is_stop_py_s(env, tmp_path, case):
    from teleclaude.adapters.sessions_db import SessionStore

    transcript = tmp_path / "transcript.jsonl"
    _clean_project(tmp_path)
    worker = {**_workers(env, tmp_path, transcript), "TMUX": f"{tmp_path}/no-server,1,0"}
    _append(transcript, _reply(1))
    stop = {"cwd": str(tmp_path), "hook_event_name": "Stop", "transcript_path": str(transcript)}
    if case == "not on record":
        stop["transcript_path"] = str(tmp_path / "other.jsonl")
    elif case == "another key":
        worker["TELECLAUDE_SESSION_KEY"] = "not-k1"
    else:
        transcript.unlink()
    done, modules = run(["hook", "stop", "--agent", "claude"], worker, json.dumps(stop))
    assert (done.returncode, done.stdout) == (0, "")
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None
    readings = SessionStore(env["TELECLAUDE_DB"]).spend_readings(["w1"])
    if case == "another key":
        assert session.state.value == "running" and readings == []
        assert done.stderr.startswith("teleclaude hook stop: not recording")
    elif case == "not on record":  # stop.py names it and keeps what it used (unknown: no such file)
        assert "teleclaude.runtime.hooks.stop" in modules and session.transcript == stop["transcript_path"]
        assert session.state.value == "turn_ended" and [t.known for _, _, t in readings] == [False]
    else:  # a missing transcript: unknown, kept plainly as stop.py keeps it
        assert "teleclaude.runtime.hooks.stop" not in modules and "teleclaude hook" not in done.stderr
        assert session.state.value == "turn_ended" and [t.known for _, _, t in readings] == [False]


def _sandboxed(env: dict[str, str], channel) -> dict[str, str]:
    from tests.frontends.test_hook_imports import _sandboxed as sandboxed

    return sandboxed(env, channel)


def read_in_pieces(path, data: bytes, step: int, reader, whole) -> tuple:
    """`data` written into `path` `step` bytes more at a time, what is new read each time (`read_new` with
    `reader`) and held equal to `whole` (the driver's reading of the whole file); (the last reading, its
    state)."""
    from teleclaude.runtime.hooks.transcript import read_new

    used, state = None, ""
    for end in [*range(0, len(data), step), len(data)]:
        path.write_bytes(data[:end])
        used, state = read_new(str(path), state, reader)
        found = whole(data[:end].decode())
        kept = (
            None if found is None else (found.input, found.cached, found.output, found.reasoning, found.model)
        )
        assert used == kept
    return used, state


def _two_channels(env: dict[str, str], tmp_path, monkeypatch, **more: str) -> tuple[Path, Path, Path]:
    """(a clean project, the plain hook's channel, stop.py's): stop.py, run in this process, has the sandboxed
    worker's environment with a channel of its own (and `more`); the plain hook runs with `_sandboxed(env,
    plain)`."""
    project, plain, full = tmp_path / "project", tmp_path / "plain", tmp_path / "full"
    for folder in (project, plain, full):
        folder.mkdir(mode=0o700)
    _clean_project(project)
    for name, value in {**_sandboxed(env, full), **more}.items():
        monkeypatch.setenv(name, value)
    return project, plain, full


def _marks(channel) -> dict[str, str]:
    """The channel's marks as the observer reads them: the sealed ones unsealed, the turn's end as present."""
    from teleclaude.adapters import sandbox
    from teleclaude.runtime.core.marks import unseal

    found = {}
    for option, sealed in sandbox.read_marks(channel).items():
        payload = unseal("k1", "w1", option, sealed)
        assert payload is not None, option
        found[option] = "ended" if option == "@teleclaude_turn_end" else payload
    found["transcript"] = (channel / sandbox.TRANSCRIPT).read_text()
    return found


def test_a_sandboxed_worker_s_stop_marks_what_its_transcript_holds_new_as_stop_py_marks_it(
    env, tmp_path, monkeypatch
):
    from teleclaude.agents.claude import transcript_tokens
    from teleclaude.runtime.core.spend import encode_tokens
    from teleclaude.runtime.hooks import stop

    project, plain, full = _two_channels(env, tmp_path, monkeypatch)
    transcript = tmp_path / "transcript.jsonl"
    raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop", "transcript_path": str(transcript)})
    _append(transcript, _reply(1))
    for lines in ([], _reply(2) + _reply(3)[:1], _reply(3)[1:]):
        if lines:
            _append(transcript, lines)
        done, modules = run(["hook", "stop", "--agent", "claude"], _sandboxed(env, plain), raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        unwanted = (*SANDBOXED_STOP_NOT, "json", "functools", "collections")
        assert {m for m in modules if m in unwanted or driver_module(m)} == set()
        assert stop.main("claude", StringIO(raw)) == 0  # the full path, in this process
        assert _marks(plain) == _marks(full)
        whole = transcript_tokens(transcript.read_text())
        assert whole is not None and _marks(plain)["@teleclaude_spend"] == encode_tokens(whole)


def test_reading_what_is_new_gives_what_reading_the_whole_file_gives(tmp_path):
    """Read again after each line, at every cut of a line, after the file was replaced and from a damaged
    state: always the whole file's reading (the driver's reader)."""

    from teleclaude.agents.claude import transcript_tokens
    from teleclaude.agents.transcripts import assistant_usage
    from teleclaude.runtime.hooks.transcript import read_new

    path = tmp_path / "t.jsonl"
    text = "\n".join([*_reply(1), "{cut short", *_reply(2), "[]", *_reply(1, blocks=1), *_reply(3)]) + "\n"
    text += json.dumps({"type": "assistant", "message": {"id": "x", "usage": {"input_tokens": -1}}}) + "\n"
    data = text.encode()
    _, state = read_in_pieces(path, data, 97, assistant_usage, transcript_tokens)
    path.unlink()
    path.write_bytes(data[:300])  # another file of that name, shorter
    assert read_new(str(path), state, assistant_usage)[0] == read_new(str(path), "", assistant_usage)[0]
    for damaged in ("[1, 2]", "{", state.replace("true", "1"), state[: len(state) // 2]):
        assert read_new(str(path), damaged, assistant_usage)[0] == read_new(str(path), "", assistant_usage)[0]
    assert read_new(str(tmp_path / "none.jsonl"), state, assistant_usage) == (None, "")


@pytest.mark.parametrize(
    "values",
    [
        (1, None, 3, 0, None, "claude-opus-4-5"),
        (None,) * 5 + ("",),
        (2, 0, 1, None, 1.25, 'mødel "x"\n\u2028'),
    ],
)
def test_a_spend_mark_is_encode_tokens_s(values):
    from teleclaude.agents.tokens import Tokens
    from teleclaude.runtime.core.spend import encode_tokens
    from teleclaude.runtime.hooks.transcript import json_array

    names = ("input", "cached", "output", "reasoning", "cost_usd", "model")
    tokens = Tokens(**dict(zip(names, values, strict=True)))
    assert json_array(values) == encode_tokens(tokens) == json.dumps(list(values))


def test_the_line_readers_are_the_drivers():
    """The registry's table names each driver's own reader: the stop hook reads as the driver reads."""
    from teleclaude.agents import TRANSCRIPT_LINES, driver, transcripts
    from teleclaude.agents.tokens import of_reading

    text = "\n".join(_reply(1) + _reply(2, model="<synthetic>") + _reply(1, blocks=1))
    for agent, name in TRANSCRIPT_LINES.items():
        read = driver(agent).tokens.read
        assert read is not None
        assert read(text) == of_reading(transcripts.Reading().fed(text, getattr(transcripts, name)))


def test_sqlite_is_loaded_without_functools_and_caches_its_statements(env):
    probe = (
        "import sys\n"
        "from teleclaude.adapters import hook_db\n"
        "assert 'functools' not in sys.modules and 'collections' not in sys.modules\n"
        "conn = hook_db.sqlite3.connect(':memory:')\n"
        "assert [conn.execute('SELECT ?', (n % 2,)).fetchone()[0] for n in range(4)] == [0, 1, 0, 1]\n"
        "import functools\n"
        "assert functools.reduce(int.__add__, [1, 2]) == 3 and 'collections' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.environ.get("TELECLAUDE_DB") is not None


def _project_with_a_tree(root: Path) -> Path:
    """A teleclaude project with its roadmap committed and the item's worktree trees/feat."""
    _clean_project(root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@invalid"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "roadmap"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", "-b", "feat", str(root / "trees" / "feat")], check=True)
    return root / "trees" / "feat"


@pytest.mark.parametrize("where", ["tree", "subfolder"])
def test_a_stop_in_a_clean_worktree_is_let_through_before_stop_py(env, tmp_path, where):
    """A build worker's stop at every turn's end: its worktree found by its `.git` file, one `git status`."""
    tree = _project_with_a_tree(tmp_path)
    cwd = tree / "todos" if where == "subfolder" else tree
    stop = json.dumps({"cwd": str(cwd), "hook_event_name": "Stop"})
    done, modules = run(["hook", "stop", "--agent", "claude"], env, stop)
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
    assert not {m for m in modules if m in STOP_NOT or driver_module(m) or m == "teleclaude.adapters.git"}
    (cwd / "wip.py").write_text("x\n")  # a change: stop.py refuses, as before
    done, modules = run(["hook", "stop", "--agent", "claude"], env, stop)
    assert json.loads(done.stdout)["decision"] == "block" and "teleclaude.runtime.hooks.stop" in modules


def test_a_claude_worker_s_stop_in_its_worktree_keeps_its_reading_before_stop_py(env, tmp_path):
    from teleclaude.agents.claude import transcript_tokens

    tree, transcript = _project_with_a_tree(tmp_path / "project"), tmp_path / "transcript.jsonl"
    worker = {**_workers(env, tmp_path, transcript), "TMUX": f"{tmp_path}/no-server,1,0"}
    _append(transcript, _reply(1))
    raw = json.dumps({"cwd": str(tree), "hook_event_name": "Stop", "transcript_path": str(transcript)})
    done, modules = run(["hook", "stop", "--agent", "claude"], worker, raw)
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
    assert {m for m in modules if m.split(".")[0] in STOP_NOT or m in STOP_NOT or driver_module(m)} == set()
    state, _, _, readings, events = _kept(env["TELECLAUDE_DB"], "w1")
    assert (state, readings) == ("turn_ended", [transcript_tokens(transcript.read_text())])
    assert events == [("turn_ended", "stop hook")]


def test_only_the_latest_reading_keeps_where_the_read_got_to(env, tmp_path):
    import sqlite3

    transcript = tmp_path / "transcript.jsonl"
    _clean_project(tmp_path)
    worker = {**_workers(env, tmp_path, transcript), "TMUX": f"{tmp_path}/no-server,1,0"}
    raw = json.dumps({"cwd": str(tmp_path), "hook_event_name": "Stop", "transcript_path": str(transcript)})
    for turn in range(1, 4):
        _append(transcript, _reply(turn))
        _working(env["TELECLAUDE_DB"])
        assert run(["hook", "stop", "--agent", "claude"], worker, raw)[0].returncode == 0
    with sqlite3.connect(env["TELECLAUDE_DB"]) as conn:
        kept = conn.execute("SELECT read_state IS NOT NULL FROM spend WHERE session_id = 'w1' ORDER BY id")
        assert [row[0] for row in kept] == [0, 0, 1]
    conn.close()
