"""Issue 35's real-CLI quirks in a whole `teleclaude run` of the demo's items: opencode first on the build
and review rows (its role command once reached its model as plain text on a loaded machine, and items were
parked), and gemini as the builder of a user whose git identity is only in ~/.gitconfig (gemini 0.61 runs
its shell commands with GIT_CONFIG_GLOBAL=/dev/null). Each runs on the machine as it is, and again beside two
CPU burners under `./scripts/test --load` (conftest.busy_cores). opencode's run has the three items only
beside the burners and one on the machine as it is: its six starts cost ~120 s of CPU there, and what a
quiet start shows (its command taken as a command) each contract scenario shows too. The quiet one is also
`teleclaude demo --real opencode`'s run (test_demo_real.py), in this process: opencode first on every row,
its provider out on the finalize, which moves to claude (one run for both: each opencode start costs ~15 s
of CPU)."""

from __future__ import annotations

from collections import Counter

import pytest

from teleclaude.demo.model_server import ModelServer
from teleclaude.demo.real import DEMOS, RealDemo, ScriptedWorkers
from teleclaude.demo.scenario import commit_all
from teleclaude.demo.workers import git
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind
from teleclaude.runtime.orchestrator import Outcome

from .conftest import trusted
from .test_unattended_run import roadmap_of, three_clis_project

SLUGS = ("greeting", "farewell", "shouting")
USER = "Night Owl <owl@example.invalid>"


@pytest.fixture(params=["quiet", "busy"])
def machine(request) -> str:
    """The machine as the suite finds it, and with both cores kept busy (only under --load)."""
    if request.param == "busy":
        request.getfixturevalue("busy_cores")
    return request.param


def delivered_run(project, slugs=SLUGS):
    """`teleclaude run` of the roadmap; (its report, its runtime), every item (`slugs`) delivered. A CLI
    started cold beside the burners, on a machine shared with other suites, may take minutes to show its
    prompt."""
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text().replace("startup_timeout = 120", "startup_timeout = 400"))
    trusted(project)
    commit_all(project, "A patient start")
    runtime = open_runtime(project)
    lines: list[str] = []
    report = orchestrator.run(project, None, False, 40, runtime, lines.append, lambda _: None)
    log = "\n".join(lines)
    assert report.outcome is Outcome.COMPLETE, log + "\n" + report.text
    done = sorted(p.name for p in (project / "done").iterdir())
    assert len(done) == len(slugs) and all(name.endswith(slugs) for name in done), done
    return report, runtime


def steps_given(runtime) -> Counter[tuple[str, str, str]]:
    """(command, slug, agent) of every worker its step was typed into, counted."""
    given = [s for s in runtime.store.sessions() if s.delivered_at is not None]
    return Counter((s.command, s.args.split()[0], s.agent) for s in given)


