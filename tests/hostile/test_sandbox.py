"""A hostile worker in its sandbox (runtime/core/sandbox.py): every reach beyond its worktree fails inside
it, nothing outside changes, and the item is still delivered by the honest steps. The stand-in's
`FAKE_AGENT_HOSTILE` builder tries them (teleclaude/demo/stand_in.py `attack`)."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teleclaude.adapters import sandbox
from teleclaude.adapters.tmux import Tmux
from teleclaude.demo import stand_in
from teleclaude.demo.scenario import git
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind
from teleclaude.runtime.orchestrator import Outcome

from ..attacks import assert_every_attack_refused, report_from_channel
from ..conftest import stand_in_project
from ..tmux_reaper import reaper, stop

pytestmark = pytest.mark.skipif(
    not sandbox.probe(os.environ).usable, reason="bubblewrap does not work here (apt-get install bubblewrap)"
)


@pytest.fixture
def socket() -> object:
    name = f"tc-sandbox-{secrets.token_hex(4)}"
    watcher = reaper(name)
    yield name
    Tmux(name).kill_server()
    stop(watcher)
    socket_path(name).unlink(missing_ok=True)


def socket_path(name: str) -> Path:
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", name)


@pytest.fixture
def project(tmp_path, monkeypatch, copy_repository, socket, isolated_environment) -> Path:
    """The demo repository, its workers the stand-in, whose turns end only by its stop hook (through the
    sandboxed worker's channel: idle_threshold is an hour); the user's config asks for the sandbox."""
    user_config(isolated_environment, '[runtime]\nsandbox = "auto"\n')
    return stand_in_project(tmp_path, monkeypatch, copy_repository, socket, "work,hook")


@pytest.fixture
def bystander():
    """A process that stands for `teleclaude run` (the worker is told its pid)."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_a_hostile_builder_reaches_nothing_outside_its_worktree_and_the_item_is_delivered(
    project, socket, bystander, isolated_environment, tmp_path, monkeypatch
):
    home = isolated_environment
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    (project / "trees" / "sibling").mkdir(parents=True)
    monkeypatch.setenv("FAKE_AGENT_HOSTILE", "greeting")
    monkeypatch.setenv("FAKE_AGENT_HOSTILE_PID", str(bystander.pid))
    monkeypatch.setenv("FAKE_AGENT_HOSTILE_REMOTE", str(remote))
    monkeypatch.setenv("FAKE_AGENT_HOSTILE_TMUX", f"{socket_path(socket)} =victim:")
    tmux = Tmux(socket)  # the server takes this environment: its panes, the workers, have it
    victim = tmux.cmd("new-session", "-d", "-s", "victim", "-P", "-F", "#{pane_id}", "cat")[-1]
    main = git(project, "rev-parse", "main").strip()

    lines: list[str] = []
    report = orchestrator.run(
        project, "greeting", False, 40, open_runtime(project), lines.append, lambda progress: None
    )

    assert report.outcome is Outcome.COMPLETE, report.text
    assert_every_attack_refused(project, home, project, remote, bystander, tmux, victim)
    assert git(project, "rev-parse", "main~2").strip() == main  # moved by the merge and archive only


