"""What do teleclaude's git hooks add to a commit?

    PYTHONPATH=. python bench/bench_hooks.py [--rounds 25] [--files 2000] [--agent-only]

Builds a throwaway repository (small committed files, a roadmap, one prepared item), installs the hooks with
this interpreter, and measures, interleaved round by round so every subject and its floor see the same noise:

    floor     `git diff --cached --name-only` (a bare git process)
    pre       the installed pre-commit hook with a file outside todos/ staged    aim < 150 ms, ~1-2 x floor
    pre-lint  the pre-commit hook with todos/roadmap.md staged (starts Python, lints the staged blob)
    post      the post-commit hook after a commit in the main checkout touching todos/ (the planner's cost)
    commit    `git commit` outside todos/ with the hooks, and without them (core.hooksPath=/dev/null)

and every process an agent event starts, against their own floor, a bare start of the same Python (`python
-c pass`), side by side round by round; aim for each: <= 2 x that floor:

    --version         `teleclaude --version`
    tool-use (none)   `teleclaude hook tool-use` outside a worker (no TELECLAUDE_SESSION_ID): records nothing
    tool-use          the PreToolUse hook of a worker session recorded in the database as the runtime would
                      have it, once per tool call: one row written
    prompt            `teleclaude hook prompt --agent codex`: codex's UserPromptSubmit of that worker, once
                      per turn (the rollout file's path on the session: on record from the uncounted round on)
    statusline        `teleclaude hook statusline` with a subscriber's rate limits already on record (each
                      refresh of Claude Code's status line; only news is written)
    stop (none)       `teleclaude hook stop` of a session outside a worker, in a folder outside any repository
    stop (project)    the same in the project's main checkout, clean (one `git status`), also against
                      Python's start plus that `git status` (`git status` alone is measured too)
    stop (worker)     the worker's stop there: its turn's end recorded on its session, its waiters woken
                      (the run listening on its pipe, as `teleclaude run` does: a poke; where none listens,
                      a tmux client of its pane's server, here one that is not running)
    stop (sandboxed)  a sandboxed worker's stop there (bubblewrap's default): its turn's end sealed into its
                      session's channel folder (TELECLAUDE_CHANNEL), no database, no tmux
    stop (claude)     a claude worker's stop there, as claude's stop input always is: it names the session's
                      transcript (~400 KB, a turn more each round), whose new lines say what the turn used
    stop (claude, sb) the same worker sandboxed: what it used marked in its channel
    stop (tree)       `teleclaude hook stop` in a clean item worktree (trees/feat, a build worker's folder),
                      also against Python's start plus the `git status` it runs there (`git status (tree)`)

and each other CLI's hooks of a worker as that CLI sends them (agents/*.py `Hooks`), a turn more each round:

    stop (codex)      codex's Stop: its rollout file named (`transcript_path`: what it used, its rate limits)
    stop (codex, sb)  the same worker sandboxed (its usage and what it used marked in its channel)
    stop (gemini)     gemini's AfterAgent: its chat file named and the `prompt` the model was sent (the
                      role command's text)
    stop (opencode)   opencode's session.idle (its plugin): what it used read from opencode's own database
    stop (… sb)       each of these workers sandboxed: what its stop leaves marked in its channel
    prompt (claude)   claude's UserPromptSubmit (its transcript on record), likewise gemini's BeforeAgent and
    prompt (gemini)   opencode's chat.message (no file: its conversation id alone)
    prompt (opencode)
    stop-failure      claude's StopFailure outside a worker (a worker's ends its session: once, not measured)

Prints the median, the minimum and the ratio to the floor; deletes the repository; never asserts; exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def git(cwd: Path, *args: str, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def build(root: Path, files: int, env: dict[str, str]) -> None:
    git(root, "init", "-q", "-b", "main", env=env)
    for i in range(files):
        path = root / "src" / f"d{i % 50}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{i}\n")
    todos = root / "todos" / "feat"
    todos.mkdir(parents=True)
    (root / "todos" / "roadmap.md").write_text("# Roadmap\n- [ ] feat — x\n- [ ] other (after: feat) — y\n")
    (todos / "requirements.md").write_text("# Feat\n")
    (todos / "implementation-plan.md").write_text("# Plan\n## Group 1\n- [ ] a\n- [ ] b\n")
    git(root, "add", "-A", env=env)
    git(root, "commit", "-q", "-m", "init", env=env)
    from teleclaude.setup import githooks

    githooks.install(root)


def timed(
    command: list[str], cwd: Path, env: dict[str, str], stdin: str = "", cpu: list | None = None
) -> float:
    """The command's wall time in ms; its CPU time (user + system, its children's too) appended to `cpu`."""
    used = children_cpu()
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=False, capture_output=True, input=stdin.encode())
    wall = (time.perf_counter() - start) * 1000
    if cpu is not None:
        cpu.append((children_cpu() - used) * 1000)
    return wall


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def add_worker_session(
    root: Path, session_id: str = "bench001", agent: str = "codex", transcript: str = ""
) -> str:
    """A running worker in the database (TELECLAUDE_DB), as the runtime records one it started (with the
    transcript its prompt and tool hooks name)."""
    from datetime import UTC, datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session, SessionState

    now = datetime.now(UTC)
    session = Session(
        id=session_id,
        transcript=transcript,
        agent=agent,
        command="next-build",
        args="feat",
        project=str(root),
        subfolder=None,
        state=SessionState.RUNNING,
        created_at=now,
        updated_at=now,
        delivered_at=now,
    )
    SessionStore().add(session)
    return session.id


def working(db: Path, *session_ids: str) -> None:
    """The workers' sessions at work again, as after their next message (not measured)."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.executemany("UPDATE sessions SET state = 'running' WHERE id = ?", [(i,) for i in session_ids])
    conn.close()


