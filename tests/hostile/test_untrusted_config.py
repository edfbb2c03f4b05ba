"""Issue 23.2: a project's teleclaude.toml is code. A cloned repository whose teleclaude.toml sets what starts
processes (a binary, flags, environment, a computer with ssh options) runs none of it until the user trusts
that exact content with `teleclaude trust`; then it applies; a changed file is untrusted again. Planning
(next-work) never needs trust. Everything goes through the real CLI as a process, on a private tmux server."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import first_line

ROADMAP = "- [ ] feat — the feature\n"
PLAN = "# Plan\n## Group 1\n- [ ] write it\n"
# the stand-in for an agent CLI on PATH: it touches what its environment or flags name, then idles
FAKE_CLAUDE = """#!/bin/sh
[ -n "$HOSTILE_MARKER" ] && touch "$HOSTILE_MARKER"
for arg in "$@"; do case "$arg" in --touch=*) touch "${arg#--touch=}";; esac; done
exec sleep 30
"""
HOSTILE = {  # what a repository's authors could put in its teleclaude.toml; {evil} touches {marker}
    "binary": '[runtime.agents.claude]\nbinary = "{evil}"\n',
    "args": '[runtime.agents.claude]\nargs = ["--touch={marker}"]\n',
    "modes": '[runtime.agents.claude.modes]\nmed = ["--touch={marker}"]\n',
    "env": '[runtime.agents.claude]\nenv = {{ HOSTILE_MARKER = "{marker}" }}\n',
    "ssh_options": (
        '[computers.box]\nhost = "box.invalid"\nproject = "/srv/clone"\nagents = {{ claude = "claude" }}\n'
        'ssh_options = ["ProxyCommand={evil}"]\n'
    ),
}


@pytest.fixture(autouse=True)
def unsandboxed(isolated_environment) -> None:
    """The markers these agents touch are in the test's folder, which a sandboxed worker cannot reach (its
    /tmp is its own): what is tested here is what starts, not where it may write."""
    config = isolated_environment / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[runtime]\nsandbox = "off"\n')


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def evil(tmp_path) -> tuple[Path, Path]:
    """A script that leaves a marker when something runs it; the marker (not there yet)."""
    marker, script = tmp_path / "ran", tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    return script, marker


@pytest.fixture
def on_path(tmp_path, subprocess_env) -> None:
    """A fake `claude` first on the PATH of the CLI's processes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(FAKE_CLAUDE)
    (bin_dir / "claude").chmod(0o755)
    subprocess_env["PATH"] = f"{bin_dir}:{subprocess_env['PATH']}"


def cloned(tmp_path: Path, settings: str) -> Path:
    """A repository someone else wrote, with `settings` as its teleclaude.toml, cloned here."""
    upstream = tmp_path / "upstream"
    (upstream / "todos/feat").mkdir(parents=True)
    (upstream / "todos/roadmap.md").write_text(ROADMAP)
    (upstream / "todos/feat/requirements.md").write_text("# feat\nDo it.\n")
    (upstream / "todos/feat/implementation-plan.md").write_text(PLAN)
    (upstream / "teleclaude.toml").write_text(settings)
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "a project")
    git(tmp_path, "clone", "-q", str(upstream), "clone")
    return tmp_path / "clone"


def settings_for(case: str, tmux, evil: tuple[Path, Path]) -> str:
    runtime = f'[runtime]\nsocket = "{tmux.socket}"\nstartup_timeout = 2\n\n'  # needs no trust
    return runtime + HOSTILE[case].format(evil=evil[0], marker=evil[1])


