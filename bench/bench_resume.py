"""What resuming a killed worker's conversation saves: the tokens a build sends its model, resume vs fresh.

A build of 6 tool calls by the real claude (the pinned CLI, scripts/agent-clis) against the scripted model
server: the model calls the shell once for each call not yet in the conversation it is sent (a build that
goes on from what it sees), then says DONE. The CLI is killed (SIGKILL) after the 4th call's result is in
its record; the next worker of the step is then started

- fresh: the role command typed into a new conversation (what teleclaude did before resuming), or
- resumed: `Runtime.start`, which resumes the killed worker's conversation (runtime/continuing.py).

Printed side by side until the build ends: the model requests, the tool calls run, and the input tokens sent
(the server's estimate, as its `count_tokens` answers: a body's JSON characters / 4). Everything runs in a
throwaway HOME, database and tmux server; nothing is asserted.

    PYTHONPATH=. .venv/bin/python bench/bench_resume.py
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from teleclaude.demo.model_server import ModelServer, Step, Text, shell
from teleclaude.demo.real import find_cli, prepare_environment
from teleclaude.demo.scenario import environment, throwaway
from teleclaude.demo.workers import commit_all, make_repository
from teleclaude.errors import Error
from teleclaude.planner.core.model import Dispatch
from teleclaude.planner.core.model import Step as PlanStep
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.sessions import EventKind, Started, StartRequest
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

CALLS = 6
KILLED_AFTER = 4
WAIT = 180.0  # seconds for any one thing the CLI does: a deadline, never a pause


@dataclass(frozen=True)
class Result:
    requests: int
    calls: int
    tokens: int
    tokens_after: int  # from the restart on


class Build:
    """The scripted model: one shell call per call missing from the conversation, then DONE; the request
    that carries the KILLED_AFTER-th result is held (the CLI is killed meanwhile) until `release`."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.killing = threading.Event()
        self.calls = 0

    def __call__(self, body: dict) -> Step:
        done = _tool_results(body)
        if done == KILLED_AFTER and not self.killing.is_set():
            self.killing.set()
            self.release.wait(WAIT)
            return Text("never read: the CLI was killed")
        if done >= CALLS:
            return Text("DONE: next-build greeting - 6 calls")
        self.calls += 1
        call = done + 1
        command = (
            f"printf 'call {call}\\n' >> todos/greeting/notes.md && git add -A && git commit -qm 'C{call}'"
        )
        return shell(command, f"Build call {call}")


def _tool_results(body: dict) -> int:
    return sum(
        1
        for message in body.get("messages", [])
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def measure(claude: Path, resume: bool) -> Result:
    with throwaway("teleclaude-bench-resume-", keep=False) as (base, socket):
        build = Build()
        with (
            ModelServer(then=build) as server,
            environment(prepare_environment(base, {"claude": claude}, server.url)),
        ):
            project = _project(base, socket)
            runtime = open_runtime(project)
            dispatch = Dispatch(PlanStep.BUILD, "greeting", str(project), "claude", "med")
            first = runtime.start(dispatch)
            if not isinstance(first, Started):
                raise SystemExit(f"claude did not start: {first}")
            if not build.killing.wait(WAIT):
                raise SystemExit("the build never reached its 4th call")
            _recorded(runtime, first.session.id)
            pane = first.session.pane_pid
            for child in Path(f"/proc/{pane}/task/{pane}/children").read_text().split():
                os.kill(int(child), signal.SIGKILL)
            _until(runtime, first.session.id, EventKind.EXITED)
            build.release.set()
            restart = len(server.requests)
            if resume:
                again = runtime.start(dispatch)
            else:
                again = runtime.run_agent_command(
                    StartRequest("local", "next-build", "greeting", str(project), "claude", "med")
                )
            if not isinstance(again, Started):
                raise SystemExit(f"claude did not start again: {again}")
            _until(runtime, again.session.id, EventKind.TURN_ENDED)
            runtime.end_session(again.session.id)
            return Result(len(server.turns()), build.calls, server.tokens_sent(), server.tokens_sent(restart))


def _project(base: Path, socket: str) -> Path:
    project = make_repository(base / "project")
    (project / "teleclaude.toml").write_text(
        f'agents = ["claude"]\n\n[runtime]\nsocket = "{socket}"\nidle_threshold = 300\npoll_interval = 0.2\n'
        "startup_timeout = 120\n"
    )
    commit_all(project, "Runtime settings for the bench")
    for done in (install(["claude"], Scope.USER), init(project)):
        if isinstance(done, Error):
            raise SystemExit(done.message)
    return project


def _recorded(runtime: Runtime, session_id: str) -> None:
    """Until claude's record of the conversation holds the 4th result (it writes a moment after sending)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        session = runtime.store.get(session_id)
        record = Path(session.transcript) if session and session.transcript else None
        if (
            record
            and record.is_file()
            and record.read_text(errors="replace").count('"tool_result"') >= KILLED_AFTER
        ):
            return
        time.sleep(0.1)
    raise SystemExit("claude never recorded the 4th call")


def _until(runtime: Runtime, session_id: str, kind: EventKind) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        waited = runtime.wait_for_sessions([session_id], timeout=10)
        if isinstance(waited, Error):
            continue
        if any(event.kind is kind for event in waited.events):
            return
    raise SystemExit(f"no {kind.value} of {session_id}")


def main() -> int:
    claude = find_cli("claude")
    if claude is None:
        print("no claude: run scripts/agent-clis first")
        return 1
    fresh, resumed = measure(claude, resume=False), measure(claude, resume=True)
    print(
        f"claude {claude.parent.parent.name}: a build of {CALLS} tool calls, killed after call {KILLED_AFTER}"
    )
    print(f"{'':34}{'fresh':>10}{'resumed':>10}")
    rows = (
        ("model requests (whole build)", fresh.requests, resumed.requests),
        ("tool calls run (whole build)", fresh.calls, resumed.calls),
        ("input tokens sent (whole build)", fresh.tokens, resumed.tokens),
        ("input tokens sent after the kill", fresh.tokens_after, resumed.tokens_after),
    )
    for label, one, other in rows:
        print(f"{label:34}{one:>10}{other:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
