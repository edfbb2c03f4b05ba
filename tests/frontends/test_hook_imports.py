"""What the processes an agent event starts import: `--version` and a hook with nothing to record stop at
Python's own start (bin/teleclaude imports nothing more), whatever they would need to record; the agent
hooks reach their work without argparse; an agent hook's arguments that are not plainly good get argparse's
answer, as before."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from teleclaude.agents import NAMES, PROFILES

# what a process with nothing to do must not import: each costs about as much as Python's own start, or more
HEAVY = (
    *("dataclasses", "inspect", "typing", "logging", "argparse", "sqlite3", "_sqlite3", "sqlite_utils"),
    *("subprocess", "re", "enum", "json", "datetime", "pathlib"),
)
HEAVY_OURS = (
    "teleclaude.agents.profile",
    "teleclaude.cli.parser",
    "teleclaude.cli.base",
    "teleclaude.errors",
)

# the call in a fresh interpreter, as the console script makes it; prints the modules it imported on stderr
PROBE = """\
import sys
from teleclaude.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
modules = sorted(sys.modules)
import json
import os
sys.stderr.write("\\nMODULES " + json.dumps(modules) + "\\n")
sys.exit(code)
"""


def run(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[subprocess.CompletedProcess, set]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    listed = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    assert listed, done.stderr
    return done, set(json.loads(listed[-1].removeprefix("MODULES ")))


def driver_module(module: str) -> bool:
    """A driver's module, or the profile they share (not the registry's lean readers: jsonin, statusline)."""
    return module.removeprefix("teleclaude.agents.") in (*NAMES, "profile", "tokens", "formats")


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m in HEAVY or m.split(".")[0] in HEAVY or m in HEAVY_OURS}


@pytest.fixture
def env(subprocess_env) -> dict[str, str]:
    return {k: v for k, v in subprocess_env.items() if not k.startswith("TELECLAUDE_SESSION")}


TOOL = json.dumps({"tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/"})


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["hook", "tool-use"],
        ["hook", "tool-use", "--agent", "codex"],
        ["hook", "tool-use", "--agent=gemini"],
        ["hook", "stop-failure"],  # not a worker's: its input read, nothing recorded
        ["hook", "stop-failure", "--agent", "opencode"],
    ],
)
def test_a_call_with_nothing_to_record_imports_nothing_heavy(env, argv):
    done, modules = run(argv, env, TOOL)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("teleclaude 0.1.0\n" if argv == ["--version"] else "")
    assert heavy(modules) == set()
    assert not any(driver_module(m) for m in modules)  # not one driver looked up


def test_a_tool_use_of_another_computers_worker_imports_nothing_heavy(env):
    remote = {**env, "TELECLAUDE_SESSION_ID": "abc12345", "TELECLAUDE_TURN_END_TO_PANE": "1"}
    done, modules = run(["hook", "tool-use", "--agent", "claude"], remote, TOOL)
    assert done.returncode == 0, done.stderr
    assert heavy(modules) == set()


@pytest.mark.parametrize(
    ("argv", "stdin"),
    [
        (["hook", "stop", "--agent", "claude"], json.dumps({"cwd": "/", "hook_event_name": "Stop"})),
        (["hook", "statusline"], json.dumps({"model": {"display_name": "Opus"}})),
        (["hook", "prompt", "--agent", "codex"], json.dumps({"prompt": "hi"})),
    ],
)
def test_the_agent_hooks_run_without_argparse(env, argv, stdin):
    done, modules = run(argv, env, stdin)
    assert done.returncode == 0, done.stderr
    assert not {"argparse", "teleclaude.cli.parser"} & modules
    assert not {"sqlite_utils", "subprocess"} & modules


@pytest.mark.parametrize("agent", NAMES)
@pytest.mark.parametrize("where", ["outside", "project without a roadmap", "active"])
def test_a_stop_with_nothing_to_refuse_or_record_imports_nothing_heavy(env, tmp_path, agent, where):
    folder = tmp_path / "work"
    (folder / ".git").mkdir(parents=True)
    cwd = tmp_path if where == "outside" else folder
    stop = {"cwd": str(cwd), "hook_event_name": "Stop", "stop_hook_active": where == "active"}
    stop["transcript_path"] = str(tmp_path / "none.jsonl")  # claude's, every turn: a file that is not there
    done, modules = run(["hook", "stop", "--agent", agent], env, json.dumps(stop))
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
    assert heavy(modules) == set()
    assert not {m for m in modules if driver_module(m) or m == "teleclaude.adapters.git"}


def test_a_stop_in_a_project_s_main_checkout_with_nothing_to_commit_imports_nothing_heavy(env, tmp_path):
    """Claude Code's stop outside a worker, at every turn's end: one `git status`, run without subprocess."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "todos" / "feat").mkdir(parents=True)
    (tmp_path / "todos" / "roadmap.md").write_text("# Roadmap\n- [ ] feat\n")
    (tmp_path / "src.py").write_text("x\n")  # outside todos/: never blocks
    stop = json.dumps({"cwd": str(tmp_path / "todos"), "hook_event_name": "Stop"})
    done, modules = run(["hook", "stop", "--agent", "claude"], env, stop)
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
    assert heavy(modules) == set()
    assert not {m for m in modules if driver_module(m) or m == "teleclaude.adapters.git"}


