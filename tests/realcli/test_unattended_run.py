"""`teleclaude run` unattended with the real claude, codex and gemini as workers, each limited on purpose.

The HOME is set up only as the README says (each CLI's login, `teleclaude install`, `teleclaude init`:
`teleclaude.demo.real.prepare_environment`), and the scripted model has each CLI do its step through its own
shell tool (the `--real` demo's `ScriptedWorkers`). The server answers some first turns with each
provider's limit instead; nobody touches the run.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import Counter

import pytest

from teleclaude.config.matrix import DEFAULT_MATRIX
from teleclaude.demo.model_server import Fail, ModelServer, Step, body_text, provider_of, tool_result_sent
from teleclaude.demo.real import RealDemo, ScriptedWorkers, prepare_environment
from teleclaude.demo.scenario import commit_all, make_repository
from teleclaude.planner.core.roadmap import parse_roadmap
from teleclaude.planner.gate import records
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.orchestrator import Outcome
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

from ..scripted import CHECK_PY, assert_main_green
from .conftest import trusted

AGENTS = ("claude", "codex", "gemini")
ROLES = {  # the first words of each role command's file (commands/next-*.md)
    "build": "You are the **builder**",
    "review": "You are the **reviewer**",
    "finalize": "You are the **finalizer**",
}
# each step's agents in order: every CLI does a step before its limit (item 1), then runs out (item 2)
MATRIX = {
    "build": ("gemini", "claude", "codex"),
    "review": ("claude", "codex", "gemini"),
    "finalize": ("codex", "claude", "gemini"),
}
SETTINGS = """agents = {agents}

[matrix]
{matrix}

[runtime]
socket = "{socket}"
idle_threshold = 300
poll_interval = 0.2
startup_timeout = 120
settle = 0.3