def test_a_branch_made_after_the_worker_started_is_out_of_its_reach_and_its_own_branch_commits(
    project, bystander, monkeypatch
):
    """The branch is made once the worker's sandbox is (while its step waits at the gate): its tries to
    move it, delete it or remove its file fail inside, and what it builds lands on its own branch, which
    git outside reads at once."""
    gate = project / ".git" / "test-gate"  # shown (read-only) inside
    monkeypatch.setenv("FAKE_AGENT_GATE", str(gate))
    monkeypatch.setenv("FAKE_AGENT_HOSTILE", "greeting")
    monkeypatch.setenv("FAKE_AGENT_HOSTILE_LATER", "later/made")
    monkeypatch.setenv("FAKE_AGENT_HOSTILE_PID", str(bystander.pid))  # its other tries, as in the test above
    claimed = next_work(cwd=project)
    assert isinstance(claimed, Dispatch) and claimed.subfolder, claimed
    tree = project / claimed.subfolder
    built_on = git(tree, "rev-parse", "HEAD").strip()
    runtime = open_runtime(project)
    started = start(project, subfolder=claimed.subfolder)
    assert not isinstance(started, Error), started
    main = git(project, "rev-parse", "main").strip()
    git(project, "branch", "later/made", "main")
    gate.touch()
    wait_for(runtime, started.session.id, EventKind.TURN_ENDED)

    outcomes = json.loads((tree / stand_in.HOSTILE_REPORT).read_text())
    later = {name: how for name, how in outcomes.items() if name.endswith("_later")}
    assert set(later) == {"move_later", "delete_later", "unlink_later"}
    assert [how for how in later.values() if not how.startswith("refused")] == []
    assert git(project, "rev-parse", "later/made").strip() == main
    assert git(project, "rev-parse", "main").strip() == main
    # its own branch moved with its commit, as git outside (and the next step) sees it
    assert git(project, "merge-base", "--is-ancestor", built_on, "greeting") == ""
    assert git(project, "rev-parse", "greeting").strip() == git(tree, "rev-parse", "HEAD").strip() != built_on


def test_a_worker_that_points_its_worktree_at_another_branch_is_not_given_that_branch_next(project):
    """Its worktree's admin folder (writable inside) names which branch its HEAD is on: a worker that writes
    another item's branch there gets nothing of that branch at the next start of its worktree, which starts
    nothing and names what to do; that branch and its commits stay as they were. A run of the roadmap then
    parks that item, keeping what to do in its report, and delivers the other ready one, whose sandboxed
    workers' branch folder and kept branch go with its worktree."""
    claimed = next_work(cwd=project)
    assert isinstance(claimed, Dispatch) and claimed.subfolder, claimed
    other = git(project, "commit-tree", "-p", "main", "-m", "other's work", "main^{tree}").strip()
    git(project, "update-ref", "refs/heads/other", other)
    runtime = open_runtime(project)
    started = start(project, subfolder=claimed.subfolder)
    assert not isinstance(started, Error), started
    wait_for(runtime, started.session.id, EventKind.TURN_ENDED)
    head = Path(git(project / claimed.subfolder, "rev-parse", "--absolute-git-dir").strip(), "HEAD")
    written = inside(
        project, started.session.id, f"printf 'ref: refs/heads/other\\n' > {shlex.quote(str(head))}"
    )
    assert written.returncode == 0, written.stderr  # its admin folder is its own to write
    assert not isinstance(runtime.end_session(started.session.id), Error)

    again = start(project, subfolder=claimed.subfolder)

    assert isinstance(again, Error) and again.code is ErrorCode.WORKTREE_FAILED, again
    assert 'branch="greeting"' in again.message
    branch = project / ".git" / "refs" / "heads" / "other"
    assert not branch.is_symlink(), os.readlink(branch)
    assert git(project, "rev-parse", "other").strip() == other

    lines: list[str] = []
    report = orchestrator.run(project, None, False, 40, runtime, lines.append, lambda progress: None)

    assert report.outcome is Outcome.PARKED, report.text  # farewell waits for greeting
    assert [done for done in report.delivered if "shouting" in done], report.text
    parked = report.text.split("\n- greeting: ", 1)[-1]
    assert parked.startswith("ERROR: WORKTREE_FAILED") and 'branch="greeting"' in parked, report.text
    assert git(project, "rev-parse", "other").strip() == other
    heads = project / ".git" / sandbox.HEADS
    assert not (heads / "shouting").exists() and not (heads / ".given" / "shouting").exists()
    assert (heads / "greeting").is_dir() and (heads / ".given" / "greeting").is_file()  # still in flight
    assert not (project / ".git" / "refs" / "heads" / "shouting").is_symlink()


