"""`teleclaude run` and `teleclaude demo` end to end: real tmux, fake agent CLIs, a real repository."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.store import AvailabilityStore
from teleclaude.adapters.tmux import Tmux
from teleclaude.agents import NAMES
from teleclaude.demo.scenario import commit_all, git
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Marker, UsageWindow
from teleclaude.planner.core.roadmap import parse_roadmap
from teleclaude.planner.core.timeparse import format_utc
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, Session, SessionState, Started, StartRequest
from teleclaude.runtime.orchestrator import Outcome

SLUGS = ("greeting", "farewell", "shouting")


def run(project: Path, slug: str | None = None, prepare: bool = False, max_steps: int = 40):
    lines: list[str] = []
    report = orchestrator.run(
        project, slug, prepare, max_steps, open_runtime(project), lines.append, lambda progress: None
    )
    return report, lines


def finish(process: subprocess.Popen, seconds: float = 180) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=seconds)
    return process.returncode, out, err


def report_line(out: str) -> str:
    """The first line of the report `run` prints after its log lines (which start with `[` or spaces)."""
    return next(line for line in out.splitlines() if re.match(r"[A-Z_]+(:| )", line))


def wait_until(find, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail("timed out waiting")


def running_session() -> Session | None:
    return next((s for s in SessionStore().sessions() if s.state is SessionState.RUNNING), None)


def stored(session_id: str) -> Session:
    """The session as the sessions database holds it now."""
    session = SessionStore().get(session_id)
    assert session is not None, session_id
    return session


def markers(project: Path) -> dict[str, Marker]:
    return {i.slug: i.marker for i in parse_roadmap((project / "todos/roadmap.md").read_text()).items}


def archives(project: Path) -> list[str]:
    return sorted(p.name for p in (project / "done").iterdir()) if (project / "done").is_dir() else []


def assert_delivered(project: Path, slugs=SLUGS) -> None:
    assert all(markers(project)[slug] is Marker.DONE for slug in slugs)
    names = archives(project)
    for slug in slugs:
        assert [name for name in names if re.fullmatch(rf"\d{{3}}-{slug}", name)] != []
        assert sum(name.endswith(f"-{slug}") for name in names) == 1
    log = git(project, "log", "--first-parent", "--format=%s", "main").splitlines()
    for slug in slugs:
        assert f"Merge {slug}" in log
        assert git(project, "log", "--format=%s", "main", "--", f"src/{slug}.py") != ""  # the work, merged
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def assert_no_workers(tmux_socket: str) -> None:
    assert Tmux(tmux_socket).session_names() == set()


# --- the whole roadmap --------------------------------------------------------------------------------------


def test_the_roadmap_is_driven_to_done_through_a_rejection_a_forgotten_commit_and_a_rate_limit(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_REJECT", "greeting")
    monkeypatch.setenv("FAKE_AGENT_FORGET", "farewell")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "limit")
    report, lines = run(project)
    assert report.outcome is Outcome.COMPLETE and report.exit_code == 0, report.text
    assert report.text.startswith("COMPLETE:")
    assert not any("ERROR" in line for line in lines), lines  # the end of the roadmap is no error
    assert_delivered(project)
    assert_no_workers(tmux_socket)

    assert "gemini" in AvailabilityStore().unavailable(datetime.now(UTC))
    done = [(h.session.agent, h.session.command, h.session.slug, h.kind) for h in report.history]
    assert ("gemini", "next-build", "greeting", EventKind.RATE_LIMITED) in done
    builds = [(agent, slug) for agent, command, slug, kind in done if command == "next-build"]
    assert builds == [
        ("gemini", "greeting"),
        ("claude", "greeting"),
        ("claude", "farewell"),
        ("claude", "shouting"),
    ]
    steps = [(command, slug) for _, command, slug, _ in done]
    assert steps.count(("next-review", "greeting")) == 2 and ("next-fix-review", "greeting") in steps
    assert ("commit-pending", "farewell") in steps
    sessions = SessionStore().sessions()
    assert report.steps == len(report.history) == len([s for s in sessions if s.delivered_at is not None])
    assert all(s.state.is_final for s in sessions)
    # the others: workers started ahead for a step next_work did not name (a rejection, a limit), ended
    # without their command
    assert all(s.state is SessionState.CANCELLED for s in sessions if s.delivered_at is None)


def test_a_slug_stops_the_run_after_that_item(project, fake_agents, tmux_socket):
    report, _ = run(project, "shouting")
    assert report.outcome is Outcome.COMPLETE, report.text
    assert_delivered(project, ("shouting",))
    assert markers(project)["greeting"] is Marker.PENDING and markers(project)["farewell"] is Marker.PENDING
    assert archives(project) == ["001-shouting"]
    assert_no_workers(tmux_socket)


def test_prepare_runs_the_architects_unattended_and_without_it_the_run_stops(
    project, fake_agents, tmux_socket
):
    roadmap = project / "todos" / "roadmap.md"
    roadmap.write_text(roadmap.read_text() + "- [ ] whisper — Lower-case variants.\n")
    commit_all(project, "Add whisper")

    refused, _ = run(project, "whisper")
    assert refused.outcome is Outcome.ERROR and refused.exit_code == 1
    assert refused.text.splitlines()[0] == "ERROR: NOT_PREPARED"
    next_line = next(line for line in refused.text.splitlines() if line.startswith("next: "))
    assert next_line.endswith("teleclaude run whisper --prepare")  # the run names the way on
    assert SessionStore().sessions() == []

    report, lines = run(project, "whisper", prepare=True)
    assert report.outcome is Outcome.COMPLETE, report.text
    assert not any("ERROR" in line for line in lines), lines  # a refusal --prepare answers is no error
    assert_delivered(project, ("whisper",))
    architects = [s for s in SessionStore().sessions() if s.command in ("next-requirements", "next-plan")]
    assert [s.command for s in architects] == ["next-requirements", "next-plan"]
    assert all(s.slug == "whisper" and "unattended" in s.args and s.subfolder is None for s in architects)
    assert_no_workers(tmux_socket)


def test_max_steps_stops_the_run_with_exit_1(project, fake_agents, tmux_socket):
    report, _ = run(project, max_steps=1)
    assert report.outcome is Outcome.MAX_STEPS and report.exit_code == 1
    assert report.text.startswith("MAX_STEPS:")
    assert report.steps == 1 and len(SessionStore().sessions()) == 1
    assert_no_workers(tmux_socket)


def parked_lines(report) -> dict[str, str]:
    """A PARKED report's items: slug -> the first line of why it could not go on."""
    found = (re.match(r"- (\S+): (.*)", line) for line in report.text.splitlines())
    return {match[1]: match[2] for match in found if match}


