"""`teleclaude run --parallel N`, and two orchestrators on one project: real tmux, the stand-in CLI."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from teleclaude import mcp
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.demo.scenario import commit_all, git
from teleclaude.demo.workers import PLAN
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Marker
from teleclaude.planner.core.roadmap import parse_roadmap
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core import loop
from teleclaude.runtime.core.sessions import EventKind, Session, Started, StartRequest
from teleclaude.runtime.orchestrator import Outcome

from .conftest import back_at_countdown

FOUR = ("greeting", "farewell", "shouting", "whisper")  # farewell waits for greeting
STEPS = ("next-build", "next-review", "next-finalize")


def add_item(project: Path, slug: str, after: str = "") -> None:
    roadmap = project / "todos" / "roadmap.md"
    deps = f" (after: {after})" if after else ""
    roadmap.write_text(roadmap.read_text() + f"- [ ] {slug}{deps} — {slug} variants.\n")
    folder = project / "todos" / slug
    folder.mkdir()
    (folder / "requirements.md").write_text(f"# Requirements: {slug}\n\nDeliver {slug}.\n")
    (folder / "implementation-plan.md").write_text(PLAN.format(slug=slug, module=slug))
    commit_all(project, f"Add {slug}")


def run(project: Path, parallel: int, progress: Callable[[orchestrator.StatusLine], None] | None = None):
    lines: list[str] = []
    report = orchestrator.run(
        project,
        None,
        False,
        60,
        open_runtime(project),
        lines.append,
        progress or (lambda p: None),
        parallel=parallel,
    )
    return report, lines


def step(session: Session) -> tuple[str, str]:
    return session.command, session.slug


def overlap(one: Session, other: Session) -> bool:
    """Both were alive at once (a final session's last update is when it ended)."""
    return one.created_at < other.updated_at and other.created_at < one.updated_at


def overlapping_twins(sessions: list[Session]) -> list[tuple[str, str]]:
    """Steps that had two sessions alive at once."""
    twins = []
    for one in sessions:
        for other in sessions:
            if one.id < other.id and step(one) == step(other) and overlap(one, other):
                twins.append(step(one))
    return twins


def markers(project: Path) -> dict[str, Marker]:
    return {i.slug: i.marker for i in parse_roadmap((project / "todos/roadmap.md").read_text()).items}


def assert_delivered(project: Path, slugs) -> None:
    assert {slug: markers(project)[slug] for slug in slugs} == dict.fromkeys(slugs, Marker.DONE)
    names = sorted(p.name for p in (project / "done").iterdir())
    assert sorted(re.sub(r"^\d{3}-", "", name) for name in names) == sorted(slugs)
    numbers = [name[:3] for name in names]
    assert len(set(numbers)) == len(numbers)  # no archive number twice
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_parallel_two_delivers_four_items_with_a_dependency_and_a_conflicting_finalize(
    project, fake_agents, tmux_socket, monkeypatch
):
    add_item(project, "whisper")
    # the first two items in flight both write NOTES.md: the second of them to be finalized conflicts
    monkeypatch.setenv("FAKE_AGENT_SHARED", "greeting,shouting")
    monkeypatch.setenv("FAKE_AGENT", "report")  # each worker reports its last line (`status_text`)
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1.5")  # the two finalizers work side by side first
    report, lines = run(project, parallel=2)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert_delivered(project, FOUR)
    notes = (project / "NOTES.md").read_text()
    assert "greeting was built" in notes and "shouting was built" in notes and "<<<<" not in notes

    sessions = SessionStore().sessions()
    assert overlapping_twins(sessions) == []
    fixed = [s.slug for s in sessions if step(s)[0] == "next-fix-merge"]
    assert fixed in (["greeting"], ["shouting"])
    finalizes = sorted((s for s in sessions if step(s)[0] == "next-finalize"), key=lambda s: s.created_at)
    first, second = finalizes[:2]
    assert {first.slug, second.slug} == {"greeting", "shouting"} and overlap(first, second)
    # the one that merged second met the conflict in its `teleclaude finalize`, then the fixer, then again
    blocked = [s for s in finalizes if s.slug == fixed[0]]
    assert len(blocked) == 2 and "MERGE_CONFLICT" in blocked[0].status_text, blocked[0].status_text
    assert "merged" in blocked[1].status_text
    # farewell waits for greeting: it is built on main with greeting delivered (its worker may be claimed
    # and started ahead once greeting's finalize has merged it, while that finalizer ends its turn)
    delivered = git(project, "log", "-1", "--format=%H", "--grep=^Finalize greeting$", "main").strip()
    built = git(project, "log", "-1", "--format=%H", "--grep=^Build farewell$", "main").strip()
    assert delivered and built
    git(project, "merge-base", "--is-ancestor", delivered, built)
    builds = sorted((s for s in sessions if step(s)[0] == "next-build"), key=lambda s: s.created_at)
    assert builds[1].created_at < builds[0].updated_at  # two items really were in flight at once


def test_two_parallel_runs_started_together_dispatch_no_step_twice(
    project, fake_agents, tmux_socket, teleclaude_cli
):
    both = [teleclaude_cli(project, "run", "--parallel", "2") for _ in range(2)]
    results = [process.communicate(timeout=300) for process in both]
    for process, (out, err) in zip(both, results, strict=True):
        assert process.returncode == 0, out + err
        assert "Traceback" not in err
    sessions = SessionStore().sessions()
    assert overlapping_twins(sessions) == []
    counts = collections.Counter(step(s) for s in sessions)
    assert [pair for pair, n in counts.items() if n > 1] == []
    assert len(sessions) == 9  # build, review, finalize for each of the three
    assert_delivered(project, ("greeting", "farewell", "shouting"))


def test_lanes_whose_agents_are_all_out_rest_until_the_first_is_back_and_then_deliver(
    project, fake_agents, tmux_socket
):
    for agent in ("claude", "codex"):
        app.mark_agent_unavailable(agent, "2h", "quota_exhausted", cwd=project)
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)  # the first back
    progress: list[orchestrator.StatusLine] = []
    report, lines = run(project, parallel=2, progress=back_at_countdown(project, "gemini", progress))
    assert report.outcome is Outcome.COMPLETE, report.text
    assert any(isinstance(line, orchestrator.Countdown) for line in progress)
    assert not any("parked" in line for line in lines), lines
    assert_delivered(project, ("greeting", "farewell", "shouting"))


