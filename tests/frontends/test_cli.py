"""The command line as a process: exit codes, --json, --cwd, the agents verbs, and what it must not import."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta, timezone

import pytest

from teleclaude.agents import NAMES

PREPARED = "alpha-feature"
UNPREPARED = "beta-feature"
JSON_KEYS = {"kind", "code", "slug", "command", "args", "agent", "thinking_mode", "subfolder", "project"}
JSON_KEYS |= {"note", "reason"}
HEAVY = ("fastmcp", "mcp", "sqlite_utils", "apprise")


def first_line(text: str) -> str:
    return text.splitlines()[0]


# --- next-work / next-prepare ---------------------------------------------------------------------------


def test_next_work_prints_the_tool_call_and_exits_0(project, cli, tool_call_fields, paths_equal):
    done = cli("next-work", cwd=project)
    assert done.returncode == 0, done.stderr
    fields = tool_call_fields(done.stdout)
    assert (fields["command"], fields["args"], fields["subfolder"]) == (
        "next-build",
        PREPARED,
        f"trees/{PREPARED}",
    )
    assert paths_equal(fields["project"], project)
    assert (project / "trees" / PREPARED / ".git").is_file()


def test_cwd_option_names_the_project(project, cli, tool_call_fields, paths_equal, not_a_repo):
    done = cli("next-work", "--cwd", str(project / "todos"), cwd=not_a_repo)
    assert done.returncode == 0, done.stderr
    assert paths_equal(tool_call_fields(done.stdout)["project"], project)


def test_next_prepare_prints_the_architect_call(project, cli, tool_call_fields):
    done = cli("next-prepare", "--cwd", str(project))
    assert done.returncode == 0, done.stderr
    fields = tool_call_fields(done.stdout)
    assert (fields["command"], fields["args"]) == ("next-requirements", UNPREPARED)
    assert "subfolder" not in fields


def test_prepared_exits_0(project, cli):
    done = cli("next-prepare", PREPARED, "--cwd", str(project))
    assert (done.returncode, first_line(done.stdout)) == (0, "PREPARED:")


@pytest.mark.parametrize("command", ["next-work", "next-prepare"])
def test_an_error_exits_1(not_a_repo, cli, command):
    done = cli(command, "--cwd", str(not_a_repo))
    assert done.returncode == 1
    assert first_line(done.stdout) == "ERROR: NOT_A_GIT_REPO"
    assert "Traceback" not in done.stdout + done.stderr


def test_not_prepared_exits_1(project, cli):
    done = cli("next-work", UNPREPARED, "--cwd", str(project))
    assert (done.returncode, first_line(done.stdout)) == (1, "ERROR: NOT_PREPARED")


def test_next_work_dry_run_changes_nothing(project, cli, tool_call_fields):
    roadmap = (project / "todos" / "roadmap.md").read_bytes()
    done = cli("next-work", "--dry-run", "--cwd", str(project), process=True)
    assert done.returncode == 0 and tool_call_fields(done.stdout)["command"] == "next-build"
    assert (project / "todos" / "roadmap.md").read_bytes() == roadmap and not (project / "trees").exists()


def test_the_cli_names_its_own_verbs_as_the_next_step(project, cli):
    """A CLI user is told the CLI verb to run, never an MCP tool to call."""
    unprepared = cli("next-work", UNPREPARED, "--cwd", str(project), process=True)
    assert unprepared.stdout.splitlines()[-1] == f"Next: teleclaude next-prepare {UNPREPARED}"
    marked = cli("agents", "unavailable", "claude", "--cwd", str(project), process=True)
    prepared = cli("next-prepare", "alpha-feature", "--cwd", str(project), process=True)
    for done in (unprepared, marked, prepared):
        assert "teleclaude__" not in done.stdout, done.stdout
    assert "teleclaude next-work" in prepared.stdout and "teleclaude next-work" in marked.stdout


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["no-such-command"],
        ["next-work", "--no-such-option"],
        ["next-work", "a", "b"],
        ["agents", "unavailable"],
        ["agents", "sideways", "gemini"],
        ["mcp", "--port", "eighty"],
    ],
)
def test_bad_usage_exits_2(project, cli, argv):
    done = cli(*argv, cwd=project)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "usage:" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_exits_0(cli):
    done = cli("--help")
    assert done.returncode == 0
    for command in ("next-prepare", "next-work", "agents", "mcp", "demo"):
        assert command in done.stdout


def test_every_command_listed_by_help_has_its_own_help(capsys):
    """A call builds only its own command's parser, importing that command's module alone (a command the
    CLI's table lacks would still run, but every call would import every command's module)."""
    from teleclaude.cli import main
    from teleclaude.cli.parser import commands

    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    names = [command.name for command in commands()]
    assert len(names) == len(set(names)) >= 19
    for name in names:
        assert re.search(rf"^    {re.escape(name)}(\s|$)", listed, re.MULTILINE), name
        assert [command.name for command in commands(name)] == [name]
        assert main([name, "--help"]) == 0, name
        assert capsys.readouterr().out.startswith(f"usage: teleclaude {name} "), name


def test_help_lists_a_users_commands_first_and_the_agents_later(capsys):
    from teleclaude.cli import main

    assert main(["--help"]) == 0
    listed = re.findall(r"^    ([a-z-]+)", capsys.readouterr().out, re.MULTILINE)
    assert listed[:4] == ["run", "status", "board", "report"]
    for agents_verb in ("next-work", "next-prepare", "finalize", "sessions", "supervise", "mcp", "hook"):
        assert listed.index(agents_verb) > listed.index("install"), agents_verb


@pytest.mark.parametrize("name", ["trust", "supervise"])
def test_trust_and_supervise_explain_themselves_in_their_help(capsys, name):
    from teleclaude.cli import main
    from teleclaude.cli.parser import commands

    assert main([name, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    [command] = commands(name)
    assert command.description and " ".join(command.description.split()) in text
    assert len(command.description) > 3 * len(command.help)


def test_no_help_says_an_internal_name(capsys):
    """`next_work` is the MCP tool's name: on the command line it is next-work, or plain words."""
    from teleclaude.cli import main
    from teleclaude.cli.parser import commands

    for command in commands():
        assert main([command.name, "--help"]) == 0
        assert "next_work" not in capsys.readouterr().out, command.name