def test_a_crashing_worker_parks_its_item_after_its_second_failure(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT", "crash")
    report, _ = run(project)
    assert report.outcome is Outcome.PARKED and report.exit_code == 1, report.text
    # farewell waits for greeting; greeting and shouting each failed twice
    assert parked_lines(report) == dict.fromkeys(("greeting", "shouting"), "ERROR: WORKER_FAILED")
    assert [h.session.state for h in report.history] == [SessionState.ERRORED] * 4
    assert "agents unavailable" in report.text  # the agent failed every item it got: take it away
    assert_no_workers(tmux_socket)


def test_a_serial_run_parks_an_item_that_fails_and_delivers_the_independent_ones(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_CRASH", "shouting")  # every worker of shouting crashes
    report, lines = run(project)
    assert report.outcome is Outcome.PARKED and report.exit_code == 1, report.text
    assert parked_lines(report) == {"shouting": "ERROR: WORKER_FAILED"}
    assert markers(project) == {"greeting": Marker.DONE, "farewell": Marker.DONE, "shouting": Marker.ACTIVE}
    assert [re.sub(r"^\d{3}-", "", name) for name in archives(project)] == ["greeting", "farewell"]
    # the agent did the other items' steps: the advice is not to take it away from every item
    assert "agents unavailable" not in report.text
    assert_no_workers(tmux_socket)


def test_a_cli_that_exits_before_its_prompt_counts_as_a_session_started(
    project, tmux_socket, tmp_path, monkeypatch
):
    """The session was started (and is in the history): the report must not say 0 sessions started."""
    folder = tmp_path / "logged-out"
    folder.mkdir()
    for name in ("claude", "gemini", "codex"):
        (folder / name).write_text("#!/bin/sh\necho 'Please log in first.'\nexit 1\n")
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    report, _ = run(project)
    assert report.outcome is Outcome.PARKED, report.text  # each independent item tried, and parked
    parked = parked_lines(report)
    assert parked and set(parked.values()) == {"ERROR: WORKER_BLOCKED"}
    assert report.steps == len(parked)  # one session started for each
    assert_no_workers(tmux_socket)


def test_a_worker_that_reports_its_step_is_finished_by_the_runtime_and_the_run_moves_on(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT", "work,report")  # report_status with a wait_cmd after each step
    report, _ = run(project, "shouting")
    assert report.outcome is Outcome.COMPLETE, report.text
    assert_delivered(project, ("shouting",))
    assert EventKind.FINISHED in [h.kind for h in report.history]
    assert_no_workers(tmux_socket)


def test_a_worker_that_never_answers_is_replaced_by_the_next_agent_and_the_item_delivered(
    project, fake_agents, tmux_socket, monkeypatch
):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "soft_remind = 0.5\nhard_remind = 1.0\nmax_nudges = 1\n")
    commit_all(project, "Remind quickly")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")  # the builder never answers its reminders
    report, lines = run(project, "greeting")
    assert report.outcome is Outcome.COMPLETE, report.text
    builds = [s for s in SessionStore().sessions() if s.command == "next-build"]
    assert [s.agent for s in builds] == ["gemini", "claude"] and builds[1].state is SessionState.DONE
    assert any("rate_limited: unresponsive until" in line for line in lines), lines
    gone = AvailabilityStore().unavailable(datetime.now(UTC))["gemini"]
    assert gone.reason == "unresponsive" and gone.until > datetime.now(UTC) + timedelta(minutes=50)
    assert builds[0].tmux_session not in Tmux(tmux_socket).session_names()  # the stuck session was ended
    assert_delivered(project, ("greeting",))


def test_with_unresponsive_pause_0_stuck_workers_park_their_items_and_are_left_running_for_a_human(
    project, fake_agents, tmux_socket, monkeypatch
):
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text()
        + "soft_remind = 0.5\nhard_remind = 1.0\nmax_nudges = 1\nunresponsive_pause = 0\n"
    )
    commit_all(project, "Remind quickly")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")
    report, _ = run(project)
    assert report.outcome is Outcome.PARKED and report.exit_code == 1, report.text
    stuck = [s for s in SessionStore().sessions() if s.state is SessionState.NEEDS_ATTENTION]
    assert {slug: line.split(":")[0] for slug, line in parked_lines(report).items()} == {
        s.slug: "NEEDS_ATTENTION" for s in stuck
    }
    assert stuck and Tmux(tmux_socket).session_names() == {s.tmux_session for s in stuck}
    assert all(s.id in report.text for s in stuck)  # and how to look at each


def test_a_session_left_pending_by_a_killed_starter_is_ended_and_the_step_started_again(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")
    build = app.next_work(cwd=project)
    assert isinstance(build, Dispatch), build
    runtime = open_runtime(project)
    started = runtime.run_agent_command(
        StartRequest(
            "local",
            build.command,
            build.slug,
            build.project,
            build.agent,
            build.thinking_mode,
            build.subfolder,
        )
    )
    assert isinstance(started, Started), started
    # as if its starter was killed before it typed the command: pending, for longer than a start may take
    long_ago = started.session.created_at - timedelta(hours=1)
    runtime.store.save(replace(started.session, state=SessionState.PENDING, created_at=long_ago))
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)

    report, _ = run(project, "greeting")
    assert report.outcome is Outcome.COMPLETE, report.text
    assert stored(started.session.id).state is SessionState.CANCELLED
    assert [s.agent for s in SessionStore().sessions() if s.command == "next-build"] == ["gemini", "claude"]
    assert_delivered(project, ("greeting",))
    assert_no_workers(tmux_socket)


STARTER = """import sys
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import StartRequest
open_runtime(".").run_agent_command(StartRequest("local", *sys.argv[1:6], sys.argv[6] or None))
"""


def test_a_worker_whose_starter_was_killed_mid_start_is_restarted_at_once_by_the_next_run(
    project, fake_agents, tmux_socket, monkeypatch, teleclaude_cli
):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text().replace("startup_timeout = 15", "startup_timeout = 600"))
    commit_all(project, "A long startup_timeout")
    monkeypatch.setenv("FAKE_AGENT", "slowstart")  # a second before each CLI shows its prompt
    build = app.next_work(cwd=project)
    assert isinstance(build, Dispatch), build
    what = (build.command, build.slug, build.project, build.agent, build.thinking_mode, build.subfolder or "")
    starter = subprocess.Popen([sys.executable, "-c", STARTER, *what], cwd=project)
    pending = wait_until(lambda: next((s for s in SessionStore().sessions() if s.pane_id), None))
    os.kill(starter.pid, signal.SIGKILL)  # while it waits for the worker's prompt
    starter.wait()
    assert stored(pending.id).state is SessionState.PENDING

    # not after 2 × startup_timeout (20 minutes): its starter is known to be gone
    code, out, err = finish(teleclaude_cli(project, "run", "greeting"), seconds=120)
    assert code == 0, out + err
    assert stored(pending.id).state is SessionState.CANCELLED
    builds = [s for s in SessionStore().sessions() if s.command == "next-build"]
    assert len(builds) == 2 and builds[1].state is SessionState.DONE
    assert_delivered(project, ("greeting",))
    assert_no_workers(tmux_socket)