def test_a_git_folder_linked_out_of_the_repository_is_given_to_no_sandboxed_worker(
    project, isolated_environment
):
    """An unsandboxed step (a finalizer, an architect: the whole git directory is theirs) that made
    `.git/objects` a link out of the repository (here to a folder in the home that holds them, so git
    outside still works) would have the next sandboxed worker given where it leads, read-write: that start
    starts nothing (`ERROR: WORKTREE_FAILED`), naming the link, and nothing is made through it."""
    claimed = next_work(cwd=project)
    assert isinstance(claimed, Dispatch) and claimed.subfolder, claimed
    objects = project / ".git" / "objects"
    elsewhere = isolated_environment / "objects"
    objects.rename(elsewhere)
    objects.symlink_to(elsewhere)
    before = sorted(path.name for path in elsewhere.iterdir())

    started = start(project, subfolder=claimed.subfolder)

    assert isinstance(started, Error) and started.code is ErrorCode.WORKTREE_FAILED, started
    assert str(objects) in started.message
    assert sorted(path.name for path in elsewhere.iterdir()) == before


def test_without_the_sandbox_a_worker_that_moves_main_stops_the_run_naming_the_commit(
    project, isolated_environment, monkeypatch
):
    user_config(isolated_environment, '[runtime]\nsandbox = "off"\n')
    monkeypatch.setenv("FAKE_AGENT_HOSTILE", "greeting")
    report = orchestrator.run(
        project, "greeting", False, 40, open_runtime(project), lambda line: None, lambda progress: None
    )
    moved = git(project, "rev-parse", "main").strip()
    assert report.outcome is Outcome.NEEDS_ATTENTION, report.text
    assert f'commit="{moved}"' in report.text
    assert "Merge greeting" not in git(project, "log", "--format=%s", "main")


def test_a_sandboxed_workers_report_reaches_the_run_and_its_wait_cmd_runs_inside_its_sandbox(
    project, isolated_environment, monkeypatch
):
    home = isolated_environment
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    # exits 0 only where the key is not there and the home folder not writable: inside the sandbox (one
    # line: a wait_cmd holds no control character)
    check = (
        f"import os, sys; home = {str(home)!r}; "
        "sys.exit(os.access(home, os.W_OK) or os.path.exists(home + '/.ssh/id_ed25519'))"
    )
    monkeypatch.setenv("FAKE_AGENT", "work,hook,report")
    monkeypatch.setenv("FAKE_AGENT_WAIT_CMD", shlex.join([sys.executable, "-c", check]))
    runtime = open_runtime(project)
    started = start(project)
    assert not isinstance(started, Error), started
    finished = wait_for(runtime, started.session.id, EventKind.FINISHED)

    assert "exited 0" in finished.detail, finished.detail  # the check ran, and inside
    stored = runtime.store.get(started.session.id)
    assert stored is not None and stored.status_text  # the report went through the channel


def test_a_sandboxed_workers_report_for_another_session_is_refused(project, isolated_environment, tmp_path):
    channel = sandbox.open_channel(tmp_path / "sessions.db", "mine")
    done = report_from_channel(channel, "theirs", "done")
    assert done.returncode == 1 and done.stdout.startswith("ERROR: INVALID_ARGUMENT"), done.stdout
    assert sandbox.take_report(channel) is None


def wait_for(runtime, session_id: str, kind: EventKind, seconds: float = 120):
    seen: list = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        waited = runtime.wait_for_sessions([session_id], timeout=10)
        seen += waited.events
        found = [event for event in seen if event.kind is kind]
        if found:
            return found[0]
    pytest.fail(f"no {kind.value}; saw {[event.kind.value for event in seen]}")


# --- bad input ---------------------------------------------------------------------------------------------


def start(project: Path, agent: str = "claude", subfolder: str | None = None):
    from teleclaude.runtime.core.sessions import StartRequest

    return open_runtime(project).run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), agent, "med", subfolder)
    )