def claude_turn(transcript: Path, turn: int) -> None:
    """One more turn of a claude transcript, as its CLI writes it: a tool's result (the user's line), then a
    reply message in three lines (a line per content block, each repeating the message's usage)."""
    result = {"role": "user", "content": [{"type": "tool_result", "content": "x" * 2000}]}
    lines = [json.dumps({"type": "user", "message": result})]
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 20_000 + turn}
    for block in range(3):
        message: dict[str, object] = {
            "id": f"msg_{turn:024d}",
            "model": "claude-opus-4-5",
            "role": "assistant",
        }
        message["content"] = [{"type": "text", "text": "y" * 500}]
        message["usage"] = {**usage, "output_tokens": 40 + block}
        lines.append(json.dumps({"type": "assistant", "message": message, "uuid": f"{turn}-{block}"}))
    with transcript.open("a", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")


def codex_turn(rollout: Path, turn: int, resets: int) -> None:
    """One more turn of a codex 0.169 rollout file (tests/realcli/NOTES.md): its context, the reply, and the
    token_count event with the session's totals and the rate limits the response's headers said."""
    stamp = "2026-11-29T04:23:42.005Z"
    limits = {
        "limit_id": "codex",
        "primary": {"used_percent": 40.0, "window_minutes": 300, "resets_at": resets},
        "secondary": {"used_percent": 22.0, "window_minutes": 10080, "resets_at": resets + 86400},
        "plan_type": None,
    }
    total = {
        "input_tokens": 20_000 + turn,
        "cached_input_tokens": 15_000,
        "output_tokens": 400 + turn,
        "reasoning_output_tokens": 100,
        "total_tokens": 20_400 + 2 * turn,
    }
    events = [
        {"type": "turn_context", "payload": {"cwd": "/x", "model": "gpt-5.1-codex"}},
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": f"t{turn}"}},
        {"type": "response_item", "payload": {"type": "message", "content": [{"text": "y" * 2000}]}},
        {
            "type": "event_msg",
            "payload": {"type": "token_count", "info": {"total_token_usage": total}, "rate_limits": limits},
        },
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": f"t{turn}"}},
    ]
    with rollout.open("a", encoding="utf-8") as file:
        file.write("".join(json.dumps({"timestamp": stamp, **e}) + "\n" for e in events))


def gemini_turn(chat: Path, turn: int) -> None:
    """One more turn of a gemini 0.61 chat file: the user's message, then the model's, written twice as it
    grows (the same id: gemini.py `session_tokens`)."""
    lines: list[dict[str, object]] = [{"id": f"u{turn}", "type": "user", "content": [{"text": "x" * 500}]}]
    for output in (10, 40 + turn):
        tokens = {
            "input": 9000 + turn,
            "output": output,
            "cached": 100,
            "thoughts": 30,
            "tool": 0,
            "total": 1,
        }
        lines.append(
            {
                "id": f"m{turn}",
                "type": "gemini",
                "model": "gemini-2.5-pro",
                "content": "y" * 1000,
                "tokens": tokens,
            }
        )
    with chat.open("a", encoding="utf-8") as file:
        file.write("".join(json.dumps(line) + "\n" for line in lines))


def opencode_turn(database: Path, session: str, turn: int) -> None:
    """One more answer in opencode's own database (the tables opencode.py `MESSAGES` reads)."""
    import sqlite3

    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS session (id TEXT PRIMARY KEY, parent_id TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS message (id TEXT, session_id TEXT, time_created, data TEXT)")
        conn.execute("INSERT OR IGNORE INTO session VALUES (?, NULL)", (session,))
        tokens = {"input": 900, "output": 40 + turn, "reasoning": 5, "cache": {"read": 8000, "write": 10}}
        data = {"role": "assistant", "tokens": tokens, "cost": 0.002, "modelID": "gpt-5.1"}
        conn.execute("INSERT INTO message VALUES (?, ?, ?, ?)", (f"m{turn}", session, turn, json.dumps(data)))
    conn.close()


def git_hooks(root: Path, rounds: int, env: dict[str, str]) -> None:
    hooks = root / ".git" / "hooks"
    results: dict[str, list[float]] = {}
    roadmap = root / "todos" / "roadmap.md"
    for i in range(rounds):
        (root / f"change-{i}.txt").write_text(f"{i}\n")
        git(root, "add", f"change-{i}.txt", env=env)
        results.setdefault("floor", []).append(timed(["git", "diff", "--cached", "--name-only"], root, env))
        results.setdefault("pre", []).append(timed([str(hooks / "pre-commit")], root, env))
        roadmap.write_text(roadmap.read_text() + f"- [ ] item-{i} — more\n")
        git(root, "add", "todos/roadmap.md", env=env)
        results.setdefault("pre-lint", []).append(timed([str(hooks / "pre-commit")], root, env))
        git(root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", f"r{i}", env=env)
        results.setdefault("post", []).append(timed([str(hooks / "post-commit")], root, env))
        (root / f"plain-{i}.txt").write_text("x\n")
        git(root, "add", f"plain-{i}.txt", env=env)
        results.setdefault("commit (hooks)", []).append(
            timed(["git", "commit", "-q", "-m", f"p{i}"], root, env)
        )
        (root / f"bare-{i}.txt").write_text("x\n")
        git(root, "add", f"bare-{i}.txt", env=env)
        results.setdefault("commit (none)", []).append(
            timed(["git", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", f"b{i}"], root, env)
        )
    print(f"the git hooks, {rounds} rounds; medians in ms, ratio to the floor, {load()}")
    report(results, "floor")
    extra = statistics.median(results["commit (hooks)"]) - statistics.median(results["commit (none)"])
    print(f"  hooks add {extra:.1f} ms to a commit outside todos/ (the post-commit hook stays silent there)")


def agent_hooks(root: Path, rounds: int, env: dict[str, str]) -> tuple[dict[str, list[float]], ...]:
    teleclaude = str(Path(sys.executable).with_name("teleclaude"))
    # a worker runs in a tmux pane: its stop hook wakes the runtime's wait through that server ($TMUX); here
    # a socket no server listens on, so the tmux client it starts fails at once
    worker = {**env, "TELECLAUDE_SESSION_ID": add_worker_session(root), "TMUX": f"{root.parent}/tmux,1,0"}
    channel = root.parent / "channel"
    channel.mkdir(mode=0o700, exist_ok=True)
    sandboxed = {**worker, "TELECLAUDE_CHANNEL": str(channel), "TELECLAUDE_TURN_END_TO_PANE": "1"}
    del sandboxed["TMUX"]  # it reaches no tmux server
    transcript = root.parent / "claude.jsonl"
    for turn in range(100):
        claude_turn(transcript, turn)
    claude = {
        **worker,
        "TELECLAUDE_SESSION_ID": add_worker_session(root, "bench002", "claude", str(transcript)),
    }
    (root.parent / "channel2").mkdir(mode=0o700, exist_ok=True)
    for channel_folder in ("channel3", "channel4", "channel5"):
        (root.parent / channel_folder).mkdir(mode=0o700, exist_ok=True)
    claude_sandboxed = {
        **sandboxed,
        "TELECLAUDE_SESSION_ID": "bench003",
        "TELECLAUDE_CHANNEL": str(root.parent / "channel2"),
    }
    rollout = root.parent / "rollout-codex.jsonl"
    chat = root.parent / "session-gemini.jsonl"
    data_home = root.parent / "data"
    (data_home / "opencode").mkdir(parents=True)
    window_end = int(time.time()) + 3600  # a window's reset stays as it is from one response to the next
    for turn in range(60):
        codex_turn(rollout, turn, window_end)
        gemini_turn(chat, turn)
        opencode_turn(data_home / "opencode" / "opencode.db", "ses_bench", turn)
    others = {
        "codex": {
            **worker,
            "TELECLAUDE_SESSION_ID": add_worker_session(root, "bench004", "codex", str(rollout)),
        },
        "gemini": {
            **worker,
            "TELECLAUDE_SESSION_ID": add_worker_session(root, "bench005", "gemini", str(chat)),
        },
        "codex, sb": {
            **sandboxed,
            "TELECLAUDE_SESSION_ID": "bench007",
            "TELECLAUDE_CHANNEL": str(root.parent / "channel3"),
        },
        "gemini, sb": {
            **sandboxed,
            "TELECLAUDE_SESSION_ID": "bench008",
            "TELECLAUDE_CHANNEL": str(root.parent / "channel4"),
        },
        "opencode, sb": {
            **sandboxed,
            "TELECLAUDE_SESSION_ID": "bench009",
            "TELECLAUDE_CHANNEL": str(root.parent / "channel5"),
            "XDG_DATA_HOME": str(data_home),
        },
        "opencode": {
            **worker,
            "TELECLAUDE_SESSION_ID": add_worker_session(root, "bench006", "opencode"),
            "XDG_DATA_HOME": str(data_home),
        },
    }
    outside = root.parent / "outside"
    outside.mkdir(exist_ok=True)
    tree = root / "trees" / "feat"
    git(root, "worktree", "add", "-q", "-b", "feat", str(tree), env=env)
    rollout = root / "rollout.jsonl"
    resets = int(time.time()) + 3600
    limits = {"five_hour": {"used_percentage": 42, "resets_at": resets}}
    status = json.dumps({"model": {"display_name": "Opus"}, "rate_limits": limits})
    results: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    # the run watching the local workers listens on their pipes (sandbox.listen): each stop wakes it there
    from teleclaude.adapters import sandbox

    ids = (worker["TELECLAUDE_SESSION_ID"], "bench002", "bench004", "bench005", "bench006")
    listening = [pipe for pipe in (sandbox.listen(root.parent / "teleclaude.db", i) for i in ids) if pipe]

    def measure(name: str, command: list[str], environ: dict[str, str], stdin: str = "", cwd: Path = root):
        results.setdefault(name, []).append(timed(command, cwd, environ, stdin, cpu.setdefault(name, [])))

    for i in range(-1, rounds):  # round -1 writes the bytecode: not counted
        prompt = json.dumps({"transcript_path": str(rollout), "prompt": f"$next-build feat {i}"})
        tool = json.dumps({"tool_name": "Bash", "tool_input": {"command": f"ls {i}"}})
        measure("python start", [sys.executable, "-c", "pass"], env)
        measure("--version", [teleclaude, "--version"], env)
        measure("tool-use (none)", [teleclaude, "hook", "tool-use"], env, tool)
        measure("tool-use", [teleclaude, "hook", "tool-use"], worker, tool)
        measure("prompt", [teleclaude, "hook", "prompt", "--agent", "codex"], worker, prompt)
        measure("statusline", [teleclaude, "hook", "statusline"], env, status)
        stop = json.dumps({"cwd": str(outside), "session_id": "s", "hook_event_name": "Stop"})
        measure("stop (none)", [teleclaude, "hook", "stop", "--agent", "claude"], env, stop, outside)
        stop = json.dumps({"cwd": str(root), "session_id": "s", "hook_event_name": "Stop"})
        measure("stop (project)", [teleclaude, "hook", "stop", "--agent", "claude"], env, stop)
        working(  # each stop ends a turn
            root.parent / "teleclaude.db",
            worker["TELECLAUDE_SESSION_ID"],
            "bench002",
            "bench004",
            "bench005",
            "bench006",
        )
        measure("stop (worker)", [teleclaude, "hook", "stop", "--agent", "codex"], worker, stop)
        measure("stop (sandboxed)", [teleclaude, "hook", "stop", "--agent", "codex"], sandboxed, stop)
        claude_turn(transcript, 100 + i)
        said = json.dumps({**json.loads(stop), "transcript_path": str(transcript)})
        measure("stop (claude)", [teleclaude, "hook", "stop", "--agent", "claude"], claude, said)
        measure(
            "stop (claude, sb)", [teleclaude, "hook", "stop", "--agent", "claude"], claude_sandboxed, said
        )
        codex_turn(rollout, 100 + i, window_end)
        codex_fields = {**json.loads(stop), "turn_id": f"t{i}", "transcript_path": str(rollout), "model": "g"}
        codex_stop = json.dumps({**codex_fields, "stop_hook_active": False, "last_assistant_message": "done"})
        measure("stop (codex)", [teleclaude, "hook", "stop", "--agent", "codex"], others["codex"], codex_stop)
        argv = [teleclaude, "hook", "stop", "--agent", "codex"]
        measure("stop (codex, sb)", argv, others["codex, sb"], codex_stop)
        gemini_turn(chat, 100 + i)
        gemini_stop = {**json.loads(stop), "hook_event_name": "AfterAgent", "transcript_path": str(chat)}
        gemini_stop = {
            **gemini_stop,
            "prompt": f"You are the builder.\n\nBuild feat ({i}).\n",
            "prompt_response": "done",
        }
        argv = [teleclaude, "hook", "stop", "--agent", "gemini"]
        measure(
            "stop (gemini)", argv, others["gemini"], json.dumps({**gemini_stop, "stop_hook_active": False})
        )
        measure("stop (gemini, sb)", argv, others["gemini, sb"], json.dumps(gemini_stop))
        opencode_turn(data_home / "opencode" / "opencode.db", "ses_bench", 100 + i)
        idle = {"session_id": "ses_bench", "cwd": str(root), "hook_event_name": "session.idle"}
        argv = [teleclaude, "hook", "stop", "--agent", "opencode"]
        measure("stop (opencode)", argv, others["opencode"], json.dumps({**idle, "stop_hook_active": False}))
        measure("stop (opencode, sb)", argv, others["opencode, sb"], json.dumps(idle))
        prompts = (
            ("claude", claude, {"hook_event_name": "UserPromptSubmit", "transcript_path": str(transcript)}),
            ("gemini", others["gemini"], {"hook_event_name": "BeforeAgent", "transcript_path": str(chat)}),
            ("opencode", others["opencode"], {"hook_event_name": "chat.message"}),
        )
        for agent, environ, fields in prompts:
            conversation = "ses_bench" if agent == "opencode" else f"conv-{agent}"  # its stop's too
            given = {**fields, "session_id": conversation, "cwd": str(root), "prompt": f"go {i}"}
            argv = [teleclaude, "hook", "prompt", "--agent", agent]
            measure(f"prompt ({agent})", argv, environ, json.dumps(given))
        failed = {
            "session_id": "s",
            "cwd": str(root),
            "hook_event_name": "StopFailure",
            "error": "rate_limit",
        }
        argv = [teleclaude, "hook", "stop-failure", "--agent", "claude"]
        measure("stop-failure", argv, env, json.dumps(failed))
        measure("git status", STOP_STATUS, {**env, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
        stop = json.dumps({"cwd": str(tree), "session_id": "s", "hook_event_name": "Stop"})
        measure("stop (tree)", [teleclaude, "hook", "stop", "--agent", "claude"], env, stop, tree)
        measure("git status (tree)", TREE_STATUS, {**env, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}, cwd=tree)
        for pipe in listening:  # what the run reads of its pokes
            with contextlib.suppress(BlockingIOError):
                os.read(pipe, 4096)
        if i < 0:
            results.clear()
            cpu.clear()
    for pipe in listening:
        os.close(pipe)
    return results, cpu


# the one `git status` the stop hook runs in a main checkout (adapters/git.py's status of todos/)
STOP_STATUS = ["git", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all"]
STOP_STATUS += ["--ignored=matching", "--", "todos"]
TREE_STATUS = [
    "git",
    "status",
    "--porcelain=v2",
    "--branch",
    "-z",
]  # and in a worktree (adapters/gitstatus.py)


def beside_git(results: dict[str, list[float]]) -> None:
    """The stop hook in the project and in a worktree against Python's start plus the `git status` it cannot
    skip there."""
    for subject, status in (("stop (project)", "git status"), ("stop (tree)", "git status (tree)")):
        floor = statistics.median(results["python start"]) + statistics.median(results[status])
        ratio = statistics.median(results[subject]) / floor
        print(f"  {subject} against python start + {status} ({floor:.1f}): {ratio:.1f} x")


def report(results: dict[str, list[float]], floor_name: str, aim: float | None = None) -> None:
    """Each subject's median, minimum and ratio to the floor's median; with `aim`, `OK` or `MISS` too."""
    floor = statistics.median(results[floor_name])
    for name, values in results.items():
        median = statistics.median(values)
        verdict = "" if aim is None or name == floor_name else ("  OK" if median <= aim * floor else "  MISS")
        ratio = f"{median / floor:5.1f} x {floor_name}"
        print(f"  {name:<16} {median:8.1f}  (min {min(values):6.1f})  {ratio}{verdict}")


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--agent-only", action="store_true", help="measure the agent hooks alone")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))

    temp = Path(tempfile.mkdtemp(prefix="teleclaude-bench-hooks-"))
    # measured as installed: its bytecode written (and the method table, methodcache.py); never in debug
    kept = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TELECLAUDE_DEBUG")}
    env = {
        **kept,
        "HOME": str(temp),
        "XDG_CONFIG_HOME": str(temp / "config"),
        "TELECLAUDE_DB": str(temp / "teleclaude.db"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@invalid",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    os.environ.update(
        {k: env[k] for k in ("HOME", "XDG_CONFIG_HOME", "TELECLAUDE_DB", "GIT_CONFIG_NOSYSTEM")}
    )
    root = temp / "project"
    root.mkdir()
    try:
        build(root, options.files, env)
        if not options.agent_only:
            git_hooks(root, options.rounds, env)
        print(f"the agent hooks, {options.rounds} rounds, {load()}")
        wall, cpu = agent_hooks(root, options.rounds, env)
        print(f"wall time; medians in ms, ratio to a bare start of this Python (aim <= 2 x), {load()}")
        report(wall, "python start", aim=2.0)
        beside_git(wall)
        print("CPU time (user + system) of the same processes, steadier on a loaded machine")
        report(cpu, "python start", aim=2.0)
        beside_git(cpu)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
