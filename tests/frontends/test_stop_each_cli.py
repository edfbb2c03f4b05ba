"""Each CLI's stop of a worker as that CLI sends it at every turn's end, recorded before stop.py where its
record is plain: codex's (its rollout file named: what the session used and the rate limits the provider
reported) when its usage is on record already, gemini's (its chat file named, and the prompt the model was
sent) when that prompt is plainly not the command line as typed. What the file holds new is read with the
plain readers and kept with the turn's end without stop.py, the driver or the store: the same readings,
rows, usage and marks as stop.py's full path (issue 40 §3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from io import StringIO

import pytest

from tests.frontends.test_hook_imports import SANDBOXED_STOP_NOT, _clean_project, driver_module, run
from tests.frontends.test_stop_transcript import (
    STOP_NOT,
    _append,
    _kept,
    _marks,
    _sandboxed,
    _two_channels,
    _working,
    read_in_pieces,
)

RESET = 4102444800  # 2100-01-01
# a codex worker's stop reads its windows' times with `_datetime` alone (agents/moments.py)
CODEX_STOP_NOT = STOP_NOT
CODEX_SANDBOXED_NOT = SANDBOXED_STOP_NOT
# and opencode's reads its database with records.py's lean query (no urllib, no sqlite3's dbapi2)
DATABASE_STOP_NOT = tuple(m for m in STOP_NOT if m != "teleclaude.adapters.records")


def _turn(number: int, used: float = 40.0, model: str = "gpt-5.1-codex", limits: bool = True) -> list[str]:
    """A turn of a codex 0.169 rollout file: its context, a reply, the token_count with the session's totals
    and the rate limits the response's headers said (tests/realcli/NOTES.md), its end."""
    total = {
        "input_tokens": 1000 * number,
        "cached_input_tokens": 800 * number,
        "output_tokens": 50 * number,
        "reasoning_output_tokens": 10 * number,
        "total_tokens": 1050 * number,
    }
    rate_limits = {
        "limit_id": "codex",
        "primary": {"used_percent": used, "window_minutes": 300, "resets_at": RESET},
        "secondary": {"used_percent": 22.0, "window_minutes": 10080, "resets_at": RESET + 86400},
        "plan_type": None,
    }
    events = [
        {"type": "turn_context", "payload": {"cwd": "/x", "model": model}},
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": f"t{number}"}},
        {"type": "response_item", "payload": {"type": "message", "content": [{"text": "done"}]}},
        {
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {"total_token_usage": total},
                "rate_limits": rate_limits if limits else None,
            },
        },
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": f"t{number}"}},
    ]
    stamp = f"2026-11-29T04:{number % 60:02d}:00.000Z"
    return [json.dumps({"timestamp": stamp, **event}) for event in events]


def _codex_workers(
    env: dict[str, str], project, rollout, agent: str = "codex", conversation: str = ""
) -> dict[str, str]:
    """Two running codex workers of one key, the rollout on record (its prompt hook names it)."""
    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState

    now = datetime.now(UTC)
    store = SessionStore(env["TELECLAUDE_DB"])
    for session_id in ("w1", "w2"):
        store.add(
            Session(
                id=session_id, agent=agent, command="next-build", args="feat", project=str(project),
                subfolder=None, state=SessionState.RUNNING, created_at=now, updated_at=now, key="k1",
                transcript=str(rollout), conversation=conversation,
            )
        )  # fmt: skip
    return {**env, "TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_SESSION_KEY": "k1"}


def _usage(db: str) -> dict[str, tuple]:
    from teleclaude.adapters.store import AvailabilityStore

    windows = AvailabilityStore(db).usage(datetime.now(UTC)).get("codex", ())
    return {w.window: (w.used_percent, w.resets_at) for w in windows}


@pytest.fixture
def env(subprocess_env) -> dict[str, str]:
    return {k: v for k, v in subprocess_env.items() if not k.startswith("TELECLAUDE_SESSION")}


