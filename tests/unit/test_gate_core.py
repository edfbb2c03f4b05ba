"""The gate's pure rules (planner/core/gate.py) and `[checks]` parsing, by values: verdicts, what a red gate
writes and how the planner reads it back."""

from __future__ import annotations

import pytest

from teleclaude.config.checks import Checks, parse_checks
from teleclaude.config.parse import executable_settings, parse_config
from teleclaude.errors import ErrorCode
from teleclaude.planner.core.gate import (
    CommandResult,
    CommandRun,
    GateRecord,
    GateRun,
    Verdict,
    findings,
    red_streak,
    tail_of,
    verdicts,
)
from teleclaude.planner.core.model import Verdict as ReviewVerdict
from teleclaude.planner.core.review import parse_review

OK = CommandRun("ruff check .", 0, 0.5)
FAILED = CommandRun("pytest -q", 1, 2.0, ("E assert 1 == 2", "1 failed"))
MISSING = CommandRun("nope", None, 0.0, missing="nope: No such file or directory")
TIMED_OUT = CommandRun("pytest -q", None, 900.0, ("collected 3 items",), timed_out=True)


@pytest.mark.parametrize(
    ("results", "changed", "verdict"),
    [
        ((CommandResult(OK),), (), Verdict.GREEN),
        ((CommandResult(OK), CommandResult(FAILED, FAILED)), (), Verdict.RED),
        ((CommandResult(FAILED, OK),), (), Verdict.FLAKY),
        ((CommandResult(TIMED_OUT, TIMED_OUT),), (), Verdict.RED),
        ((CommandResult(MISSING),), (), Verdict.BROKEN),
        ((CommandResult(OK),), ("src/x.py",), Verdict.BROKEN),
    ],
)
def test_verdicts(results, changed, verdict):
    run = GateRun(results, changed)
    assert run.verdict is verdict
    assert run.passed is (verdict in (Verdict.GREEN, Verdict.FLAKY))


def test_a_red_gate_writes_findings_the_planner_reads_as_changes_requested_naming_the_command():
    run = GateRun((CommandResult(OK), CommandResult(FAILED, FAILED)), where="main + x")
    review = parse_review(findings("x", run))
    assert review.verdict is ReviewVerdict.CHANGES_REQUESTED and not review.why
    assert review.gate.startswith("`pytest -q` exit status 1")
    assert "E assert 1 == 2" in findings("x", run)


def test_the_output_keeps_its_last_lines_only():
    data = b"".join(f"line {i}\n".encode() for i in range(1000))
    assert tail_of(data) == tuple(f"line {i}" for i in range(970, 1000))
    assert tail_of(b"") == ()


def test_an_items_gate_runs_in_one_line_and_its_red_streak():
    def at(kind, verdict):
        return GateRecord("x", kind, verdict, 1.0, f"gate {verdict.value}: `pytest -q` exit status 1", 0.0)

    runs = (at("finalize", Verdict.GREEN), at("turn", Verdict.RED), at("finalize", Verdict.RED))
    assert red_streak(runs) == 1 and red_streak(runs[:1]) == 0
    line = verdicts(runs)
    assert line.startswith("gate: green 1.0s (finalize), red 1.0s (turn), red 1.0s (finalize)")
    assert "pytest -q" in line


def test_checks_are_parsed_and_their_commands_are_executable_settings():
    assert parse_checks("t", {"gate": "pytest -q", "timeout": 5}) == Checks(("pytest -q",), (), 5.0)
    for bad in ({"gate": ["pytest 'x"]}, {"gate": [""]}, {"gate": [1]}, {"timeout": -1}, {"other": 1}):
        with pytest.raises(ValueError) as raised:
            parse_checks("t", bad)
        assert getattr(raised.value, "code", None) is ErrorCode.INVALID_CONFIG
    text = '[checks]\ngate = ["pytest -q"]\nsetup = ["uv sync"]\ntimeout = 60\n'
    assert executable_settings("p", text) == {"checks.gate": ["pytest -q"], "checks.setup": ["uv sync"]}
    held = parse_config([("p", text)], untrusted=("p",))
    assert held.checks == Checks(timeout=60.0) and held.gate_withheld() is not None
    trusted = parse_config([("p", text)])
    assert trusted.checks == Checks(("pytest -q",), ("uv sync",), 60.0) and trusted.gate_withheld() is None