def test_no_agent_for_a_step_and_no_wait_parks_each_item_with_self(project, fake_agents, tmux_socket):
    for agent in ("gemini", "claude", "codex"):
        app.mark_agent_unavailable(agent, "1h", "quota_exhausted", cwd=project)
    report = orchestrator.run(
        project, None, False, 40, open_runtime(project), print, print, wait_for_limits=False
    )
    assert report.outcome is Outcome.PARKED and report.exit_code == 1
    assert parked_lines(report) == dict.fromkeys(("greeting", "shouting"), "SELF:")
    assert SessionStore().sessions() == []


def test_a_run_whose_agents_are_all_out_waits_for_the_first_back_and_delivers(
    project, fake_agents, tmux_socket
):
    for agent in ("claude", "codex"):
        app.mark_agent_unavailable(agent, "1h", "quota_exhausted", cwd=project)
    app.mark_agent_unavailable("gemini", "10s", "rate_limited", cwd=project)
    back = AvailabilityStore().unavailable(datetime.now(UTC))["gemini"].until
    shown: list[orchestrator.StatusLine] = []
    lines: list[str] = []

    def status(line: orchestrator.StatusLine) -> None:
        """At the run's first countdown, gemini's reset is moved to 2 s from now: the run waits for a reset
        that passes, as the one it counts down to does, without the test waiting out the rest of the 10 s."""
        if isinstance(line, orchestrator.Countdown) and not any(
            isinstance(seen, orchestrator.Countdown) for seen in shown
        ):
            app.mark_agent_unavailable("gemini", "2s", "rate_limited", cwd=project)
        shown.append(line)

    report = orchestrator.run(project, "greeting", False, 40, open_runtime(project), lines.append, status)
    assert report.outcome is Outcome.COMPLETE, report.text
    assert [s.agent for s in SessionStore().sessions() if s.command == "next-build"] == ["gemini"]
    countdowns = [line for line in shown if isinstance(line, orchestrator.Countdown)]
    assert countdowns and {c.agent for c in countdowns} == {"gemini"} and countdowns[0].until == back
    assert any("waiting for gemini" in line for line in lines), lines


