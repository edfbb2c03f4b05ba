"""A hostile worker in its sandbox (runtime/core/sandbox.py): every reach beyond its worktree fails inside
it, nothing outside changes, and the item is still delivered by the honest steps. The stand-in's
`FAKE_AGENT_HOSTILE` builder tries them (teleclaude/demo/stand_in.py `attack`)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from teleclaude.adapters import sandbox
from teleclaude.adapters.tmux import Tmux
from teleclaude.demo import stand_in
from teleclaude.demo.scenario import commit_all, git, make_repository
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.orchestrator import Outcome

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
def project(tmp_path, monkeypatch, copy_repository, socket) -> Path:
    """The demo repository, its workers the stand-in, whose turns end only by its stop hook (through the
    sandboxed worker's channel: idle_threshold is an hour)."""
    bin_dir = stand_in.install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT", "work,hook")
    for name in ("CLAUDE", "GEMINI", "CODEX"):
        monkeypatch.delenv(f"FAKE_AGENT_{name}", raising=False)
    root = copy_repository(make_repository, tmp_path / "project")
    (root / "teleclaude.toml").write_text(
        f'[runtime]\nsocket = "{socket}"\nidle_threshold = 3600\npoll_interval = 0.05\n'
        "startup_timeout = 15\nsettle = 0.1\n"
    )
    commit_all(root, "Runtime settings for the tests")
    return root


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
    outcomes = json.loads(git(project, "show", f"main:{stand_in.HOSTILE_REPORT}"))
    assert set(outcomes) == {
        "write_home",
        "write_main",
        "write_other_tree",
        "read_ssh_key",
        "update_ref_main",
        "push",
        "kill",
        "tmux_send_keys",
    }
    assert {name: how for name, how in outcomes.items() if not how.startswith("refused")} == {}
    # nothing outside changed
    assert not (home / "outside").exists()
    assert not (project / "intruder.txt").exists()
    assert list((project / "trees" / "sibling").iterdir()) == []
    assert git(remote, "for-each-ref") == ""
    assert bystander.poll() is None
    assert "pwned" not in "\n".join(tmux.capture(victim, 0, 49))
    assert "Merge greeting" in git(project, "log", "--format=%s", "main")
    assert git(project, "rev-parse", "main~2").strip() == main  # moved by the merge and archive only


def test_without_the_sandbox_a_worker_that_moves_main_stops_the_run_naming_the_commit(
    project, isolated_environment, monkeypatch
):
    config = isolated_environment / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[runtime]\nsandbox = "off"\n')
    monkeypatch.setenv("FAKE_AGENT_HOSTILE", "greeting")
    report = orchestrator.run(
        project, "greeting", False, 40, open_runtime(project), lambda line: None, lambda progress: None
    )
    moved = git(project, "rev-parse", "main").strip()
    assert report.outcome is Outcome.NEEDS_ATTENTION, report.text
    assert f'commit="{moved}"' in report.text
    assert "Merge greeting" not in git(project, "log", "--format=%s", "main")