def test_opencode_first_on_build_and_review_delivers_the_roadmap_taking_each_command_as_a_command(
    machine, agent_clis, tmp_path, tmux_socket, monkeypatch
):
    """opencode builds and reviews every item (each step once: no turn lost to a command line it took as a
    message), claude finalizes. No request of opencode's ever carries a bare role command line. Three items
    beside the burners, where the quirk was seen; one on the machine as it is, as `teleclaude demo --real
    opencode` runs it: opencode first on the finalize too, where its provider runs out (its usage limit), and
    the finalize moves to claude; every turn that ended, ended by the CLI's own hook."""
    quiet = machine == "quiet"
    demo = DEMOS["opencode"] if quiet else RealDemo("claude")  # the demo's, or no limit at all
    matrix = {"build": ("opencode", "claude"), "review": ("opencode", "claude"), "finalize": ("claude",)}
    if quiet:
        matrix["finalize"] = ("opencode", "claude")
    with ModelServer(then=ScriptedWorkers(demo)) as server:
        base = tmp_path / "base"
        project = three_clis_project(
            base, agent_clis, server, tmux_socket, monkeypatch, matrix, ("opencode", "claude")
        )
        slugs = SLUGS[:1] if quiet else SLUGS
        roadmap_of(project, *slugs)
        report, runtime = delivered_run(project, slugs)
    expected = {(f"next-{step}", slug, agents[0]) for step, agents in matrix.items() for slug in slugs}
    if quiet:
        expected.add(("next-finalize", SLUGS[0], "claude"))  # after the limit: the row's next agent
    steps = steps_given(runtime)
    assert set(steps) == expected and set(steps.values()) == {1}, steps
    ended = {
        (h.session.command, h.session.args.split()[0])
        for h in report.history
        if h.session.agent == "opencode" and h.kind is EventKind.TURN_ENDED
    }
    assert ended == {(f"next-{step}", slug) for step in ("build", "review") for slug in slugs}, report.history
    limited = [(h.session.agent, h.detail) for h in report.history if h.kind is EventKind.RATE_LIMITED]
    assert len(limited) == quiet and all(
        agent == "opencode" and detail.startswith("quota_exhausted") for agent, detail in limited
    ), report.history
    turn_ends = {h.detail for h in report.history if h.kind is EventKind.TURN_ENDED}
    assert turn_ends == {"stop hook"}, report.history  # opencode's plugin, claude's Stop hook
    chat = [r for r in server.requests if r.provider == "chat" and r.turn]
    plain = [r.last_user_text() for r in chat if r.last_user_text().strip().startswith("/next-")]
    assert not plain, plain
    ran = [r for r in chat if "teleclaude.demo.stand_in --step" in r.text()]
    assert ran, "opencode's model never had its shell do a step"  # its steps are its own shell's work
    assert f"Build {SLUGS[0]}" in git(project, "log", "--format=%s", "main")


def test_gemini_builds_the_roadmap_for_a_user_whose_identity_is_only_in_their_home(
    machine, agent_clis, tmp_path, tmux_socket, monkeypatch
):
    """The user's name and email are in ~/.gitconfig alone (no repository config, no GIT_AUTHOR_*): gemini
    builds each item, each step once (no refused stop, no loop), and every commit the run made is the
    user's, gemini's builds included. Beside the burners the whole roadmap; on the machine as it is one item
    (every step of the others would be the same again: test_contract.py's commit as that user is every
    CLI's)."""
    matrix = {"build": ("gemini", "claude"), "review": ("claude", "gemini"), "finalize": ("claude", "gemini")}
    slugs = SLUGS if machine == "busy" else SLUGS[:1]
    with ModelServer(then=ScriptedWorkers(RealDemo("claude"))) as server:
        project = three_clis_project(
            tmp_path / "base", agent_clis, server, tmux_socket, monkeypatch, matrix, ("gemini", "claude")
        )
        roadmap_of(project, *slugs)
        for role in ("AUTHOR", "COMMITTER"):  # the tests' own identity: this user has only their home's
            monkeypatch.delenv(f"GIT_{role}_NAME", raising=False)
            monkeypatch.delenv(f"GIT_{role}_EMAIL", raising=False)
        git(project, "config", "--unset", "user.name")
        git(project, "config", "--unset", "user.email")
        (tmp_path / "base" / "home" / ".gitconfig").write_text(
            "[user]\n\tname = Night Owl\n\temail = owl@example.invalid\n"
        )
        before = git(project, "rev-parse", "HEAD").strip()
        _, runtime = delivered_run(project, slugs)
    expected = {(f"next-{step}", slug, agents[0]) for step, agents in matrix.items() for slug in slugs}
    steps = steps_given(runtime)
    assert set(steps) == expected and set(steps.values()) == {1}, steps
    made = git(project, "log", "--format=%s|%an <%ae>|%cn <%ce>", f"{before}..main").splitlines()
    builds = [line for line in made if line.startswith("Build ")]
    assert len(builds) >= len(slugs), made
    assert {tuple(line.split("|")[1:]) for line in made} == {(USER, USER)}, made