def test_a_builder_over_its_headroom_is_passed_over_and_the_status_line_shows_the_usage_in_use(
    project, fake_agents, tmux_socket, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1")  # each step lasts a few status lines
    now = datetime.now(UTC)
    AvailabilityStore().record_usage(
        [
            UsageWindow("gemini", "5h", 96, now + timedelta(hours=2), now),  # the row's first builder
            UsageWindow("claude", "5h", 40, now + timedelta(hours=2), now),
            UsageWindow("claude", "7d", 12, now + timedelta(days=4), now),
        ]
    )
    shown: list[orchestrator.StatusLine] = []
    runtime = open_runtime(project)
    report = orchestrator.run(project, "greeting", False, 40, runtime, print, shown.append, tick=0.2)
    assert report.outcome is Outcome.COMPLETE, report.text
    assert [s.agent for s in SessionStore().sessions() if s.command == "next-build"] == ["claude"]
    building = [
        p.line() for p in shown if isinstance(p, orchestrator.Progress) and p.session.agent == "claude"
    ]
    assert any(" | usage: claude 5h 40% ↺ " in line and " · 7d 12% ↺ " in line for line in building), building


def test_a_run_killed_while_it_waits_for_a_reset_waits_for_the_same_time_when_started_again(
    project, fake_agents, tmux_socket, teleclaude_cli
):
    """The reset is an hour away, so the second run still waits however slow the machine is (a wait that
    ends is `test_a_run_whose_agents_are_all_out_waits…`'s)."""
    for agent in ("claude", "codex"):
        app.mark_agent_unavailable(agent, "2h", "quota_exhausted", cwd=project)
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)
    back = AvailabilityStore().unavailable(datetime.now(UTC))["gemini"].until
    waits = []
    for _ in range(2):
        run = teleclaude_cli(project, "run", "greeting")
        assert run.stdout is not None
        waits.append(next(line for line in run.stdout if "waiting for gemini" in line))
        run.kill()  # SIGKILL while it waits
        run.communicate()
    assert [wait.split("back at ")[1].strip() for wait in waits] == [format_utc(back)] * 2
    assert SessionStore().sessions() == []  # neither run started a worker


# --- the command line: errors, Ctrl-C, a killed supervisor ------------------------------------------------


def test_an_error_of_the_planner_stops_the_run_with_exit_1(project, fake_agents, tmux_socket, teleclaude_cli):
    code, out, err = finish(teleclaude_cli(project, "run", "no-such-slug"))
    assert code == 1, out + err
    assert report_line(out) == "ERROR: UNKNOWN_ITEM"
    assert "Traceback" not in err
    assert SessionStore().sessions() == []