# --- --json ----------------------------------------------------------------------------------------------


def test_json_of_a_dispatch(project, cli, paths_equal):
    done = cli("next-work", "--cwd", str(project), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == JSON_KEYS
    assert data["kind"] == "dispatch"
    assert data["code"] is None
    assert (data["command"], data["args"], data["slug"]) == ("next-build", PREPARED, PREPARED)
    assert (data["agent"], data["thinking_mode"], data["subfolder"]) == ("gemini", "med", f"trees/{PREPARED}")
    assert paths_equal(data["project"], project)


def test_json_of_prepared(project, cli):
    done = cli("next-prepare", PREPARED, "--cwd", str(project), "--json")
    data = json.loads(done.stdout)
    assert done.returncode == 0
    assert set(data) == JSON_KEYS
    assert (data["kind"], data["slug"]) == ("prepared", PREPARED)


def test_json_of_an_error(not_a_repo, cli):
    done = cli("next-work", "--cwd", str(not_a_repo), "--json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert set(data) == JSON_KEYS
    assert (data["kind"], data["code"]) == ("error", "NOT_A_GIT_REPO")
    assert data["reason"]


# --- agents ---------------------------------------------------------------------------------------------


def agent_rows(table: str) -> dict[str, list[str]]:
    lines = table.split("\n\n")[0].splitlines()  # the usage, when any is known, follows a blank line
    assert lines[0].split() == ["AGENT", "STATUS", "UNTIL", "LEFT", "REASON"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:]}


def usage_rows(table: str) -> dict[str, str]:
    """Each agent's usage as `agents` prints it below the table: `claude -> 5h 83% ↺ 19:00 · 7d 41%`."""
    _, _, below = table.partition("\n\n")
    return {line.split()[0]: line.split(maxsplit=1)[1] for line in below.splitlines()[1:]}


def test_agents_table_marking_and_unmarking(project, cli):
    done = cli("agents", "--cwd", str(project))
    assert done.returncode == 0, done.stderr
    rows = agent_rows(done.stdout)
    assert set(rows) == set(NAMES)  # every agent CLI teleclaude knows
    assert all(row[0] == "available" for row in rows.values())

    until = (datetime.now(UTC) + timedelta(hours=5)).replace(microsecond=0)
    stamp = until.strftime("%Y-%m-%dT%H:%M:%SZ")
    done = cli(
        "agents",
        "unavailable",
        "gemini",
        "--until",
        stamp,
        "--reason",
        "quota_exhausted",
        "--cwd",
        str(project),
    )
    assert done.returncode == 0, done.stderr
    assert first_line(done.stdout).startswith("OK: gemini")
    assert stamp in first_line(done.stdout)

    rows = agent_rows(cli("agents", "--cwd", str(project)).stdout)
    assert rows["gemini"][0] == "unavailable"
    assert rows["gemini"][1] == stamp
    assert rows["gemini"][-1] == "quota_exhausted"
    assert rows["claude"] == ["available"]

    done = cli("agents", "available", "gemini", "--cwd", str(project))
    assert (done.returncode, first_line(done.stdout)) == (0, "OK: gemini is available.")
    assert agent_rows(cli("agents", "--cwd", str(project)).stdout)["gemini"] == ["available"]


def test_cwd_before_the_verb_is_kept(project, cli):
    done = cli("agents", "--cwd", str(project), "unavailable", "codex", "--until", "30m")
    assert done.returncode == 0, done.stderr
    assert agent_rows(cli("agents", cwd=project).stdout)["codex"][0] == "unavailable"


def test_the_default_time_is_one_hour(project, cli):
    done = cli("agents", "unavailable", "claude", cwd=project)
    assert done.returncode == 0, done.stderr
    left = int(agent_rows(cli("agents", cwd=project).stdout)["claude"][2].rstrip("m"))
    assert 55 <= left <= 60


def test_unavailable_builder_makes_next_work_fall_back(project, cli, tool_call_fields):
    assert cli("agents", "unavailable", "gemini", "--until", "2h", cwd=project).returncode == 0
    fields = tool_call_fields(cli("next-work", cwd=project).stdout)
    assert fields["agent"] == "claude"


def record_usage(agent: str, window: str, percent: float, resets_in: timedelta | None) -> datetime | None:
    """`agent`'s `window` used `percent`, as its CLI would report it, into the test's own $TELECLAUDE_DB."""
    from teleclaude.adapters.store import AvailabilityStore
    from teleclaude.planner.core.model import UsageWindow

    now = datetime.now(UTC)
    resets = None if resets_in is None else (now + resets_in).replace(second=0, microsecond=0)
    AvailabilityStore().record_usage([UsageWindow(agent, window, percent, resets, now)])
    return resets


def test_agents_shows_each_agents_usage_in_the_readers_zone(project, cli, subprocess_env, monkeypatch):
    monkeypatch.setitem(subprocess_env, "TZ", "XYZ-5:30")  # POSIX spelling of UTC+05:30, no tz database
    zone = timezone(timedelta(hours=5, minutes=30))
    five_hours = record_usage("claude", "5h", 83.4, timedelta(hours=3))
    seven_days = record_usage("claude", "7d", 41, timedelta(days=3))
    record_usage("gemini", "5h", 95, timedelta(minutes=50))
    record_usage("codex", "primary", 70, timedelta(minutes=-1))  # reset already
    assert five_hours and seven_days
    done = cli("agents", "--cwd", str(project), process=True)
    assert done.returncode == 0, done.stderr
    assert set(agent_rows(done.stdout)) == set(NAMES)
    usage = usage_rows(done.stdout)
    assert set(usage) == {"claude", "gemini"}
    five, seven = usage["claude"].split(" · ")
    assert five == f"5h 83% ↺ {five_hours.astimezone(zone):%H:%M}"
    assert seven == f"7d 41% ↺ {seven_days.astimezone(zone):%a %d %H:%M}"
    assert usage["gemini"].startswith("5h 95% ↺ ") and "90%" in usage["gemini"]  # over the headroom


def test_a_builder_over_its_headroom_hands_the_build_on_until_its_window_resets(
    project, cli, tool_call_fields
):
    record_usage("gemini", "5h", 95, timedelta(hours=2))
    done = cli("next-work", "--dry-run", cwd=project)
    assert tool_call_fields(done.stdout)["agent"] == "claude"
    assert "NOTE:" not in done.stdout
    record_usage("gemini", "5h", 4, timedelta(hours=5))  # the window reset, as its CLI says: no human action
    assert tool_call_fields(cli("next-work", "--dry-run", cwd=project).stdout)["agent"] == "gemini"


def test_the_headroom_of_the_projects_file_applies(project, cli, tool_call_fields):
    record_usage("gemini", "5h", 95, timedelta(hours=2))
    (project / "teleclaude.toml").write_text("[matrix]\nheadroom = 97\n")
    for args in (["add", "teleclaude.toml"], ["commit", "-q", "-m", "settings"]):  # uncommitted: no new item
        subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)
    assert tool_call_fields(cli("next-work", "--dry-run", cwd=project).stdout)["agent"] == "gemini"
    (project / "teleclaude.toml").write_text("[matrix]\nheadroom = 101\n")
    done = cli("next-work", "--dry-run", cwd=project)
    assert (done.returncode, first_line(done.stdout)) == (1, "ERROR: INVALID_CONFIG")


