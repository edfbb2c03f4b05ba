"""Text from users and agents reaches a terminal escaped: no ANSI/OSC sequence, C0/C1 control or forged line
survives in `agents`, `status`, the `OK:` line or a session's summary; reasons are short; invalid UTF-8 is
a coded error."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.agents import NAMES
from teleclaude.cli.run import Console
from teleclaude.planner.core.model import AgentReport, Unavailability, UsageWindow
from teleclaude.planner.core.phase import Board, render_board
from teleclaude.planner.core.render import to_text
from teleclaude.runtime.core.session_render import session_text
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.orchestrator import Progress

from .conftest import first_line

CLEAR_AND_TITLE = "\x1b[2J\x1b[H\x1b]0;pwned\x07"
FORGED_ROW = "quota\ngemini     available"
HOSTILE = [CLEAR_AND_TITLE, FORGED_ROW, "a\x9b2Jb", "\rcodex", "right\u202eleft", "tab\there", "del\x7f"]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


# what a terminal acts on: C0 (but our own line breaks), DEL, C1, line separators, bidi overrides, surrogates
OBEYED = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _obeyed(text: str) -> list[str]:
    return OBEYED.findall(text)


@pytest.mark.parametrize("text", [*HOSTILE, "\udcff"])
def test_printable_leaves_nothing_a_terminal_obeys(text):
    from teleclaude.planner.core.terminal import printable

    assert _obeyed(printable(text)) == []
    assert "\n" not in printable(text)


@pytest.mark.parametrize("reason", HOSTILE)
def test_the_agent_table_shows_a_hostile_reason_escaped_on_one_row(reason):
    report = AgentReport(
        ("claude", "gemini"), (Unavailability("claude", NOW + timedelta(hours=1), reason),), NOW
    )
    text = to_text(report)
    assert _obeyed(text) == []
    assert len(text.splitlines()) == 3


@pytest.mark.parametrize("window", HOSTILE)
def test_a_hostile_window_name_a_cli_reported_is_shown_escaped_on_its_agents_row(window):
    usage = (UsageWindow("claude", window, 50, NOW + timedelta(hours=1), NOW),)
    report = AgentReport(("claude", "gemini"), (), NOW, usage, 90)
    for text in (to_text(report), render_board(Board("/p", (), report))):
        assert _obeyed(text) == []
        assert len([line for line in text.splitlines() if "50%" in line]) == 1
    assert len(to_text(report).splitlines()) == 6  # the table, a blank line, the usage heading and row


@pytest.mark.parametrize("status", HOSTILE)
def test_a_session_summary_shows_a_worker_status_escaped(status):
    session = _worker(status)
    text = session_text([session])
    assert _obeyed(text) == []
    assert len(text.splitlines()) == 2


@pytest.mark.parametrize("reason", HOSTILE)
def test_agents_and_the_ok_line_print_a_hostile_reason_escaped(cli, reason):
    marked = cli("agents", "unavailable", "claude", "--reason", reason)
    assert marked.returncode == 0, marked.stdout
    assert first_line(marked.stdout).startswith("OK: claude is unavailable")
    assert _obeyed(marked.stdout) == []
    table = cli("agents").stdout
    assert _obeyed(table) == []
    assert [line.split()[0] for line in table.splitlines()] == ["AGENT", *NAMES]


def test_status_prints_a_hostile_reason_escaped(cli, tmp_path):
    repo = tmp_path / "repo"
    (repo / "todos").mkdir(parents=True)
    (repo / "todos" / "roadmap.md").write_text("# Roadmap\n\n- [ ] alpha — first\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    cli("agents", "unavailable", "claude", "--reason", CLEAR_AND_TITLE + "x" * 200)
    done = cli("status", "--cwd", str(repo))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "claude" in done.stdout
    assert _obeyed(done.stdout) == []


def test_a_reason_is_at_most_500_characters(cli):
    assert cli("agents", "unavailable", "claude", "--reason", "r" * 500).returncode == 0
    done = cli("agents", "unavailable", "claude", "--reason", "r" * 501)
    assert (done.returncode, first_line(done.stdout)) == (1, "ERROR: INVALID_ARGUMENT")


def test_invalid_utf8_in_a_reason_is_a_coded_error(subprocess_env, tmp_path):
    done = subprocess.run(
        [
            sys.executable.encode(),
            b"-m",
            b"teleclaude",
            b"agents",
            b"unavailable",
            b"claude",
            b"--reason",
            b"\xff\xfe",
        ],
        cwd=tmp_path,
        env=subprocess_env,
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, first_line(done.stdout.decode())) == (1, "ERROR: INVALID_ARGUMENT")


@pytest.mark.parametrize("status", HOSTILE)
def test_the_run_status_line_and_log_show_a_worker_status_escaped(status, capsys):
    err = io.StringIO()
    console = Console(err)
    console.status(Progress(1, _worker(status), 12.0))
    assert _obeyed(err.getvalue().rstrip("\n")) == []
    assert len(err.getvalue().splitlines()) == 1
    console.show(f"    abcd1234 turn_ended: {status}")
    assert _obeyed(capsys.readouterr().out.rstrip("\n")) == []  # its line breaks are run's own: kept


def _worker(status: str) -> Session:
    return Session(
        "abcd1234",
        "claude",
        "next-build",
        "x",
        "/p",
        None,
        SessionState.RUNNING,
        NOW,
        NOW,
        status_text=status,
    )