def test_the_stand_ins_from_demo_stand_ins_drive_a_run_of_ones_own_project(
    project, tmux_socket, teleclaude_cli, tmp_path, monkeypatch
):
    """`teleclaude demo --stand-ins DIR` is the way to rehearse a run without a model: DIR first on PATH."""
    code, out, err = finish(teleclaude_cli(tmp_path, "demo", "--stand-ins", str(tmp_path / "stand-ins")))
    assert (code, out.splitlines()[0][:3]) == (0, "OK:"), out + err
    monkeypatch.setenv("PATH", f"{tmp_path / 'stand-ins'}{os.pathsep}{os.environ['PATH']}")
    for name in ("FAKE_AGENT", "FAKE_AGENT_CLAUDE", "FAKE_AGENT_GEMINI", "FAKE_AGENT_CODEX"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = finish(teleclaude_cli(project, "run", "greeting"))
    assert code == 0 and report_line(out).startswith("COMPLETE"), out + err
    assert_delivered(project, ("greeting",))


def test_run_stand_ins_rehearses_on_a_clone_and_leaves_the_checkout_and_the_real_agents_alone(
    project, teleclaude_cli, tmp_path, monkeypatch
):
    """`teleclaude run --stand-ins`: the item is delivered in a kept clone; the user's checkout, sessions and
    agent CLIs are untouched and no tmux server is left."""
    real = tmp_path / "real-agents"  # the user's own agent CLIs, first on PATH: none of them may start
    real.mkdir()
    for name in NAMES:
        (real / name).write_text(f"#!/bin/sh\ntouch {tmp_path / 'a-real-agent-ran'}\n")
        (real / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{real}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # where the rehearsal makes its clone
    (tmp_path / "tmp").mkdir()
    earlier = {
        name: earlier_rehearsal(tmp_path / "tmp", name, of) for name, of in (("a", project), ("b", real))
    }
    before = (git(project, "rev-parse", "HEAD"), (project / "todos" / "roadmap.md").read_bytes())
    code, out, err = finish(teleclaude_cli(project, "run", "greeting", "--stand-ins"))
    assert code == 0 and report_line(out).startswith("COMPLETE"), out + err
    [clone] = [
        c for c in (tmp_path / "tmp").glob("teleclaude-rehearsal-*/project") if c.parent != earlier["b"]
    ]
    assert_delivered(clone, ("greeting",))
    # the last rehearsal of this checkout is removed, another checkout's stays; this one is kept and named
    assert not earlier["a"].exists() and earlier["b"].exists()
    assert f"rm -rf {clone.parent}" in out
    # the next step is the real run in the user's checkout, not a plain `run` in the clone
    [next_line] = [line for line in out.splitlines() if line.startswith("next: ")]
    assert f"cd {project} && teleclaude run greeting" in next_line and str(clone) not in next_line
    [written] = [line.removeprefix("report: ") for line in out.splitlines() if line.startswith("report: ")]
    assert Path(written).is_file() and Path(written).parent.parent == clone.parent
    assert (git(project, "rev-parse", "HEAD"), (project / "todos" / "roadmap.md").read_bytes()) == before
    assert git(project, "status", "--porcelain") == "" and not (project / "done").exists()
    assert not (tmp_path / "a-real-agent-ran").exists()
    assert SessionStore().sessions() == []  # the user's database never heard of the rehearsal
    socket = re.search(r"tmux -L (tc-demo-[0-9a-f]+)", out)
    assert socket and Tmux(socket[1]).session_names() == set(), out


def test_run_stand_ins_commits_as_the_user_whose_identity_is_only_in_the_repository(
    project, teleclaude_cli, tmp_path, monkeypatch
):
    """A clone keeps no repository-level git settings: the rehearsal gives it the user's identity."""
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.delenv(f"GIT_{role}_NAME")
        monkeypatch.delenv(f"GIT_{role}_EMAIL")
    git(project, "config", "user.name", "Only Here")  # no global identity: HOME is the test's own
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, out, err = finish(teleclaude_cli(project, "run", "greeting", "--stand-ins"))
    assert code == 0 and report_line(out).startswith("COMPLETE"), out + err
    [clone] = (tmp_path / "tmp").glob("teleclaude-rehearsal-*/project")
    assert git(clone, "log", "-1", "--format=%an").strip() == "Only Here"


def earlier_rehearsal(tmp: Path, name: str, of: Path) -> Path:
    """The folder an ended rehearsal of `of` left in the temporary folder."""
    folder = tmp / f"teleclaude-rehearsal-{name}"
    (folder / "project").mkdir(parents=True)
    (folder / "rehearsal-of").write_text(str(of))
    (folder / "rehearsal-over").touch()
    return folder


def test_run_stand_ins_checks_the_slug_before_it_clones(project, teleclaude_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    code, out, err = finish(teleclaude_cli(project, "run", "greetnig", "--stand-ins"))
    assert (code, out.splitlines()[0]) == (1, "ERROR: UNKNOWN_ITEM"), out + err
    assert "greeting" in out  # did you mean
    assert list((tmp_path / "tmp").iterdir()) == []


def test_run_stand_ins_outside_a_repository_is_not_a_git_repo(tmp_path, teleclaude_cli):
    code, out, err = finish(teleclaude_cli(tmp_path, "run", "--stand-ins"))
    assert (code, out.splitlines()[0]) == (1, "ERROR: NOT_A_GIT_REPO"), out + err


def test_a_missing_roadmap_is_an_error_not_a_finished_run(project, fake_agents, tmux_socket):
    (project / "todos" / "roadmap.md").unlink()
    report, _ = run(project)
    assert report.outcome is Outcome.ERROR and report.text.startswith("ERROR: NO_WORK")


def test_bad_usage_exits_2(project, teleclaude_cli):
    code, out, err = finish(teleclaude_cli(project, "run", "--max-steps", "0"))
    assert code == 2 and "usage:" in err


def test_a_run_killed_mid_run_and_started_again_finishes_without_dispatching_anything_twice(
    project, fake_agents, tmux_socket, teleclaude_cli
):
    settings = project / "teleclaude.toml"  # turns end after 1.5 s of quiet: time enough to kill the run
    fast = settings.read_text()
    settings.write_text(fast.replace("idle_threshold = 0.4", "idle_threshold = 1.5"))
    commit_all(project, "Slower turn ends")
    first = teleclaude_cli(project, "run")
    adopted = wait_until(running_session)
    first.kill()  # SIGKILL: no chance to clean up
    first.wait(timeout=10)  # the fixture closes its pipes
    settings.write_text(fast)  # the second run may end turns as quickly as the other tests
    commit_all(project, "Quick turn ends again")

    code, out, err = finish(teleclaude_cli(project, "run"))
    assert code == 0, out + err
    assert report_line(out).startswith("COMPLETE:")
    assert adopted.id in out  # taken over, not started again
    assert_delivered(project)
    every = SessionStore().sessions()
    sessions = [s for s in every if s.delivered_at is not None]  # the workers given a step
    twice = [pair for pair, n in collections.Counter((s.command, s.args) for s in sessions).items() if n > 1]
    assert twice == []
    steps = [(s.command, s.args, s.agent, s.state.value) for s in sessions]
    assert len(sessions) == 9, "\n".join(map(str, steps))  # build, review, finalize for each of the three
    assert all(s.state.is_final for s in every)
    # a worker the killed run had started ahead of its step was ended by the next one, never typed into
    assert all(s.state is SessionState.CANCELLED for s in every if s.delivered_at is None)
    assert_no_workers(tmux_socket)


def test_ctrl_c_leaves_the_worker_running_says_how_to_resume_and_a_second_run_adopts_it(
    project, fake_agents, tmux_socket, monkeypatch, teleclaude_cli
):
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")  # the first build never ends by itself
    first = teleclaude_cli(project, "run", "greeting")
    hanging = wait_until(running_session)
    first.send_signal(signal.SIGINT)
    code, out, err = finish(first, 30)
    assert code == 130, out + err
    assert report_line(out).startswith("INTERRUPTED:")
    assert "teleclaude run greeting" in out and hanging.id in out
    assert "Traceback" not in err
    assert stored(hanging.id).state is SessionState.RUNNING
    assert hanging.tmux_session in Tmux(tmux_socket).session_names()

    # the worker's Stop hook says its turn ended; gemini is out of quota, so the next build goes to claude
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)
    open_runtime(project).record_turn_end(hanging.id)
    code, out, err = finish(teleclaude_cli(project, "run", "greeting"))
    assert code == 0, out + err
    assert report_line(out).startswith("COMPLETE:")
    assert hanging.id in out
    assert stored(hanging.id).state is SessionState.DONE
    builds = [s.agent for s in SessionStore().sessions() if s.command == "next-build"]
    assert builds == ["gemini", "claude"]
    assert_delivered(project, ("greeting",))
    assert_no_workers(tmux_socket)


# --- the demo ---------------------------------------------------------------------------------------------


# the whole demo delivering its roadmap and leaving no tmux server behind: test_wheel.py (from the wheel)


def test_without_tmux_the_demo_says_to_install_it(monkeypatch, capsys):
    from teleclaude.cli.run import Console
    from teleclaude.demo import scenario as demo

    monkeypatch.setattr(demo.shutil, "which", lambda name, *args, **kwargs: None)
    assert demo.run(Console()) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: TMUX_FAILED"


# --- the status line -------------------------------------------------------------------------------------


class Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.text = ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def session(state: SessionState = SessionState.RUNNING) -> Session:
    now = datetime.now(UTC)
    return Session("s1", "claude", "next-build", "x", "/p", "trees/x", state, now, now)


def test_on_a_terminal_the_status_line_is_rewritten_in_place_and_cleared_before_a_log_line(capsys):
    from teleclaude.cli.run import Console

    err = Stream(tty=True)
    console = Console(err)
    console.status(orchestrator.Progress(1, session(), 3))
    console.status(orchestrator.Progress(1, session(), 4))
    console.show("[2] next")
    assert err.text.count("\r\x1b[K") == 3 and "\n" not in err.text
    assert capsys.readouterr().out == "[2] next\n"


def test_elsewhere_a_status_line_is_printed_only_when_more_than_the_clock_changed():
    from teleclaude.cli.run import Console

    err = Stream(tty=False)
    console = Console(err)
    for seconds in (1, 2, 3):
        console.status(orchestrator.Progress(1, session(), seconds))
    console.status(orchestrator.Progress(1, session(SessionState.STALLED), 4))
    assert len(err.text.splitlines()) == 2 and "\r" not in err.text


def test_a_long_digest_on_the_status_line_keeps_its_no_progress():
    digest = (
        'next-build x: running 12m, state stalled, status "reading the big module" (9m ago), '
        "1 reminder(s) sent, NO PROGRESS"
    )
    line = orchestrator.Progress(1, session(), 3, digest=digest).line()
    assert "NO PROGRESS" in line and len(line) < len(digest) + 40


def test_the_usage_comes_last_on_the_status_line_so_a_narrow_terminal_cuts_it_first():
    progress = orchestrator.Progress(
        1, session(), 3, digest="a digest", parked=("x (SELF:)",), usage="claude 5h 83%"
    )
    key = progress.key()
    assert key.endswith(" | usage: claude 5h 83%") and "digest: a digest" in key and "parked: x" in key
    assert progress.key() != replace(progress, usage="claude 5h 84%").key()  # a plain log prints it again


# --- workers started ahead of their step (warm start) -------------------------------------------------------


def run_to_the_end(project: Path, socket: str) -> tuple[orchestrator.RunReport, list[str], list[Session]]:
    """`run` of the whole roadmap: complete, every item delivered, no worker left; its sessions."""
    report, lines = run(project)
    assert report.outcome is Outcome.COMPLETE, report.text
    assert_delivered(project)
    assert_no_workers(socket)
    return report, lines, SessionStore().sessions()


def turn_end(session: Session) -> datetime:
    (end,) = [e.at for e in SessionStore().events([session.id]) if e.kind is EventKind.TURN_ENDED][:1]
    return end


def step_of(sessions: list[Session], command: str, slug: str) -> Session:
    (session,) = [s for s in sessions if s.command == command and s.slug == slug and s.delivered_at]
    return session


def test_each_steps_worker_is_started_while_the_step_before_works_and_the_next_item_claimed_while_one_merges(
    project, fake_agents, tmux_socket, monkeypatch
):
    """Each reviewer and finalizer is at its prompt before the worker before it is through: the step's start
    is not waited for between the steps. The first item's are the usual next steps (a review after a build,
    a finalize after a review) by the agents the planner chooses; later items' are what followed before.
    shouting is ready while farewell is finalized: claimed then, its builder at its prompt before the
    finalizer is through, and its branch caught up with farewell's merge before the build is typed. farewell
    waits for greeting: it is not claimed before greeting is merged, and the roadmap's order holds."""
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "2")  # the finalizer merges 1.5 s into its turn
    report, lines, sessions = run_to_the_end(project, tmux_socket)
    assert len(sessions) == report.steps == 9  # none started ahead for nothing
    for slug in SLUGS:
        build, review, finalize = (
            step_of(sessions, command, slug) for command in ("next-build", "next-review", "next-finalize")
        )
        assert review.created_at < turn_end(build) < review.delivered_at  # type: ignore[operator]
        assert finalize.created_at < turn_end(review) < finalize.delivered_at  # type: ignore[operator]
        assert review.subfolder == f"trees/{slug}" and finalize.subfolder is None
    assert sum("started ahead" in line for line in lines) == 7  # and shouting's build, claimed ahead
    builds = [step_of(sessions, "next-build", slug) for slug in SLUGS]
    finalizes = [step_of(sessions, "next-finalize", slug) for slug in SLUGS]
    assert [b.slug for b in sorted(builds, key=lambda s: s.delivered_at or 0)] == list(SLUGS)
    farewell_done = turn_end(finalizes[1])
    assert builds[2].created_at < farewell_done < builds[2].delivered_at  # type: ignore[operator]
    for before, after in (("greeting", "farewell"), ("farewell", "shouting")):  # each built on the one before
        merged = git(project, "log", "-1", "--format=%H", f"--grep=^Finalize {before}$", "main").strip()
        built = git(project, "log", "-1", "--format=%H", f"--grep=^Build {after}$", "main").strip()
        assert merged and built
        git(project, "merge-base", "--is-ancestor", merged, built)


def test_with_warm_start_false_each_worker_is_started_once_its_step_is_named(
    project, fake_agents, tmux_socket, monkeypatch
):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "warm_start = false\n")
    commit_all(project, "No workers started ahead")
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1")
    report, lines = run(project, "greeting")  # one item: which step starts ahead is test_run_loop's
    assert report.outcome is Outcome.COMPLETE, report.text
    sessions = SessionStore().sessions()
    build, review = (step_of(sessions, command, "greeting") for command in ("next-build", "next-review"))
    assert review.created_at > turn_end(build)
    assert not any("started ahead" in line for line in lines)