def test_two_serial_runs_started_together_dispatch_no_step_twice(
    project, fake_agents, tmux_socket, teleclaude_cli
):
    both = [teleclaude_cli(project, "run") for _ in range(2)]
    results = [process.communicate(timeout=300) for process in both]
    for process, (out, err) in zip(both, results, strict=True):
        assert process.returncode == 0, out + err
    sessions = SessionStore().sessions()
    assert overlapping_twins(sessions) == []
    assert len(sessions) == 9
    assert_delivered(project, ("greeting", "farewell", "shouting"))


def test_a_second_start_of_a_live_step_is_refused_for_runs_and_the_mcp_tool_alike(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT", "hang")
    monkeypatch.chdir(project)  # an MCP client starts the server in the project
    monkeypatch.setattr(mcp, "_RUNTIME", None)
    build = app.next_work("greeting", cwd=project)
    assert isinstance(build, Dispatch)
    runtime = open_runtime(project)
    first = runtime.start(build)
    second = runtime.start(build)
    assert isinstance(first, Started), first
    assert isinstance(second, Error) and second.code.value == "ALREADY_RUNNING"
    assert first.session.id in second.message
    answer = mcp._session_answer(
        "run_agent_command",
        StartRequest("local", build.command, build.slug, build.project, build.agent, "med", build.subfolder),
    )
    assert answer.splitlines()[0] == "ERROR: ALREADY_RUNNING"
    other = app.next_work("shouting", cwd=project)
    assert isinstance(other, Dispatch)
    started = runtime.start(other)  # another step
    assert isinstance(started, Started) and started.session.slug == "shouting"


def test_finalizes_of_two_items_start_side_by_side_but_one_item_gets_one_finalizer(
    project, fake_agents, tmux_socket, monkeypatch
):
    """Only the merge is serialized (`teleclaude finalize`, under the project lock): the runtime starts a
    finalizer while another item's is live, and refuses a second one for the same item."""
    monkeypatch.setenv("FAKE_AGENT", "hang")
    runtime = open_runtime(project)
    finalize = Dispatch(*_finalize_of(project, "greeting"))
    started = runtime.start(finalize)
    assert isinstance(started, Started) and started.session.command == "next-finalize"
    beside = runtime.start(Dispatch(*_finalize_of(project, "shouting")))
    assert isinstance(beside, Started) and beside.session.slug == "shouting", beside
    again = runtime.start(finalize)
    assert isinstance(again, Error) and again.code.value == "ALREADY_RUNNING"
    assert started.session.id in again.message


def _finalize_of(project: Path, slug: str):
    from teleclaude.planner.core.model import Step

    return (
        Step.FINALIZE,
        slug,
        str(project),
        "claude",
        "med",
        None,
        f"Archive todos/{slug} to done/001-{slug}/",
    )


def test_digests_reach_the_log_and_the_status_line_of_a_run(project, fake_agents, tmux_socket, monkeypatch):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "digest_period = 0.3\nsoft_remind = 1.5\n")
    commit_all(project, "Digest quickly")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "stall")  # thinks until the reminder wakes it
    progress: list[orchestrator.StatusLine] = []
    lines: list[str] = []
    report = orchestrator.run(
        project, "shouting", False, 20, open_runtime(project), lines.append, progress.append
    )
    assert report.outcome is Outcome.COMPLETE, report.text
    assert any(re.match(r"\s+\w+ digest: running", line) for line in lines), lines
    assert any("digest: next-build shouting: running" in p.line() for p in progress)
    for line in progress:  # a digest leaves the status line once its worker is through
        if isinstance(line, orchestrator.Progress) and line.digest:
            in_flight = {(s.command, s.slug) for s in (line.session, *line.others)}
            assert tuple(line.digest.split(":")[0].split()) in in_flight, line.line()