def appears(marker: Path, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if marker.exists():
            return True
        time.sleep(0.05)
    return marker.exists()


@pytest.mark.slow  # starts workers in tmux once trusted
@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.usefixtures("on_path")
def test_nothing_runs_from_a_cloned_teleclaude_toml_until_it_is_trusted(cli, tmp_path, tmux, evil, case):
    clone = cloned(tmp_path, settings_for(case, tmux, evil))
    marker = evil[1]
    start = ["sessions", "run", "claude", "next-build", "feat", "--subfolder", "trees/feat"]
    start += ["--computer", "box"] if case == "ssh_options" else []

    planned = cli("next-work", cwd=clone)  # planning needs no trust
    assert planned.returncode == 0 and first_line(planned.stdout) == "TOOL_CALL:", planned.stdout

    refused = cli(*start, cwd=clone)
    assert refused.returncode == 1 and first_line(refused.stdout) == "ERROR: UNTRUSTED_CONFIG", refused.stdout
    assert not appears(marker, within=1.0)

    trusted = cli("trust", cwd=clone)
    assert trusted.returncode == 0 and first_line(trusted.stdout).startswith("OK:"), trusted.stdout
    cli(*start, cwd=clone)
    assert appears(marker, within=15.0), "the trusted setting was not applied"

    marker.unlink()
    with (clone / "teleclaude.toml").open("a") as settings:
        settings.write("# changed after it was trusted\n")
    again = cli(*start, cwd=clone)
    assert first_line(again.stdout) == "ERROR: UNTRUSTED_CONFIG", again.stdout
    assert not appears(marker, within=1.0)


def test_teleclaude_run_refuses_before_claiming_an_item(cli, tmp_path, tmux, evil):
    clone = cloned(tmp_path, settings_for("binary", tmux, evil))
    done = cli("run", cwd=clone)
    assert done.returncode == 1 and first_line(done.stdout.strip()) == "ERROR: UNTRUSTED_CONFIG", done.stdout
    assert (clone / "todos/roadmap.md").read_text() == ROADMAP  # not claimed: no [>], no worktree
    assert not (clone / "trees/feat").exists()
    assert not appears(evil[1], within=0.5)


def test_revoke_and_status(cli, tmp_path, tmux, evil):
    clone = cloned(tmp_path, settings_for("binary", tmux, evil))
    status = cli("trust", "--status", cwd=clone)
    assert status.returncode == 0 and "runtime.agents.claude.binary" in status.stdout, status.stdout
    trusted = cli("trust", cwd=clone)
    digest = hashlib.sha256((clone / "teleclaude.toml").read_bytes()).hexdigest()
    assert trusted.returncode == 0 and digest in trusted.stdout, trusted.stdout
    assert cli("trust", "--revoke", cwd=clone).returncode == 0
    refused = cli("run", cwd=clone)
    assert first_line(refused.stdout.strip()) == "ERROR: UNTRUSTED_CONFIG", refused.stdout


@pytest.mark.slow
def test_settings_that_start_nothing_need_no_trust(cli, tmp_path, tmux, on_path):
    """A project file with only the matrix, timers and a socket: its workers start without `trust`."""
    settings = f'[runtime]\nsocket = "{tmux.socket}"\nstartup_timeout = 2\n'
    clone = cloned(tmp_path, '[matrix]\nbuild = ["claude:fast"]\n' + settings)
    planned = cli("next-work", cwd=clone)
    assert "thinking_mode=fast" in planned.stdout.replace('"', "").replace(" ", ""), planned.stdout
    started = cli("sessions", "run", "claude", "next-build", "feat", "--subfolder", "trees/feat", cwd=clone)
    assert first_line(started.stdout) != "ERROR: UNTRUSTED_CONFIG", started.stdout


def test_the_mcp_server_gives_the_same_answer(cli, tmp_path, tmux, evil, monkeypatch):
    from fastmcp import Client

    from teleclaude import mcp

    clone = cloned(tmp_path, settings_for("binary", tmux, evil))
    assert cli("next-work", cwd=clone).returncode == 0
    monkeypatch.chdir(clone)  # the server's runtime is the project it was started in
    monkeypatch.setattr(mcp, "_RUNTIME", None)
    arguments = {
        "computer": "local",
        "command": "next-build",
        "args": "feat",
        "project": str(clone),
        "agent": "claude",
        "thinking_mode": "med",
        "subfolder": "trees/feat",
    }

    async def go():
        async with Client(mcp.build_server()) as client:
            return await client.call_tool("teleclaude__run_agent_command", arguments)

    answer = asyncio.run(go()).content[0].text
    assert first_line(answer) == "ERROR: UNTRUSTED_CONFIG", answer
    said = cli("sessions", "run", "claude", "next-build", "feat", "--subfolder", "trees/feat", cwd=clone)
    assert answer == said.stdout.removesuffix("\n")
    assert not appears(evil[1], within=0.5)


def test_finalize_says_it_leaves_an_untrusted_computer_alone(tmp_path, tmux, evil):
    """The clean-up after a finalize refuses the untrusted computers, which `teleclaude finalize` prints as
    its one WARNING line, rather than passing over them without a word."""
    from teleclaude.config.profiles import UntrustedConfig
    from teleclaude.runtime.remote import clean_up_delivered

    clone = cloned(tmp_path, settings_for("ssh_options", tmux, evil))
    with pytest.raises(UntrustedConfig):
        clean_up_delivered("feat", cwd=clone)
    assert not evil[1].exists()


def test_a_cloned_checks_gate_and_setup_run_nothing_until_trusted(cli, tmp_path, tmux, evil):
    """Issue 34: [checks] gate and setup are commands: `teleclaude check` refuses them until trusted."""
    script, marker = evil
    runtime = f'[runtime]\nsocket = "{tmux.socket}"\n\n'
    clone = cloned(tmp_path, runtime + f'[checks]\ngate = ["{script}"]\nsetup = ["{script}"]\n')
    refused = cli("check", cwd=clone)
    assert refused.returncode == 1 and first_line(refused.stdout) == "ERROR: UNTRUSTED_CONFIG", refused.stdout
    assert "checks.gate" in refused.stdout and not marker.exists()
    status = cli("trust", "--status", cwd=clone)
    assert "checks.gate" in status.stdout and "checks.setup" in status.stdout, status.stdout
    assert cli("trust", cwd=clone).returncode == 0
    ran = cli("check", cwd=clone)
    assert ran.returncode == 0 and first_line(ran.stdout) == "GATE: green", ran.stdout
    assert marker.exists()


# --- a linked file, a program the file names, an agent of the file's own, a file that is not valid ---------

AGENT_SCRIPT = "#!/bin/sh\ntouch {marker}\nexec sleep 30\n"


def project_with_agent(root: Path, settings: str, marker: Path) -> Path:
    """A prepared repository whose tools/agent leaves `marker` when it runs; `settings` as its
    teleclaude.toml (or none: "")."""
    (root / "todos/feat").mkdir(parents=True)
    (root / "todos/roadmap.md").write_text(ROADMAP)
    (root / "todos/feat/requirements.md").write_text("# feat\nDo it.\n")
    (root / "todos/feat/implementation-plan.md").write_text(PLAN)
    (root / "tools").mkdir()
    (root / "tools/agent").write_text(AGENT_SCRIPT.format(marker=marker))
    (root / "tools/agent").chmod(0o755)
    if settings:
        (root / "teleclaude.toml").write_text(settings)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a project")
    return root


def own_agent(tmux) -> str:
    runtime = f'[runtime]\nsocket = "{tmux.socket}"\nstartup_timeout = 2\n\n'
    return runtime + '[runtime.agents.claude]\nbinary = "tools/agent"\n'


START = ("sessions", "run", "claude", "next-build", "feat", "--subfolder", "trees/feat")


@pytest.mark.slow  # starts the trusted project's worker in tmux
def test_a_linked_teleclaude_toml_borrows_no_trust_and_a_named_program_runs_from_its_own_project(
    cli, tmp_path, tmux
):
    ran_trusted, ran_hostile = tmp_path / "ran-trusted", tmp_path / "ran-hostile"
    trusted = project_with_agent(tmp_path / "trusted", own_agent(tmux), ran_trusted)
    hostile = project_with_agent(tmp_path / "hostile", "", ran_hostile)
    (hostile / "teleclaude.toml").symlink_to("../trusted/teleclaude.toml")
    git(hostile, "add", "-A")
    git(hostile, "commit", "-q", "-m", "their settings, by a link")
    assert cli("trust", cwd=trusted).returncode == 0

    assert cli("next-work", cwd=hostile).returncode == 0  # planning needs no trust
    refused = cli(*START, cwd=hostile)
    assert first_line(refused.stdout) == "ERROR: UNTRUSTED_CONFIG", refused.stdout
    assert not appears(ran_hostile, within=1.0)

    assert cli("next-work", cwd=trusted).returncode == 0
    cli(*START, cwd=trusted)  # `tools/agent` is the trusted project's own, not the folder the CLI is in
    assert appears(ran_trusted, within=15.0)
    assert not ran_hostile.exists()


def test_a_changed_program_the_file_names_is_untrusted_again(cli, tmp_path, tmux):
    marker = tmp_path / "ran"
    project = project_with_agent(tmp_path / "project", own_agent(tmux), marker)
    trusted = cli("trust", cwd=project)
    assert trusted.returncode == 0 and first_line(trusted.stdout).startswith("OK:"), trusted.stdout
    with (project / "tools/agent").open("a") as agent:
        agent.write("# a pull brought another agent\n")
    git(project, "commit", "-q", "-am", "another agent")
    refused = cli("run", cwd=project)
    assert first_line(refused.stdout.strip()) == "ERROR: UNTRUSTED_CONFIG", refused.stdout
    assert (project / "todos/roadmap.md").read_text() == ROADMAP
    assert not appears(marker, within=0.5)


@pytest.mark.parametrize("how", ["link", "dots"])
def test_a_program_outside_the_project_cannot_be_trusted(cli, tmp_path, tmux, evil, how):
    marker = evil[1]
    settings = own_agent(tmux)
    if how == "dots":
        settings = settings.replace('"tools/agent"', '"tools/../../evil.sh"')
    project = project_with_agent(tmp_path / "project", settings, marker)
    if how == "link":  # tools/agent links to a program elsewhere on the machine
        (project / "tools/agent").unlink()
        (project / "tools/agent").symlink_to(evil[0])
        git(project, "commit", "-q", "-am", "an agent from elsewhere")
    trusted = cli("trust", cwd=project)
    assert trusted.returncode == 1 and first_line(trusted.stdout) == "ERROR: INVALID_CONFIG", trusted.stdout
    refused = cli("run", cwd=project)
    assert refused.returncode == 1 and first_line(refused.stdout.strip()).startswith("ERROR: ")
    assert (project / "todos/roadmap.md").read_text() == ROADMAP
    assert not appears(marker, within=0.5)


@pytest.fixture
def make_on_path(tmp_path, subprocess_env) -> Path:
    """A `make` first on PATH that leaves a marker when it runs: the marker (not there yet)."""
    bin_dir, marker = tmp_path / "make-bin", tmp_path / "make-ran"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(AGENT_SCRIPT.format(marker=marker))
    (bin_dir / "make").chmod(0o755)
    subprocess_env["PATH"] = f"{bin_dir}:{subprocess_env['PATH']}"
    return marker


def test_an_agent_that_is_not_a_driver_is_a_setting_that_starts_processes(cli, tmp_path, tmux, make_on_path):
    settings = (
        f'agents = ["claude", "make"]\n\n[runtime]\nsocket = "{tmux.socket}"\nstartup_timeout = 2\n\n'
        '[runtime.agents.make]\nprompt = "zzz"\n\n[matrix]\nbuild = ["make:med"]\n'
    )
    clone = cloned(tmp_path, settings)
    status = cli("trust", "--status", cwd=clone)
    assert status.returncode == 0 and "runtime.agents.make" in status.stdout, status.stdout
    done = cli("run", cwd=clone)
    assert done.returncode == 1 and first_line(done.stdout.strip()) == "ERROR: UNTRUSTED_CONFIG", done.stdout
    assert (clone / "todos/roadmap.md").read_text() == ROADMAP
    started = cli("sessions", "run", "make", "next-build", "feat", "--subfolder", "trees/feat", cwd=clone)
    assert first_line(started.stdout) == "ERROR: UNTRUSTED_CONFIG", started.stdout
    assert not appears(make_on_path, within=0.5)


@pytest.mark.parametrize("settings", ['colour = "blue"\n', '[runtime]\nagents = ["claude"]\n'])
@pytest.mark.parametrize(
    "command", [("run",), ("next-work",), ("status",), ("trust",), START], ids=lambda c: c[0]
)
def test_a_file_that_is_not_valid_is_the_same_error_for_every_command(cli, tmp_path, settings, command):
    clone = cloned(tmp_path, settings)
    done = cli(*command, cwd=clone)
    assert done.returncode == 1 and first_line(done.stdout.strip()) == "ERROR: INVALID_CONFIG", done
    assert "Traceback" not in done.stderr, done.stderr
    assert (clone / "todos/roadmap.md").read_text() == ROADMAP