def test_a_worker_started_ahead_for_a_step_next_work_does_not_name_is_ended_without_its_command(
    project, fake_agents, tmux_socket, monkeypatch
):
    """greeting's first review requests changes: the finalizer started ahead for it is ended unused."""
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "1")
    monkeypatch.setenv("FAKE_AGENT_REJECT", "greeting")
    report, lines = run(project, "greeting")
    assert report.outcome is Outcome.COMPLETE, report.text
    assert_delivered(project, ("greeting",))
    assert_no_workers(tmux_socket)
    sessions = SessionStore().sessions()
    # (a fixer, guessed after the second review from what followed the first, is ended unused too)
    unused = {s.command: s for s in sessions if s.delivered_at is None}
    assert {command: s.state for command, s in unused.items()}.get("next-finalize") is SessionState.CANCELLED
    assert all(s.state is SessionState.CANCELLED for s in unused.values())
    fix = step_of(sessions, "next-fix-review", "greeting")
    finalizer = unused["next-finalize"]
    assert finalizer.updated_at <= fix.created_at  # ended before anything else started
    assert any(f"{finalizer.id}, started ahead for next-finalize greeting" in line for line in lines)


def reviewer_ahead() -> tuple[Session, Session] | None:
    """The second item's build, RUNNING, and its reviewer started ahead (PENDING, its pane open)."""
    of_item = [s for s in SessionStore().sessions() if s.slug == SLUGS[1]]
    building = [s for s in of_item if s.command == "next-build" and s.state is SessionState.RUNNING]
    ahead = [s for s in of_item if s.command == "next-review" and s.state is SessionState.PENDING]
    return (building[0], ahead[0]) if building and ahead and ahead[0].pane_id else None