def test_a_local_codex_worker_s_stop_keeps_its_rollout_as_stop_py_does(env, tmp_path, monkeypatch):
    from teleclaude.agents.codex import rollout_tokens
    from teleclaude.runtime.hooks import stop

    project, rollout = tmp_path / "project", tmp_path / "rollout.jsonl"
    project.mkdir()
    _clean_project(project)
    worker = {**_codex_workers(env, project, rollout), "TMUX": f"{tmp_path}/no-server,1,0"}
    raw = json.dumps(
        {"cwd": str(project), "hook_event_name": "Stop", "turn_id": "t", "transcript_path": str(rollout)}
    )
    for name, value in {**worker, "TELECLAUDE_SESSION_ID": "w2"}.items():
        monkeypatch.setenv(name, value)
    # the usage news at first (stop.py keeps it), then the same windows again (the plain way), a turn only
    # begun (its model named, no totals yet), a turn without rate limits, the model changed, news again
    turns = [
        (_turn(1), True),
        (_turn(2), False),
        (_turn(3)[:2], False),
        (_turn(3)[2:] + _turn(4, limits=False), False),
        (_turn(5, model="gpt-5.2-codex"), False),
        (_turn(6, used=55.0, model="gpt-5.2-codex"), True),
    ]
    for number, (lines, news) in enumerate(turns):
        _append(rollout, lines)
        _working(env["TELECLAUDE_DB"])
        done, modules = run(["hook", "stop", "--agent", "codex"], worker, raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        full_path = "teleclaude.runtime.hooks.stop" in modules
        assert full_path == news, number
        if not news:
            unwanted = {m for m in modules if m in CODEX_STOP_NOT or m.split(".")[0] in CODEX_STOP_NOT}
            assert unwanted | {m for m in modules if driver_module(m)} == set()
        assert stop.main("codex", StringIO(raw)) == 0  # the full path, in this process
        plain, full = _kept(env["TELECLAUDE_DB"], "w1"), _kept(env["TELECLAUDE_DB"], "w2")
        assert plain == full and plain[0] == "turn_ended" and len(plain[4]) == number + 1
        assert plain[3][-1] == rollout_tokens(rollout.read_text())  # the whole file's reading
    assert plain[3][-1].model == "gpt-5.2-codex"
    assert _usage(env["TELECLAUDE_DB"]) == {
        "primary": (55.0, datetime.fromtimestamp(RESET, UTC)),
        "secondary": (22.0, datetime.fromtimestamp(RESET + 86400, UTC)),
    }


def test_a_sandboxed_codex_worker_s_stop_marks_its_usage_and_reading_as_stop_py_marks_them(
    env, tmp_path, monkeypatch
):
    from teleclaude.agents.codex import rollout_tokens
    from teleclaude.runtime.core.spend import encode_tokens
    from teleclaude.runtime.hooks import stop

    project, plain, full = _two_channels(env, tmp_path, monkeypatch)
    rollout = tmp_path / "rollout.jsonl"
    raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop", "transcript_path": str(rollout)})
    for lines in (_turn(1), _turn(2, used=60.0)[:2], _turn(2, used=60.0)[2:], _turn(3, limits=False)):
        _append(rollout, lines)
        done, modules = run(["hook", "stop", "--agent", "codex"], _sandboxed(env, plain), raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        unwanted = (*CODEX_SANDBOXED_NOT, "json", "functools", "collections")
        assert {m for m in modules if m in unwanted or driver_module(m)} == set()
        assert stop.main("codex", StringIO(raw)) == 0  # the full path, in this process
        assert _marks(plain) == _marks(full) and "@teleclaude_usage" in _marks(plain)
        whole = rollout_tokens(rollout.read_text())
        assert whole is not None and _marks(plain)["@teleclaude_spend"] == encode_tokens(whole)


def test_a_codex_prompt_with_its_usage_on_record_loads_no_driver(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    rollout = tmp_path / "rollout.jsonl"
    _append(rollout, _turn(1))
    worker = _codex_workers(env, tmp_path, rollout)
    SessionStore(env["TELECLAUDE_DB"]).name_transcript("w1", str(rollout), "c")
    prompt = json.dumps({"session_id": "c", "transcript_path": str(rollout), "prompt": "hi"})
    first, modules = run(["hook", "prompt", "--agent", "codex"], worker, prompt)
    assert first.returncode == 0 and "teleclaude.agents.codex" in modules  # news: the driver keeps it
    assert _usage(env["TELECLAUDE_DB"])["primary"][0] == 40.0
    again, modules = run(["hook", "prompt", "--agent", "codex"], worker, prompt)
    assert again.returncode == 0 and "teleclaude hook" not in again.stderr
    assert not {m for m in modules if driver_module(m)} and "teleclaude.adapters.store" not in modules


def test_reading_what_is_new_of_a_rollout_gives_what_reading_the_whole_file_gives(tmp_path):
    from teleclaude.agents.codex import rollout_tokens
    from teleclaude.agents.transcripts import rollout_totals

    path = tmp_path / "rollout.jsonl"
    lines = [*_turn(1), "{cut short", *_turn(2)[:1], *_turn(2, model="")[1:], "[]", *_turn(3, limits=False)]
    lines += [*_turn(4, model="other")[:1]]  # a turn begun: its model named, no totals yet
    data = ("\n".join(lines) + "\n").encode()
    used, _ = read_in_pieces(path, data, 89, rollout_totals, rollout_tokens)
    assert used is not None and used[4] == "other"


def test_the_plain_usage_reader_is_the_driver_s():
    from teleclaude.agents import USAGE_LINES, driver, rollout
    from teleclaude.agents.usage import UsageWindow

    text = "\n".join([*_turn(1, used=12.5), *_turn(2, limits=False), '{"cut'])
    now = datetime.now(UTC)
    for agent, name in USAGE_LINES.items():
        read = driver(agent).usage.read
        assert read is not None
        plain = getattr(rollout, name)(text, now)
        assert read(text, now) == tuple(UsageWindow(agent, *limit) for limit in plain) != ()


def _chat(number: int, model: str = "gemini-2.5-pro", output: int = 40) -> list[str]:
    """A turn of a gemini 0.61 chat file: the user's message, the model's written twice as it grew."""
    lines: list[dict[str, object]] = [{"id": f"u{number}", "type": "user", "content": [{"text": "go on"}]}]
    for written in (5, output):
        tokens = {"input": 900 * number, "output": written, "cached": 100, "thoughts": 7, "tool": 3}
        lines.append({"id": f"m{number}", "type": "gemini", "model": model, "tokens": tokens})
    return [json.dumps(line) for line in lines]


EXPANDED = "You are the builder of teleclaude.\n\nBuild the item named in: feat\n\nCommit as you go."


def test_a_local_gemini_worker_s_stop_keeps_its_chat_and_prompt_as_stop_py_does(env, tmp_path, monkeypatch):
    from teleclaude.agents.gemini import session_tokens
    from teleclaude.runtime.hooks import stop

    project, chat = tmp_path / "project", tmp_path / "session.jsonl"
    project.mkdir()
    _clean_project(project)
    worker = {**_codex_workers(env, project, chat, "gemini"), "TMUX": f"{tmp_path}/no-server,1,0"}
    for name, value in {**worker, "TELECLAUDE_SESSION_ID": "w2"}.items():
        monkeypatch.setenv(name, value)
    turns = [_chat(1), _chat(2)[:2], _chat(2)[2:] + _chat(3, model="gemini-2.5-flash")]
    for number, lines in enumerate(turns):
        _append(chat, lines)
        _working(env["TELECLAUDE_DB"])
        stop_input = {"cwd": str(project), "hook_event_name": "AfterAgent", "transcript_path": str(chat)}
        raw = json.dumps({**stop_input, "prompt": EXPANDED, "prompt_response": "done"})
        done, modules = run(["hook", "stop", "--agent", "gemini"], worker, raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        assert {
            m for m in modules if m in STOP_NOT or m.split(".")[0] in STOP_NOT or driver_module(m)
        } == set()
        assert stop.main("gemini", StringIO(raw)) == 0  # the full path, in this process
        plain, full = _kept(env["TELECLAUDE_DB"], "w1"), _kept(env["TELECLAUDE_DB"], "w2")
        assert plain == full and plain[0] == "turn_ended" and len(plain[4]) == number + 1
        assert plain[3][-1] == session_tokens(chat.read_text())  # the whole file's reading
    assert plain[3][-1].model == "gemini-2.5-flash"


@pytest.mark.parametrize(
    "prompt", ["/next-build feat", "<session_context>x</session_context>\n/next-build feat\n"]
)
def test_a_gemini_stop_whose_prompt_may_be_the_typed_line_is_the_runtime_s(env, tmp_path, prompt):
    """Its role command unknown to it, gemini sent the line as typed to the model: the session errs."""
    from teleclaude.adapters.sessions_db import SessionStore

    chat = tmp_path / "session.jsonl"
    _clean_project(tmp_path)
    worker = {**_codex_workers(env, tmp_path, chat, "gemini"), "TMUX": f"{tmp_path}/no-server,1,0"}
    _append(chat, _chat(1))
    raw = json.dumps(
        {
            "cwd": str(tmp_path),
            "hook_event_name": "AfterAgent",
            "transcript_path": str(chat),
            "prompt": prompt,
        }
    )
    done, modules = run(["hook", "stop", "--agent", "gemini"], worker, raw)
    assert (done.returncode, done.stdout) == (0, "")
    assert "teleclaude.runtime.api" in modules
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and session.state.value == "errored"


def test_a_sandboxed_gemini_worker_s_stop_marks_its_chat_and_prompt_as_stop_py_marks_them(
    env, tmp_path, monkeypatch
):
    from teleclaude.adapters import sandbox
    from teleclaude.runtime.core.marks import unseal
    from teleclaude.runtime.hooks import stop

    project, plain, full = _two_channels(env, tmp_path, monkeypatch)
    chat = tmp_path / "session.jsonl"
    for number, prompt in enumerate((EXPANDED, "/next-build feat", 'a "quoted" prompt \u2028 é')):
        _append(chat, _chat(number + 1))
        stop_input = {"cwd": str(project), "hook_event_name": "AfterAgent", "transcript_path": str(chat)}
        raw = json.dumps({**stop_input, "prompt": prompt})
        done, modules = run(["hook", "stop", "--agent", "gemini"], _sandboxed(env, plain), raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        unwanted = (*SANDBOXED_STOP_NOT, "json", "functools", "collections")
        assert {m for m in modules if m in unwanted or driver_module(m)} == set()
        assert stop.main("gemini", StringIO(raw)) == 0  # the full path, in this process
        assert _marks(plain) == _marks(full)
        said = [
            unseal("k1", "w1", "@teleclaude_turn_end", sandbox.read_marks(folder)["@teleclaude_turn_end"])
            for folder in (plain, full)
        ]
        assert [(payload or "").partition(" ")[2] for payload in said] == [json.dumps(prompt)] * 2


def test_the_stop_prompt_table_is_the_drivers():
    from teleclaude.agents import PROFILES, STOP_PROMPTS

    assert tuple(name for name, d in PROFILES.items() if d.hooks.stop_prompt) == STOP_PROMPTS


def test_each_line_reader_reads_as_its_driver_reads_a_whole_file():
    from teleclaude.agents import TRANSCRIPT_LINES, driver, transcripts
    from teleclaude.agents.tokens import of_reading

    texts = {
        "codex": "\n".join([*_turn(1), *_turn(2, model="m2"), *_turn(3, limits=False)[:1]]),
        "gemini": "\n".join([*_chat(1), *_chat(2, model="other"), *_chat(1, output=9)[1:], "{cut"]),
    }
    for agent, text in texts.items():
        read = driver(agent).tokens.read
        assert read is not None and read(text) is not None
        name = TRANSCRIPT_LINES[agent]
        assert read(text) == of_reading(transcripts.Reading().fed(text, getattr(transcripts, name)))


def test_an_opencode_prompt_names_its_conversation_and_leaves_its_database_on_record(env, tmp_path):
    """opencode's chat.message names no file: its record (opencode's database) is named by its stop hook,
    and a prompt neither clears it nor loads the store once the conversation is on record."""
    from teleclaude.adapters.sessions_db import SessionStore

    database = tmp_path / "opencode.db"
    worker = _codex_workers(env, tmp_path, database, "opencode")
    prompt = json.dumps({"session_id": "ses_1", "cwd": str(tmp_path), "hook_event_name": "chat.message"})
    first, modules = run(["hook", "prompt", "--agent", "opencode"], worker, prompt)
    assert first.returncode == 0 and "teleclaude hook" not in first.stderr
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and (session.conversation, session.transcript) == ("ses_1", str(database))
    again, modules = run(["hook", "prompt", "--agent", "opencode"], worker, prompt)
    assert again.returncode == 0 and "teleclaude hook" not in again.stderr
    assert "teleclaude.adapters.sessions_db" not in modules


def _answer(database, session: str, number: int, cost: float = 0.002, model: str = "gpt-5.1") -> None:
    """One more answer in opencode's own database (the tables answers.py `MESSAGES` reads)."""
    import sqlite3

    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS session (id TEXT PRIMARY KEY, parent_id TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS message (id TEXT, session_id TEXT, time_created, data TEXT)")
        conn.execute("INSERT OR IGNORE INTO session VALUES (?, NULL)", (session,))
        tokens = {"input": 900, "output": 40 + number, "reasoning": 5, "cache": {"read": 8000, "write": 10}}
        data = {"role": "assistant", "tokens": tokens, "cost": cost, "modelID": model}
        conn.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?)", (f"m{number}", session, number, json.dumps(data))
        )
    conn.close()


def test_a_local_opencode_worker_s_stop_keeps_what_its_database_says_as_stop_py_does(
    env, tmp_path, monkeypatch
):
    from teleclaude.adapters.records import read_use
    from teleclaude.agents import PROFILES
    from teleclaude.runtime.hooks import stop

    project, data = tmp_path / "project", tmp_path / "data"
    project.mkdir()
    (data / "opencode").mkdir(parents=True)
    database = data / "opencode" / "opencode.db"
    _clean_project(project)
    worker = {
        **_codex_workers(env, project, database, "opencode", "ses_1"),
        "TMUX": f"{tmp_path}/no-server,1,0",
        "XDG_DATA_HOME": str(data),
    }
    for name, value in {**worker, "TELECLAUDE_SESSION_ID": "w2"}.items():
        monkeypatch.setenv(name, value)
    raw = json.dumps({"session_id": "ses_1", "cwd": str(project), "hook_event_name": "session.idle"})
    answers = [(1, 0.002), (2, 0.0), (3, 0.004)]  # a cost of 0: unknown
    for number, (answer, cost) in enumerate([(0, 0.0), *answers]):
        if answer:
            _answer(database, "ses_1", answer, cost)
        _working(env["TELECLAUDE_DB"])
        done, modules = run(["hook", "stop", "--agent", "opencode"], worker, raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        unwanted = {m for m in modules if m in DATABASE_STOP_NOT or m.split(".")[0] in DATABASE_STOP_NOT}
        assert unwanted | {m for m in modules if driver_module(m)} == set()
        assert stop.main("opencode", StringIO(raw)) == 0  # the full path, in this process
        plain, full = _kept(env["TELECLAUDE_DB"], "w1"), _kept(env["TELECLAUDE_DB"], "w2")
        assert plain == full and plain[0] == "turn_ended" and len(plain[4]) == number + 1
        whole = read_use(PROFILES["opencode"].tokens, str(database), "ses_1")
        assert plain[3][-1] == (whole or plain[3][-1].__class__())


def test_a_sandboxed_opencode_worker_s_stop_marks_what_its_database_says_as_stop_py_marks_it(
    env, tmp_path, monkeypatch
):
    from teleclaude.adapters import sandbox
    from teleclaude.runtime.hooks import stop

    data = tmp_path / "data"
    (data / "opencode").mkdir(parents=True)
    project, plain, full = _two_channels(env, tmp_path, monkeypatch, XDG_DATA_HOME=str(data))
    raw = json.dumps({"session_id": "ses_1", "cwd": str(project), "hook_event_name": "session.idle"})
    for number in (1, 2):
        _answer(data / "opencode" / "opencode.db", "ses_1", number)
        done, modules = run(
            ["hook", "stop", "--agent", "opencode"],
            {**_sandboxed(env, plain), "XDG_DATA_HOME": str(data)},
            raw,
        )
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        unwanted = (*SANDBOXED_STOP_NOT, "json", "functools", "collections")
        assert {m for m in modules if m in unwanted or driver_module(m)} - {
            "_sqlite3",
            "teleclaude.adapters.hook_db",
        } == set()
        assert stop.main("opencode", StringIO(raw)) == 0  # the full path, in this process
        assert _marks(plain) == _marks(full)
        assert sandbox.read_conversation(plain) == sandbox.read_conversation(full) == "ses_1"


def test_the_spend_databases_are_the_drivers():
    from teleclaude.agents import PROFILES, SPEND_DATABASES
    from teleclaude.agents.answers import data_file

    environ = {"HOME": "/home/u", "XDG_DATA_HOME": "/data"}
    for agent, name in SPEND_DATABASES.items():
        database = PROFILES[agent].tokens.database
        assert database is not None and database.where(environ) == data_file(environ, name)