def test_a_cli_that_stops_on_a_path_its_sandbox_hides_is_blocked_naming_the_path(
    project, isolated_environment, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT", "homestate")
    started = start(project)
    assert isinstance(started, Error) and started.code is ErrorCode.WORKER_BLOCKED, started
    assert f'path="{isolated_environment / ".stand-in"}"' in started.message
    assert not (isolated_environment / ".stand-in").exists()


@pytest.fixture
def broken_bwrap(tmp_path, monkeypatch) -> Path:
    """A bwrap first on PATH that cannot make a namespace (as on a kernel without user namespaces)."""
    folder = tmp_path / "broken"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return fake


def user_config(home: Path, text: str) -> None:
    config = home / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


def test_under_bwrap_a_sandbox_that_cannot_be_made_refuses_the_worker(
    project, broken_bwrap, isolated_environment, socket
):
    user_config(isolated_environment, '[runtime]\nsandbox = "bwrap"\n')
    started = start(project)
    assert isinstance(started, Error) and started.code is ErrorCode.SANDBOX_UNAVAILABLE, started
    assert "No permissions to create new namespace" in started.message
    assert Tmux(socket).session_names() == set()


def test_under_auto_a_sandbox_that_cannot_be_made_is_a_warning_and_the_worker_starts(
    project, broken_bwrap, teleclaude_cli
):
    started = start(project)
    assert not isinstance(started, Error), started
    out, _ = teleclaude_cli(project, "status").communicate(timeout=60)
    assert "WARNING: workers are not sandboxed" in out and "apt-get install bubblewrap" in out


# --- what links lead to -------------------------------------------------------------------------------------


def linked_clis(project: Path, tmp_path: Path, monkeypatch) -> Path:
    """The stand-ins in a folder the sandbox hides (its /tmp is its own), reached only through the project's
    `.cache/agent-clis`, a link (as a checkout's that links the pinned CLIs in): first on PATH."""
    hidden = tmp_path / "hidden" / "agent-clis"
    stand_in.install(hidden / "bin")
    (project / ".cache").mkdir()
    (project / ".cache" / "agent-clis").symlink_to(hidden)
    with (project / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write(".cache/\n")
    reached = project / ".cache" / "agent-clis" / "bin"
    rest = [p for p in os.environ["PATH"].split(os.pathsep) if p != str(tmp_path / "bin")]
    monkeypatch.setenv("PATH", os.pathsep.join([str(reached), *rest]))
    return reached


def test_a_cli_reached_through_a_link_into_a_hidden_folder_runs_in_its_sandbox(
    project, tmp_path, monkeypatch
):
    """bubblewrap cannot make a mount point through a link inside the read-only project: the sandbox shows a
    linked folder where the link leads, so every sandboxed worker starts."""
    linked_clis(project, tmp_path, monkeypatch)
    runtime = open_runtime(project)
    started = start(project)
    assert not isinstance(started, Error), started
    wait_for(runtime, started.session.id, EventKind.TURN_ENDED)


def inside(project: Path, session_id: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by sh in the sandbox the worker `session_id` was started in (its kept bubblewrap argv)."""
    prefix = sandbox.read_box(Path(os.environ["TELECLAUDE_DB"]), session_id)
    assert prefix, "the worker was not sandboxed"
    return subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=60)


def test_a_link_to_the_home_or_to_the_root_shows_nothing_of_the_home_and_widens_nothing_writable(
    project, isolated_environment, tmp_path, monkeypatch
):
    """A folder on PATH that links to the home folder or to `/`, and a CLI's state folder that links to the
    home folder, are not shown: the key stays unreadable and the home unwritable through them."""
    home = isolated_environment
    (home / ".ssh").mkdir(mode=0o700)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".claude").symlink_to(home)
    to_home, to_root = tmp_path / "to-home", tmp_path / "to-root"
    to_home.symlink_to(home)
    to_root.symlink_to("/")
    linked_clis(project, tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", f"{os.environ['PATH']}{os.pathsep}{to_home}{os.pathsep}{to_root}/bin")
    runtime = open_runtime(project)
    started = start(project)
    assert not isinstance(started, Error), started
    wait_for(runtime, started.session.id, EventKind.TURN_ENDED)

    keys = [
        home / ".ssh",
        to_home / ".ssh",
        to_root / str(home).lstrip("/") / ".ssh",
        home / ".claude" / ".ssh",
    ]
    tries = " ; ".join(f"cat {shlex.quote(str(key / 'id_ed25519'))}" for key in keys)
    written = [home / "outside", home / ".claude" / "outside", to_home / "outside"]
    tries += " ; " + " ; ".join(f"echo x > {shlex.quote(str(path))}" for path in written)
    done = inside(project, started.session.id, tries + " ; command -v claude")
    assert "PRIVATE KEY" not in done.stdout, done.stdout
    assert done.stdout.strip().endswith("/.cache/agent-clis/bin/claude"), done.stdout + done.stderr
    assert not (home / "outside").exists()