def test_ctrl_c_ends_the_worker_started_ahead_and_leaves_the_working_one_running(
    project, fake_agents, tmux_socket, monkeypatch, teleclaude_cli
):
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "3")
    first = teleclaude_cli(project, "run")
    build, ahead = wait_until(reviewer_ahead, 90)
    first.send_signal(signal.SIGINT)
    code, out, err = finish(first, 30)
    assert code == 130, out + err
    assert "Traceback" not in err
    assert stored(ahead.id).state is SessionState.CANCELLED and stored(ahead.id).delivered_at is None
    assert stored(build.id).state is SessionState.RUNNING
    assert Tmux(tmux_socket).session_names() == {build.tmux_session}  # the worker started ahead: gone


def test_a_worker_started_ahead_by_a_killed_run_is_ended_by_the_next_run_which_delivers_everything(
    project, fake_agents, tmux_socket, monkeypatch, teleclaude_cli
):
    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "3")
    first = teleclaude_cli(project, "run")
    _, ahead = wait_until(reviewer_ahead, 90)
    time.sleep(1.0)  # at its prompt, waiting
    first.kill()  # SIGKILL: no chance to end it
    first.wait(timeout=10)
    assert stored(ahead.id).state is SessionState.PENDING

    monkeypatch.setenv("FAKE_AGENT_STEP_SECONDS", "0")
    code, out, err = finish(teleclaude_cli(project, "run"))
    assert code == 0, out + err
    assert stored(ahead.id).state is SessionState.CANCELLED and stored(ahead.id).delivered_at is None
    assert_delivered(project)
    assert all(s.state.is_final for s in SessionStore().sessions())
    assert_no_workers(tmux_socket)