def test_an_item_that_fails_is_parked_and_the_other_lanes_deliver_theirs(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_CRASH", "shouting")  # every worker of shouting crashes
    progress: list[orchestrator.StatusLine] = []
    report, lines = run(project, parallel=2, progress=progress.append)
    assert report.outcome is Outcome.PARKED and report.exit_code == 1, report.text
    # the other lanes carried on: greeting, and farewell (after greeting) once it was delivered
    assert markers(project) == {"greeting": Marker.DONE, "farewell": Marker.DONE, "shouting": Marker.ACTIVE}
    assert sorted(re.sub(r"^\d{3}-", "", p.name) for p in (project / "done").iterdir()) == [
        "farewell",
        "greeting",
    ]
    first, *rest = report.text.splitlines()
    assert first.startswith("PARKED:") and "shouting" in first
    assert any("shouting" in line and "ERROR: WORKER_FAILED" in line for line in rest)  # its error
    assert any(line.strip().startswith("parked shouting: ERROR: WORKER_FAILED") for line in lines)
    shown = [p.parked for p in progress if isinstance(p, orchestrator.Progress)]  # refreshed before each wait
    assert any(parked and parked[0].startswith("shouting (ERROR: WORKER_FAILED") for parked in shown), shown
    sessions = SessionStore().sessions()
    shouting = [s for s in sessions if s.slug == "shouting"]
    assert [s.state.value for s in shouting if s.delivered_at is not None] == ["errored", "errored"]
    # a worker started ahead of its next step was ended with the item, never typed into
    assert all(s.state.value == "cancelled" for s in shouting if s.delivered_at is None)


def test_a_parallel_run_whose_waits_keep_failing_stops_with_the_error(
    project, fake_agents, tmux_socket, monkeypatch
):
    """As the serial run does: a few failed waits in a row (tmux or the database gone) end the run."""
    runtime = open_runtime(project)
    calls = []

    def failing_wait(session_ids, timeout=30.0, fresh=True, wake=None):
        calls.append(session_ids)
        if len(calls) > 20:  # the run never gives up: stop the test instead of hanging
            raise KeyboardInterrupt
        raise OSError("the sessions database is gone")

    monkeypatch.setattr(runtime, "wait_for_sessions", failing_wait)
    lines: list[str] = []
    report = orchestrator.run(project, None, False, 60, runtime, lines.append, lambda p: None, parallel=2)
    assert report.outcome is Outcome.ERROR, report.text + "\n" + "\n".join(lines)
    assert len(calls) == orchestrator.WAIT_ATTEMPTS


def test_parallel_lanes_start_their_workers_at_once(project, fake_agents, tmux_socket, monkeypatch):
    monkeypatch.setenv("FAKE_AGENT", "slowstart")  # each CLI takes a second to show its prompt
    report, lines = run(project, parallel=2)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert_delivered(project, ("greeting", "farewell", "shouting"))
    builds = sorted((s for s in SessionStore().sessions() if step(s)[0] == "next-build"), key=lambda s: s.id)
    first, second = sorted(builds, key=lambda s: s.created_at)[:2]
    assert first.delivered_at is not None
    # the second lane's worker was opened while the first was still waiting for its prompt
    assert second.created_at < first.delivered_at


def test_the_finalizers_of_two_independent_items_work_at_once_and_both_deliver(
    project, fake_agents, tmux_socket, monkeypatch
):
    """Two items in lockstep: their finalizers are live side by side (no queue of whole sessions); each
    merges under the project lock, with its own archive number, and no commit of either branch is lost."""
    monkeypatch.setenv("FAKE_AGENT", "hook")
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1.5")
    report, lines = run(project, parallel=2)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert_delivered(project, ("greeting", "farewell", "shouting"))
    finalizes = {s.slug: s for s in SessionStore().sessions() if step(s)[0] == "next-finalize"}
    assert overlap(finalizes["greeting"], finalizes["shouting"]), "\n".join(lines)
    subjects = git(project, "log", "--format=%s", "main").splitlines()
    for slug in ("greeting", "shouting", "farewell"):
        for subject in (f"Build {slug}", f"Review {slug}", f"Merge {slug}", f"Finalize {slug}"):
            assert subjects.count(subject) == 1, (subject, subjects)
        assert (project / "src" / f"{slug}.py").is_file()


def test_with_parallel_each_lane_starts_its_items_next_worker_while_the_step_before_works(
    project, fake_agents, tmux_socket, monkeypatch
):
    """farewell waits for greeting, so it starts once the first two items taught the run what follows a
    build and a review: its reviewer and its finalizer are at their prompts before the step before ends.
    A free lane asks the planner which items are ready (git, a planner call) once a lane has left since its
    last ask (test_run_loop's rule), not at every look while it waits."""
    monkeypatch.setenv("FAKE_AGENT", "hook")
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1")
    monkeypatch.setattr(loop, "READY_AGAIN", 3600.0)  # so only a lane leaving asks again
    asks: list[int] = []
    ready_items = app.ready_items

    def counted(*args, **kwargs):
        asks.append(1)
        return ready_items(*args, **kwargs)

    monkeypatch.setattr(app, "ready_items", counted)
    report, lines = run(project, parallel=2)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert_delivered(project, ("greeting", "farewell", "shouting"))
    store = SessionStore()
    sessions = store.sessions()
    assert overlapping_twins(sessions) == []
    delivered = {step(s): s for s in sessions if s.delivered_at is not None}
    build, review, finalize = (delivered[(command, "farewell")] for command in STEPS)
    assert review.created_at < turn_end(store, build) < review.delivered_at  # type: ignore[operator]
    assert finalize.created_at < turn_end(store, review) < finalize.delivered_at  # type: ignore[operator]
    assert len(sessions) == report.steps == 9  # none started ahead for nothing
    # the first ask, one after each of the three items left its lane, and the run's last look at an empty run
    assert len(asks) <= 6, len(asks)


def turn_end(store: SessionStore, session: Session) -> datetime:
    (end,) = [e.at for e in store.events([session.id]) if e.kind is EventKind.TURN_ENDED][:1]
    return end