def test_a_stop_in_a_project_is_stop_py_s_to_decide(env, tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "todos" / "feat").mkdir(parents=True)
    (tmp_path / "todos" / "roadmap.md").write_text("# Roadmap\n- [ ] feat\n")
    (tmp_path / "todos" / "feat" / "requirements.md").write_text("# Feat\n")
    stop = json.dumps({"cwd": str(tmp_path), "hook_event_name": "Stop"})
    done, modules = run(["hook", "stop", "--agent", "claude"], env, stop)
    assert done.returncode == 0 and json.loads(done.stdout)["decision"] == "block"
    assert "teleclaude.adapters.git" in modules


@pytest.mark.parametrize(
    "argv",
    [
        ["hook", "tool-use", "--agent", "hal9000"],
        ["hook", "tool-use", "--agent"],
        ["hook", "tool-use", "--agnet", "claude"],
        ["hook", "statusline", "--agent", "codex"],  # codex reports no usage in a status line
    ],
)
def test_a_hook_with_arguments_not_plainly_good_gets_argparse_s_answer(env, argv):
    done, modules = run(argv, env, TOOL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("usage: teleclaude") and "Traceback" not in done.stderr
    assert "argparse" in modules


def test_an_option_given_twice_is_argparse_s_to_read(env):
    stop = json.dumps({"cwd": "/", "hook_event_name": "Stop"})
    done, modules = run(["hook", "stop", "--agent", "claude", "--agent", "codex"], env, stop)
    assert (done.returncode, done.stdout) == (0, "")
    assert "argparse" in modules


def test_a_hook_s_help_is_argparse_s(env):
    done, _ = run(["hook", "tool-use", "--help"], env)
    assert done.returncode == 0
    assert done.stdout.startswith("usage: teleclaude hook tool-use")


def test_the_names_are_the_drivers_in_their_order():
    assert tuple(PROFILES) == NAMES


def test_the_hooks_tables_are_the_drivers():
    from teleclaude.agents import HOOK_VERBS, SPEND_SOURCES, USAGE_SOURCES
    from teleclaude.agents.profile import UsageSource

    assert {name: tuple(verb for _, verb in d.hooks.events) for name, d in PROFILES.items()} == HOOK_VERBS
    assert {
        name: d.usage.source.value for name, d in PROFILES.items() if d.usage.source is not UsageSource.NONE
    } == USAGE_SOURCES
    spend = {name: d.tokens for name, d in PROFILES.items() if d.tokens.read or d.tokens.database}
    assert {name: "database" if t.database else "transcript" for name, t in spend.items()} == SPEND_SOURCES


# what a worker's tool use (before every tool call of every worker) imports to record itself: _sqlite3 and
# the row's module, not the store's modules, their dataclasses, the session model, OpenSSL, nor the modules
# that cost a third of Python's start or more each (re: json's; datetime: sqlite3's)
TOOL_USE_NOT = (
    *HEAVY_OURS,
    "dataclasses",
    "inspect",
    "typing",
    "re",
    "enum",
    "json",
    "datetime",
    "sqlite3",
    "pathlib",
    *("hashlib", "hmac", "functools", "collections", "types"),
    "teleclaude.adapters.store",
    "teleclaude.adapters.sessions_db",
    "teleclaude.runtime.core.sessions",
    "teleclaude.planner.core.model",
)


def _worker(env: dict[str, str], tmp_path, key: str = "k1") -> dict[str, str]:
    from datetime import UTC, datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState

    now = datetime.now(UTC)
    session = Session(
        id="w1", agent="claude", command="next-build", args="feat", project=str(tmp_path), subfolder=None,
        state=SessionState.RUNNING, created_at=now, updated_at=now, key=key,
    )  # fmt: skip
    SessionStore(env["TELECLAUDE_DB"]).add(session)
    return {**env, "TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_SESSION_KEY": key}


def test_a_worker_s_tool_use_is_recorded_with_sqlite3_alone(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    worker = _worker(env, tmp_path)
    done, modules = run(["hook", "tool-use", "--agent", "claude"], worker, TOOL)
    assert (done.returncode, done.stdout) == (0, "")
    assert "teleclaude hook" not in done.stderr  # no warning
    assert "_sqlite3" in modules
    assert {m for m in modules if m in TOOL_USE_NOT or driver_module(m)} == set()
    uses = SessionStore(env["TELECLAUDE_DB"]).recent_tool_uses(["w1"])["w1"]
    assert [(u.tool, u.target) for u in uses] == [("Bash", "ls")]


def test_a_tool_use_is_recorded_on_a_python_whose_lru_cache_wrapper_differs(env, tmp_path):
    """hook_db's stand-in `functools` makes `_sqlite3`'s statement cache with the C wrapper; a Python without
    that wrapper (or with another signature) gets the real `functools.lru_cache`, not a failed hook."""
    from teleclaude.adapters.sessions_db import SessionStore

    worker = _worker(env, tmp_path)
    without = "import _functools\ndel _functools._lru_cache_wrapper\n" + PROBE
    done = subprocess.run(
        [sys.executable, "-c", without, "hook", "tool-use", "--agent", "claude"],
        input=TOOL, env=worker, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    uses = SessionStore(env["TELECLAUDE_DB"]).recent_tool_uses(["w1"])["w1"]
    assert [(u.tool, u.target) for u in uses] == [("Bash", "ls")]


def test_a_tool_use_with_another_key_records_nothing(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    worker = {**_worker(env, tmp_path), "TELECLAUDE_SESSION_KEY": "not-k1"}
    done, _ = run(["hook", "tool-use", "--agent", "claude"], worker, TOOL)
    assert (done.returncode, done.stdout) == (0, "")
    assert SessionStore(env["TELECLAUDE_DB"]).recent_tool_uses(["w1"]) == {}


@pytest.mark.parametrize(
    "environ", [{"TELECLAUDE_DB": "/x/t.db", "HOME": "/h"}, {"HOME": "/h"}, {"HOME": ""}]
)
def test_the_hooks_plain_path_uses_the_store_s_file(monkeypatch, environ):
    from teleclaude.adapters.hook_db import db_file
    from teleclaude.adapters.store import default_db_path

    monkeypatch.delenv("TELECLAUDE_DB", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert db_file() == str(default_db_path())


def test_a_driver_is_the_registry_s():
    from teleclaude.agents import driver

    assert all(driver(name) is PROFILES[name] for name in NAMES)
    with pytest.raises(KeyError):
        driver("hal9000")


@pytest.mark.parametrize(
    ("argv", "stdin", "agent"),
    [
        (["hook", "statusline"], json.dumps({"model": {"display_name": "Opus"}}), "claude"),
        (["hook", "prompt", "--agent", "codex"], json.dumps({"prompt": "hi"}), "codex"),
        (
            ["hook", "stop", "--agent", "claude"],
            json.dumps({"cwd": "/", "hook_event_name": "Stop"}),
            "claude",
        ),
        (
            ["hook", "stop", "--agent=gemini"],
            json.dumps({"cwd": "/", "hook_event_name": "AfterAgent"}),
            "gemini",
        ),
    ],
)
def test_a_hook_for_one_cli_imports_no_other_cli_s_driver(env, argv, stdin, agent):
    done, modules = run(argv, env, stdin)
    assert done.returncode == 0, done.stderr
    drivers = {m.removeprefix("teleclaude.agents.") for m in modules if m.startswith("teleclaude.agents.")}
    assert drivers & set(NAMES) <= {agent}  # a status line without news: none


def test_a_status_line_with_its_usage_on_record_imports_no_planner_model_nor_typing(env):
    from datetime import UTC, datetime

    resets = int(datetime.now(UTC).timestamp()) + 3600
    status = json.dumps(
        {
            "model": {"display_name": "Opus"},
            "rate_limits": {"five_hour": {"used_percentage": 42, "resets_at": resets}},
        }
    )
    run(["hook", "statusline"], env, status)  # the first: records the usage
    done, modules = run(["hook", "statusline"], env, status)
    assert (done.returncode, done.stdout.startswith("Opus · 5h 42%")) == (0, True), done.stderr
    unwanted = (
        *("typing", "sqlite_utils", "teleclaude.planner.core.model", "teleclaude.planner.core.render"),
        *("dataclasses", "inspect", "re", "enum", "json", "subprocess", "pathlib", "sqlite3"),
        *("teleclaude.agents.profile", "teleclaude.adapters.store"),
        "datetime",  # its classes from `_datetime` (agents/moments.py): datetime.py runs them all in Python
    )
    assert {m for m in modules if m in unwanted or m.split(".")[0] in unwanted} == set()


def test_a_worker_s_prompt_with_its_transcript_on_record_loads_no_runtime(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    worker = _worker(env, tmp_path)
    prompt = json.dumps({"transcript_path": str(tmp_path / "rollout.jsonl"), "prompt": "hi"})
    first, modules = run(["hook", "prompt", "--agent", "codex"], worker, prompt)
    assert first.returncode == 0 and "teleclaude.adapters.sessions_db" in modules  # kept by the store
    assert "teleclaude.runtime.api" not in modules
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and session.transcript == str(tmp_path / "rollout.jsonl")
    again, modules = run(["hook", "prompt", "--agent", "codex"], worker, prompt)
    assert again.returncode == 0 and "teleclaude hook" not in again.stderr
    assert "teleclaude.runtime.api" not in modules
    other = json.dumps({"transcript_path": str(tmp_path / "other.jsonl"), "prompt": "hi"})
    assert run(["hook", "prompt", "--agent", "codex"], worker, other)[0].returncode == 0
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and session.transcript == str(tmp_path / "other.jsonl")


def test_a_prompt_with_another_key_is_not_recorded(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    worker = {**_worker(env, tmp_path), "TELECLAUDE_SESSION_KEY": "not-k1"}
    prompt = json.dumps({"transcript_path": str(tmp_path / "rollout.jsonl"), "prompt": "hi"})
    done, _ = run(["hook", "prompt", "--agent", "codex"], worker, prompt)
    assert done.returncode == 0
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and session.transcript in ("", None)


def test_a_tool_use_naming_the_conversation_keeps_it_then_goes_the_plain_way(env, tmp_path):
    from teleclaude.adapters.sessions_db import SessionStore

    worker = _worker(env, tmp_path)
    said = json.dumps({**json.loads(TOOL), "session_id": "c-1", "transcript_path": "/t.jsonl"})
    first, modules = run(["hook", "tool-use", "--agent", "claude"], worker, said)
    assert first.returncode == 0 and "teleclaude.adapters.sessions_db" in modules  # news: the store keeps it
    session = SessionStore(env["TELECLAUDE_DB"]).get("w1")
    assert session is not None and (session.conversation, session.transcript) == ("c-1", "/t.jsonl")
    again, modules = run(["hook", "tool-use", "--agent", "claude"], worker, said)
    assert again.returncode == 0 and "teleclaude.adapters.sessions_db" not in modules
    assert len(SessionStore(env["TELECLAUDE_DB"]).recent_tool_uses(["w1"])["w1"]) == 2


def test_the_installed_command_imports_no_re(env):
    """bin/teleclaude as installed: not pip's entry-point wrapper, which imports `re` (and `enum`) first."""
    from pathlib import Path

    script = Path(sys.executable).with_name("teleclaude")
    if not script.is_file():
        pytest.skip("no teleclaude command beside this Python")
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "teleclaude 0.1.0\n")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "teleclaude.cli" in imported
    assert not {"re", "enum", "json", "typing", "dataclasses"} & imported


SCRIPT = Path(__file__).resolve().parents[2] / "bin" / "teleclaude"


def test_a_hook_s_output_and_exit_code_survive_its_quick_end(env):
    """bin/teleclaude ends a hook or `--version` without the interpreter's teardown: what it printed reaches
    the pipe whole, and its exit code is the hook's."""
    status = json.dumps({"model": {"display_name": "Opus"}})
    for argv, stdin, out in (
        (["--version"], "", "teleclaude 0.1.0\n"),
        (["hook", "statusline"], status, "Opus\n"),
        (["hook", "tool-use"], TOOL, ""),
    ):
        done = subprocess.run(
            [sys.executable, str(SCRIPT), *argv],
            input=stdin,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, out, "")


def test_what_asked_to_run_at_exit_still_runs(env):
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stdout.write('at exit\\n'))\n"
        "from teleclaude.cli import finish, main\n"
        "finish(main(['--version']))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "teleclaude 0.1.0\nat exit\n")


def _clean_project(root) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "todos").mkdir()
    (root / "todos" / "roadmap.md").write_text("# Roadmap\n- [ ] feat\n")


def _state_and_events(db: str, session_id: str) -> tuple:
    from teleclaude.adapters.sessions_db import SessionStore

    store = SessionStore(db)
    session = store.get(session_id)
    assert session is not None
    events = [(e.kind.value, e.detail) for e in store.undelivered([session_id])]
    return session.state.value, session.nudges, session.last_nudge_at, session.version, events


def test_a_worker_s_turn_end_is_recorded_with_sqlite3_alone_as_the_runtime_records_it(env, tmp_path):
    """A local worker's stop in a clean main checkout, nothing to read from its CLI's records: its turn's end
    written without stop.py, the runtime or the store's modules, and the row and its event as the
    runtime's own `record_turn_end` leaves them (a second worker beside it, ended that way)."""
    from dataclasses import replace

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.config.profiles import RuntimeConfig
    from teleclaude.runtime.api import Runtime

    _clean_project(tmp_path)
    worker = {**_worker(env, tmp_path), "TMUX": f"{tmp_path}/no-server,1,0"}  # in a pane: its server's socket
    store = SessionStore(env["TELECLAUDE_DB"])
    first = store.get("w1")
    assert first is not None
    store.save(replace(first, nudges=2, last_nudge_at=first.created_at), expect=first.state)
    other = store.get("w1")
    assert other is not None
    store.add(replace(other, id="w2"))  # the same row, as saved once
    stop = json.dumps({"cwd": str(tmp_path), "hook_event_name": "Stop", "session_id": "c"})
    done, modules = run(["hook", "stop", "--agent", "codex"], worker, stop)
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
    assert {m for m in modules if m in TOOL_USE_NOT or driver_module(m)} == set()
    assert not {"subprocess", "teleclaude.runtime.hooks.stop", "teleclaude.runtime.api"} & modules
    Runtime(RuntimeConfig(socket=f"tc-none-{tmp_path.name}"), store).record_turn_end("w2")
    plain, by_runtime = (
        _state_and_events(env["TELECLAUDE_DB"], "w1"),
        _state_and_events(env["TELECLAUDE_DB"], "w2"),
    )
    assert plain == by_runtime == ("turn_ended", 0, None, 2, [("turn_ended", "stop hook")])


def test_a_local_worker_s_turn_end_wakes_the_run_listening_on_its_pipe_without_a_tmux_client(env, tmp_path):
    """The run watching a local worker that is not sandboxed listens on a pipe of its own, beside the
    channels (`sandbox.listen`): its stop pokes it, the plain way and stop.py's (the runtime's
    `record_turn_end`), rather than a tmux client signalling its session's wait-for channel."""
    from dataclasses import replace

    from teleclaude.adapters import sandbox
    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.config.profiles import RuntimeConfig
    from teleclaude.runtime.api import Runtime

    elsewhere = tmp_path / "elsewhere"  # in no repository: no `git status` spawned
    elsewhere.mkdir()
    worker = {**_worker(env, tmp_path), "TMUX": f"{tmp_path}/no-server,1,0"}
    db = Path(env["TELECLAUDE_DB"])
    store = SessionStore(db)
    first = store.get("w1")
    assert first is not None
    store.add(replace(first, id="w2"))
    listened = [sandbox.listen(db, session_id) for session_id in ("w1", "w2")]
    pipes = [pipe for pipe in listened if pipe is not None]
    try:
        assert len(pipes) == 2 and not select.select(pipes, [], [], 0)[0]
        stop = json.dumps({"cwd": str(elsewhere), "hook_event_name": "Stop", "session_id": "c"})
        done, modules = run(["hook", "stop", "--agent", "codex"], worker, stop)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude hook" not in done.stderr
        assert "teleclaude.adapters.spawn" not in modules  # no tmux client (nor anything else) spawned
        assert os.read(pipes[0], 64) == b"\n" and not select.select(pipes, [], [], 0)[0]
        Runtime(RuntimeConfig(socket=f"tc-none-{tmp_path.name}"), store).record_turn_end("w2")
        assert os.read(pipes[1], 64) == b"\n"
    finally:
        for pipe in pipes:
            os.close(pipe)
    assert [_state_and_events(str(db), i)[0] for i in ("w1", "w2")] == ["turn_ended", "turn_ended"]
    sandbox.close_channel(db, "w1")
    assert not Path(f"{db}.channels/w1.look").exists()  # its pipe goes with the session's channel


@pytest.mark.parametrize("case", ["another key", "not in a pane", "stalled", "in its CLI's record"])
def test_a_worker_s_stop_the_plain_way_cannot_decide_is_the_runtime_s(env, tmp_path, case):
    from dataclasses import replace

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import SessionState

    _clean_project(tmp_path)
    worker = {**_worker(env, tmp_path), "TMUX": f"{tmp_path}/no-server,1,0"}
    stop = {"cwd": str(tmp_path), "hook_event_name": "Stop"}
    store = SessionStore(env["TELECLAUDE_DB"])
    if case == "another key":
        worker["TELECLAUDE_SESSION_KEY"] = "not-k1"
    elif case == "not in a pane":
        del worker["TMUX"]
    elif case == "stalled":
        session = store.get("w1")
        assert session is not None
        store.save(replace(session, state=SessionState.STALLED), expect=session.state)
    else:
        stop["transcript_path"] = str(tmp_path / "none.jsonl")  # what it used: unknown, kept as such
    done, modules = run(["hook", "stop", "--agent", "codex"], worker, json.dumps(stop))
    assert (done.returncode, done.stdout) == (0, "")
    state = store.get("w1").state  # type: ignore[union-attr]
    if case == "another key":
        assert state is SessionState.RUNNING and done.stderr.startswith("teleclaude hook stop: not recording")
        assert "teleclaude.runtime.api" not in modules
    elif case == "in its CLI's record":  # stop.py: what it used kept by the store, the turn's end plainly
        assert state is SessionState.TURN_ENDED and "teleclaude hook" not in done.stderr
        assert "teleclaude.runtime.hooks.stop" in modules and "teleclaude.runtime.api" not in modules
        assert store.spend_readings(["w1"])
    else:
        assert state is SessionState.TURN_ENDED and "teleclaude hook" not in done.stderr
        assert "teleclaude.runtime.api" in modules


def test_the_planner_s_cold_path_imports_no_subprocess_nor_a_driver(env, tmp_path):
    """A cold `next-work` (issue 40 §3): its one `git status` spawned with `os` (adapters/spawn.py), the
    settings' prices and the usage windows read without a driver (config/spend.py, agents/usage.py)."""
    _clean_project(tmp_path)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-qm", "x"],
        check=True,
    )
    done, modules = run(["next-work", "--dry-run", "--cwd", str(tmp_path)], env)
    assert done.stdout.startswith("ERROR: NOT_PREPARED"), done.stdout + done.stderr  # its answer, from git's
    assert not {"subprocess", "argparse", "sqlite_utils"} & modules
    assert not {m for m in modules if driver_module(m)}


# what a sandboxed worker's stop marking its turn's end must not import: no database, no tmux or sandbox
# adapter (subprocess, the git adapter), no OpenSSL, nor stop.py
SANDBOXED_STOP_NOT = (
    *TOOL_USE_NOT,
    *("_sqlite3", "subprocess", "tempfile", "_hashlib"),
    "teleclaude.adapters.tmux",
    "teleclaude.adapters.sandbox",
    "teleclaude.adapters.fs",
    "teleclaude.adapters.hook_db",
    "teleclaude.runtime.hooks.stop",
)


def _sandboxed(env: dict[str, str], channel) -> dict[str, str]:
    from teleclaude.adapters import sandbox
    from teleclaude.adapters.tmux import TURN_END_TO_PANE

    environ = {**env, "TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_SESSION_KEY": "k1"}
    return {**environ, sandbox.CHANNEL: str(channel), TURN_END_TO_PANE: "1"}


def _turn_end_marks(channel) -> dict[str, str]:
    """The channel's turn-end mark unsealed with the session's key (None: not sealed so), and its mode."""
    from teleclaude.adapters import sandbox
    from teleclaude.adapters.tmux import TURN_END_OPTION
    from teleclaude.runtime.core.marks import unseal

    marks = sandbox.read_marks(channel)
    assert set(marks) == {TURN_END_OPTION} and sorted(os.listdir(channel)) == ["teleclaude_turn_end"]
    payload = unseal("k1", "w1", TURN_END_OPTION, marks[TURN_END_OPTION])
    assert payload is not None and payload.isdigit()
    return {"mode": oct(os.stat(channel / "teleclaude_turn_end").st_mode & 0o777)}


def test_a_sandboxed_worker_s_turn_end_is_marked_in_its_channel_as_stop_py_marks_it(
    env, tmp_path, monkeypatch
):
    """A sandboxed worker's stop in a clean main checkout with nothing to read from its CLI's records: its
    sealed turn-end mark written into its channel without stop.py, the database, the tmux and sandbox
    adapters or OpenSSL, the same mark stop.py leaves."""
    from io import StringIO

    from teleclaude.runtime.hooks import stop

    project, plain, full = tmp_path / "project", tmp_path / "plain", tmp_path / "full"
    for folder in (project, plain, full):
        folder.mkdir(mode=0o700)
    _clean_project(project)
    raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop", "session_id": "c"})
    done, modules = run(["hook", "stop", "--agent", "codex"], _sandboxed(env, plain), raw)
    assert (done.returncode, done.stdout, done.stderr.startswith("teleclaude hook")) == (0, "", False)
    assert {m for m in modules if m in SANDBOXED_STOP_NOT or driver_module(m)} == set()
    for name, value in _sandboxed(env, full).items():
        monkeypatch.setenv(name, value)
    assert stop.main("codex", StringIO(raw)) == 0  # the full path, in this process
    assert _turn_end_marks(plain) == _turn_end_marks(full) == {"mode": "0o600"}


def test_a_sandboxed_worker_s_stop_the_plain_way_cannot_mark_is_stop_py_s(env, tmp_path):
    _clean_project(tmp_path)
    raw = json.dumps({"cwd": str(tmp_path), "hook_event_name": "Stop"})
    done, modules = run(["hook", "stop", "--agent", "codex"], _sandboxed(env, tmp_path / "gone"), raw)
    assert (done.returncode, done.stdout) == (0, "") and "teleclaude.runtime.hooks.stop" in modules
    assert done.stderr.startswith("teleclaude hook stop: could not mark")


@pytest.mark.parametrize("key", [b"", b"k1", b"k" * 64, b"k" * 65, "ключ".encode()])
def test_a_mark_s_seal_is_hmac_s(key):
    import hashlib
    import hmac

    from teleclaude.runtime.core.marks import hmac_sha256

    message = b"w1\0@teleclaude_turn_end\0123"
    assert hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_the_turn_end_mark_is_tmux_s_option():
    from teleclaude.adapters.tmux import TURN_END_OPTION
    from teleclaude.runtime.hooks.record import TURN_END_MARK

    assert TURN_END_MARK == TURN_END_OPTION


def test_a_sandboxed_worker_s_plain_turn_end_wakes_its_channel_s_relay(env, tmp_path):
    """On another computer a relay reads the channel's pipe: the plain mark pokes it, as stop.py's does."""
    from teleclaude.adapters.channel import WAKE

    project, channel = tmp_path / "project", tmp_path / "channel"
    project.mkdir()
    channel.mkdir(mode=0o700)
    _clean_project(project)
    os.mkfifo(channel / WAKE)
    relay = os.open(channel / WAKE, os.O_RDONLY | os.O_NONBLOCK)  # the relay, reading
    try:
        raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop"})
        done, modules = run(["hook", "stop", "--agent", "codex"], _sandboxed(env, channel), raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude.runtime.hooks.stop" not in modules
        assert os.read(relay, 64) == b"\n"
    finally:
        os.close(relay)
    assert "teleclaude_turn_end" in os.listdir(channel)


def test_a_local_sandboxed_worker_s_plain_turn_end_wakes_the_run_listening_on_its_channel(env, tmp_path):
    """Here the run watching the worker listens on its channel's own pipe (`sandbox.listen`): the plain mark
    pokes it, so its turn's end is not left for the run's next look."""
    from teleclaude.adapters import sandbox

    project, store = tmp_path / "project", tmp_path / "teleclaude.db"
    project.mkdir()
    _clean_project(project)
    channel = sandbox.open_channel(store, "w1")
    listening = sandbox.listen(store, "w1")
    assert listening is not None
    try:
        assert not select.select([listening], [], [], 0)[0]  # nothing yet, and no end of file either
        raw = json.dumps({"cwd": str(project), "hook_event_name": "Stop"})
        done, modules = run(["hook", "stop", "--agent", "codex"], _sandboxed(env, channel), raw)
        assert (done.returncode, done.stdout) == (0, "") and "teleclaude.runtime.hooks.stop" not in modules
        assert os.read(listening, 64) == b"\n"
        assert not select.select([listening], [], [], 0)[0]  # the hook gone, the pipe is not at its end
    finally:
        os.close(listening)
    assert not sandbox.relayed(channel)  # its report_status still reaches the run
    assert "teleclaude_turn_end" in os.listdir(channel)