# --- main moved behind teleclaude's back (planner/mainref.py) ----------------------------------------------


def test_a_commit_on_main_during_a_run_stops_it_naming_the_commit_and_a_new_run_accepts_it(
    project, fake_agents, tmux_socket, monkeypatch
):
    # the stand-in builder commits on main as the user would by hand: outside a sandbox, which would stop it
    config = Path(os.environ["HOME"], ".config", "teleclaude", "teleclaude.toml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nsandbox = "off"\n')
    monkeypatch.setenv("FAKE_AGENT_MAIN_COMMIT", "greeting")
    report, _ = run(project, "greeting")
    by_hand = git(project, "rev-parse", "HEAD").strip()
    assert git(project, "log", "-1", "--format=%s").strip() == "By hand"
    assert report.outcome is Outcome.NEEDS_ATTENTION, report.text
    assert f'commit="{by_hand}"' in report.text
    assert "Merge greeting" not in git(project, "log", "--format=%s", "main")  # nothing built on it

    monkeypatch.delenv("FAKE_AGENT_MAIN_COMMIT")
    again, _ = run(project, "greeting")
    assert again.outcome is Outcome.COMPLETE, again.text
    assert by_hand in git(project, "log", "--format=%H", "main").split()
    assert_delivered(project, ("greeting",))