def test_every_builder_over_its_headroom_still_builds_with_the_first_and_says_so(
    project, cli, tool_call_fields
):
    for agent in NAMES:
        record_usage(agent, "7d", 99, timedelta(days=3))
    done = cli("next-work", "--dry-run", cwd=project)
    assert tool_call_fields(done.stdout)["agent"] == "gemini"
    note = done.stdout.split("NOTE:", 1)[1]
    assert "gemini" in note and "99%" in note


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["agents", "unavailable", "hal9000"], "UNKNOWN_AGENT"),
        (["agents", "available", "hal9000"], "UNKNOWN_AGENT"),
        (["agents", "unavailable", "gemini", "--until", "soonish"], "INVALID_TIME"),
        (["agents", "unavailable", "gemini", "--until=-5m"], "INVALID_TIME"),
    ],
)
def test_agent_errors_exit_1(project, cli, argv, code):
    done = cli(*argv, cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert first_line(done.stdout) == f"ERROR: {code}"
    assert "Traceback" not in done.stdout + done.stderr


# --- what the planner paths import ------------------------------------------------------------------------


def imported_modules(stderr: str) -> set[str]:
    """Module names from `python -X importtime` output (`import time: self | cumulative | name`)."""
    names = set()
    for line in stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", line)
        if match:
            names.add(match[1])
    return names


def heavy_imports(names: set[str]) -> set[str]:
    return {name for name in names if name.split(".")[0] in HEAVY}


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["next-work"], set()),
        (["next-work", "--json"], set()),
        (["next-prepare"], set()),
        (["agents"], set()),
        # Writing availability goes through sqlite-utils by design (adapters/store.py); never fastmcp.
        (["agents", "available", "gemini"], {"sqlite_utils"}),
    ],
)
def test_planner_paths_import_no_heavy_library(project, cli, argv, allowed):
    # The first next-work creates the worktree (a write path); the call measured after it only reads.
    assert cli("next-work", "--cwd", str(project)).returncode == 0
    done = cli(*argv, "--cwd", str(project), python_flags=("-X", "importtime"))
    assert done.returncode == 0, done.stdout + done.stderr
    names = imported_modules(done.stderr)
    assert "teleclaude.planner.api" in names  # the parse works
    assert {name.split(".")[0] for name in heavy_imports(names)} <= allowed