[runtime.agents.claude]
env = {{CLAUDE_CODE_MAX_RETRIES = "0"}}
"""


class LimitedOnce:
    """The demo's scripted workers, except that a provider's first turn of a role, the `nth` time, gets its
    limit: gemini's daily quota on its second build, claude's rate limit (429) on its second review, then
    codex's usage limit on its first review, with a reset printed for the next minute: by then the other two
    are out for an hour, so the run waits for codex's reset and resumes without a human."""

    PLAN = {"gemini": ("build", 2), "anthropic": ("review", 2), "openai": ("review", 1)}

    def __init__(self) -> None:
        self.work = ScriptedWorkers(RealDemo("claude"))  # no limit of its own: every turn does the step
        self.firsts: Counter[tuple[str, str]] = Counter()
        self.limited: dict[str, Fail] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Step:
        provider, text = provider_of(body), body_text(body)
        with self.lock:
            if provider in self.limited and provider != "openai":
                return self.limited[provider]  # a spent quota stays spent (gemini's "Keep trying")
            role = next((name for name, words in ROLES.items() if words in text), "")
            if role and not tool_result_sent(body):
                self.firsts[provider, role] += 1
                if self.PLAN.get(provider) == (role, self.firsts[provider, role]):
                    self.limited[provider] = self._limit(provider)
                    return self.limited[provider]
        return self.work(body)

    @staticmethod
    def _limit(provider: str) -> Fail:
        if provider == "gemini":
            return Fail("quota")
        if provider == "anthropic":
            return Fail("rate_limit")
        # codex prints the reset to the minute ("try again at 2:31 AM"), which the runtime takes as that
        # minute's end: the reset is a minute's last second, at least 8 s ahead, so that what the runtime
        # reads is still to come and the run waits a second past the real reset, not a minute
        now = time.time()
        boundary = (int(now) // 60 + 1) * 60 + (60 if 60 - now % 60 < 9 else 0)
        return Fail("session_limit", resets_in=boundary - 1 - int(now))


def three_clis_project(base, agent_clis, server, tmux_socket, monkeypatch, matrix=MATRIX, agents=AGENTS):
    """The demo's roadmap of three items, the real CLIs (`agents`) set up in a fresh HOME against `server`."""
    base.mkdir()
    clis = {name: agent_clis[name] / name for name in agents}
    for name, value in prepare_environment(base, clis, server.url).items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    project = make_repository(base / "project")
    rows = "\n".join(
        f"{task} = {json.dumps([f'{a}:{DEFAULT_MATRIX[task][0].thinking_mode}' for a in agents])}"
        for task, agents in matrix.items()
    )
    settings = SETTINGS.format(agents=json.dumps(list(agents)), matrix=rows, socket=tmux_socket)
    (project / "teleclaude.toml").write_text(settings)
    trusted(project)
    commit_all(project, "Three real CLIs, each first on one step")
    for done in (install(list(agents), Scope.USER), init(project)):
        assert not hasattr(done, "code"), done
    return project


def roadmap_of(project, *slugs: str) -> None:
    """The demo's roadmap with only the items `slugs` (none of which waits for one left out), committed."""
    roadmap = project / "todos" / "roadmap.md"
    gone = [item.slug for item in parse_roadmap(roadmap.read_text()).items if item.slug not in slugs]
    if not gone:  # the whole roadmap: nothing to commit
        return
    lines = roadmap.read_text().splitlines(keepends=True)
    roadmap.write_text(
        "".join(line for line in lines if not line.startswith(tuple(f"- [ ] {g} " for g in gone)))
    )
    for slug in gone:
        shutil.rmtree(project / "todos" / slug)
    commit_all(project, f"Only {', '.join(slugs)} on the roadmap")


@pytest.fixture
def three_clis(agent_clis, tmp_path, tmux_socket, monkeypatch):
    """(project, model server): the three real CLIs against a server scripted by LimitedOnce, on a roadmap of
    greeting and farewell (the demo's third item would take its three steps with codex alone, after the wait
    for its reset, as farewell's last two do)."""
    with ModelServer(then=LimitedOnce()) as server:
        project = three_clis_project(tmp_path / "base", agent_clis, server, tmux_socket, monkeypatch)
        roadmap_of(project, "greeting", "farewell")
        yield project, server


def test_three_real_clis_deliver_a_roadmap_through_their_limits_waiting_for_the_last_reset(three_clis):
    project, server = three_clis
    lines: list[str] = []
    shown: list[orchestrator.StatusLine] = []
    report = orchestrator.run(project, None, False, 40, open_runtime(project), lines.append, shown.append)
    log = "\n".join(lines)
    assert report.outcome is Outcome.COMPLETE, log + "\n" + report.text
    done = sorted(p.name for p in (project / "done").iterdir())
    assert [name for name in done if name.endswith(("-greeting", "-farewell", "-shouting"))] == done, done
    assert len(done) == 2, done
    steps = [(h.session.command, h.session.agent, h.kind.value if h.kind else "") for h in report.history]
    limited = [agent for _, agent, kind in steps if kind == "rate_limited"]
    assert sorted(limited) == sorted(AGENTS), steps  # each CLI's limit read off its own screen or hook
    done_by = {(command, agent) for command, agent, kind in steps if kind == "turn_ended"}
    assert {agent for _, agent in done_by} == set(AGENTS), steps  # each did a step before its limit
    assert ("next-finalize", "codex") in done_by, steps  # codex's shell found `teleclaude` for the finalize
    countdowns = [line for line in shown if isinstance(line, orchestrator.Countdown)]
    assert countdowns and {c.agent for c in countdowns} == {"codex"}, log
    assert "waiting for codex" in log, log
    refused = [r.provider for r in server.requests if r.turn and r.answer.startswith("fail")]
    assert refused.count("openai") == 1, refused  # codex was asked again only once its reset had come


@pytest.mark.parametrize("builder", AGENTS)
def test_under_parallel_two_workers_of_a_real_cli_start_at_once_and_each_step_is_dispatched_once(
    builder, agent_clis, tmp_path, tmux_socket, monkeypatch
):
    """`run --parallel 2` of a roadmap of two independent items, greeting and shouting: they go side by side,
    so the builder's CLI starts two workers at once (each lane's start in its own thread, with its driver's
    own prompt wait), and the other two CLIs review and finalize. Every step is dispatched once, by the agent
    its row names, and the roadmap is delivered. (The demo's third item, farewell, would only wait for
    greeting and then take the same three steps alone: three more real-CLI workers that show nothing new.)"""
    rest = [agent for agent in AGENTS if agent != builder]
    matrix = {"build": (builder, *rest), "review": (*rest, builder), "finalize": (rest[1], rest[0], builder)}
    with ModelServer(then=ScriptedWorkers(RealDemo("claude"))) as server:
        project = three_clis_project(tmp_path / "base", agent_clis, server, tmux_socket, monkeypatch, matrix)
        roadmap_of(project, "greeting", "shouting")
        runtime = open_runtime(project)
        lines: list[str] = []
        report = orchestrator.run(project, None, False, 40, runtime, lines.append, lambda _: None, parallel=2)
    log = "\n".join(lines)
    assert report.outcome is Outcome.COMPLETE, log + "\n" + report.text
    assert len(list((project / "done").iterdir())) == 2, log
    given = [s for s in runtime.store.sessions() if s.delivered_at is not None]
    steps = Counter((s.command, s.slug, s.agent) for s in given)
    slugs = ("greeting", "shouting")
    expected = {(f"next-{step}", slug, agents[0]) for step, agents in matrix.items() for slug in slugs}
    assert set(steps) == expected and set(steps.values()) == {1}, steps
    builds = {s.slug: (s.created_at, s.delivered_at) for s in given if s.command == "next-build"}
    (one_opened, one_typed), (other_opened, other_typed) = builds["greeting"], builds["shouting"]
    assert one_typed and other_typed  # and both starts were under way at once:
    assert one_opened < other_typed and other_opened < one_typed, log


def test_a_real_claude_builder_breaks_the_projects_test_and_main_never_receives_it(
    agent_clis, tmp_path, tmux_socket, monkeypatch
):
    """Issue 34: claude builds (its step breaks a test of the project), is sent back by the gate on its turn
    and does not fix it, claude reviews and approves anyway; the finalize's gate is red, so the item goes
    back through fix and review, and only then lands. No commit of main ever fails the project's test."""
    matrix = {task: ("claude", "codex", "gemini") for task in ("build", "review", "finalize")}
    monkeypatch.setenv("FAKE_AGENT_BREAK", "greeting")
    with ModelServer(then=ScriptedWorkers(RealDemo("claude"))) as server:
        project = three_clis_project(tmp_path / "base", agent_clis, server, tmux_socket, monkeypatch, matrix)
        (project / "check.py").write_text(CHECK_PY)
        settings = project / "teleclaude.toml"
        text = settings.read_text().replace("[runtime]\n", "[runtime]\nmax_nudges = 1\n")
        settings.write_text(text + '[checks]\ngate = ["python3 check.py"]\ntimeout = 120\n')
        trusted(project)
        commit_all(project, "The project's gate")
        lines: list[str] = []
        report = orchestrator.run(
            project, "greeting", False, 40, open_runtime(project), lines.append, lambda _: None
        )
    log = "\n".join(lines)
    assert report.outcome is Outcome.COMPLETE, log + "\n" + report.text
    steps = [(h.session.command, h.session.agent) for h in report.history]
    assert ("next-fix-review", "claude") in steps and steps.count(("next-review", "claude")) == 2, steps
    runs = [(e.kind, e.verdict.value) for e in records(project / ".git")["greeting"]]
    assert ("finalize", "red") in runs and runs[-1] == ("finalize", "green"), runs
    assert assert_main_green(project) >= 2