@pytest.mark.parametrize(
    ("argv", "spelled_otherwise"),
    [
        (["next-work", "--dry-run", "--json"], ["next-work", "--json", "--dry"]),  # abbreviated: argparse's
        (["next-prepare", PREPARED], ["next-prepare", PREPARED, "--cw"]),
    ],
)
def test_the_planner_s_step_needs_no_parser_and_answers_as_the_parser_does(
    project, cli, argv, spelled_otherwise
):
    assert cli("next-work", "--cwd", str(project)).returncode == 0  # the worktree made: what follows reads
    done = cli(*argv, "--cwd", str(project), python_flags=("-X", "importtime"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "argparse" not in imported_modules(done.stderr)
    parsed = cli(
        *spelled_otherwise,
        *(() if "--cw" in spelled_otherwise else ("--cwd",)),
        str(project),
        python_flags=("-X", "importtime"),
    )
    assert "argparse" in imported_modules(parsed.stderr)
    assert (parsed.returncode, parsed.stdout) == (done.returncode, done.stdout)


# --- in process ------------------------------------------------------------------------------------------


def test_main_returns_the_exit_code_in_process(project, capsys):
    from teleclaude.cli import main

    assert main(["next-prepare", "alpha-feature", "--cwd", str(project)]) == 0
    assert capsys.readouterr().out.startswith("PREPARED:")
    assert main(["agents", "available", "hal9000", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.startswith("ERROR: UNKNOWN_AGENT")
    assert main(["next-work", "--no-such-option"]) == 2
    assert main(["--version"]) == 0


def test_debug_logging_goes_to_stderr(project, cli, subprocess_env, monkeypatch):
    monkeypatch.setitem(subprocess_env, "TELECLAUDE_DEBUG", "1")
    done = cli("next-prepare", "--cwd", str(project), process=True)
    assert done.returncode == 0
    assert done.stdout.startswith("TOOL_CALL:")
    assert "DEBUG" in done.stderr
