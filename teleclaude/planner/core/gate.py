"""The gate's values and rules (pure): a command's run, a gate's verdict, and what a red gate writes.

A gate runs the project's `[checks] gate` commands in order and stops at the first that fails. A command
that fails and passes when run again at once is *flaky*: it does not block, and is recorded and shown. A
command that cannot start (not found) or a gate that changes tracked files is *broken*: not the item's
fault, so nothing is sent back, the user is told.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from teleclaude.planner.core.terminal import printable

TAIL_LINES = 30  # of a command's output, kept and shown
TAIL_LINE_LENGTH = 400
GATE_LINE = "Gate: "  # the line of a red gate's review-findings.md that names the failing command


class Verdict(Enum):
    GREEN = "green"
    FLAKY = "flaky"  # green, after one immediate retry of a failed command
    RED = "red"
    BROKEN = "broken"  # a command could not start, or the gate changed tracked files


@dataclass(frozen=True)
class CommandRun:
    command: str
    status: int | None  # the exit status; None when it was killed at its timeout or never started
    seconds: float
    tail: tuple[str, ...] = ()  # the last lines of its output (stdout and stderr together)
    output_bytes: int = 0  # all it printed, counted (only the tail is kept)
    timed_out: bool = False
    missing: str = ""  # why it could not start (not found, not executable)

    @property
    def passed(self) -> bool:
        return self.status == 0

    def result(self) -> str:
        if self.missing:
            return f"could not start: {self.missing}"
        if self.timed_out:
            return f"killed at its timeout after {self.seconds:.0f} s"
        return "passed" if self.passed else f"exit status {self.status}"


@dataclass(frozen=True)
class CommandResult:
    """A command of the gate: its run, and the immediate retry of a failed run."""

    first: CommandRun
    retry: CommandRun | None = None

    @property
    def passed(self) -> bool:
        return self.first.passed or (self.retry is not None and self.retry.passed)

    @property
    def flaky(self) -> bool:
        return not self.first.passed and self.passed

    @property
    def last(self) -> CommandRun:
        return self.retry or self.first


@dataclass(frozen=True)
class GateRun:
    results: tuple[CommandResult, ...] = ()
    changed: tuple[str, ...] = ()  # tracked files the gate changed (or deleted)
    where: str = ""  # what was gated: "main + slug", a worktree
    extra: tuple[str, ...] = field(default=())  # what stopped it before a command (setup failed, …)

    @property
    def verdict(self) -> Verdict:
        if self.extra or self.changed or any(r.first.missing for r in self.results):
            return Verdict.BROKEN
        if not all(r.passed for r in self.results):
            return Verdict.RED
        return Verdict.FLAKY if any(r.flaky for r in self.results) else Verdict.GREEN

    @property
    def passed(self) -> bool:
        return self.verdict in (Verdict.GREEN, Verdict.FLAKY)

    @property
    def seconds(self) -> float:
        return sum(r.first.seconds + (r.retry.seconds if r.retry else 0.0) for r in self.results)

    @property
    def failing(self) -> CommandResult | None:
        return next((r for r in self.results if not r.passed), None)

    @property
    def flaky_commands(self) -> tuple[str, ...]:
        return tuple(r.first.command for r in self.results if r.flaky)

    def summary(self) -> str:
        """One line: the verdict, its time, and the command that decided it."""
        verdict = self.verdict
        said = f"gate {verdict.value} in {self.seconds:.1f} s"
        failing = self.failing
        if self.changed:
            return f"{said}: it changed tracked files ({', '.join(self.changed[:5])})"
        if self.extra:
            return f"{said}: {self.extra[0]}"
        if failing is not None:
            return f"{said}: `{failing.first.command}` {failing.last.result()}"
        if verdict is Verdict.FLAKY:
            return f"{said}; flaky: {', '.join(f'`{c}`' for c in self.flaky_commands)}"
        return said


def command_lines(result: CommandResult) -> list[str]:
    """A command's result, time and last lines, as `teleclaude check` prints them (escaped)."""
    lines = []
    for label, run in (("", result.first), ("retry: ", result.retry)):
        if run is None:
            continue
        flaky = " (flaky: it passed when run again)" if label and result.flaky else ""
        counted = f", {run.output_bytes} bytes of output" if run.output_bytes else ""
        took = f"{run.result()} in {run.seconds:.1f} s{counted}{flaky}"
        lines.append(f"{label}{printable(run.command)}: {took}")
        if not run.passed:
            lines += [f"  | {printable(line)}" for line in run.tail]
    return lines


def findings(slug: str, run: GateRun) -> str:
    """review-findings.md for a red gate: a Critical finding and REQUEST CHANGES, as a reviewer writes."""
    failing = run.failing
    assert failing is not None
    last = failing.last
    shown = "\n".join(f"    {line}" for line in last.tail) or "    (no output)"
    return (
        f"# Review findings: {slug}\n\n"
        f"Reviewed: by teleclaude's gate ([checks] gate in teleclaude.toml), on {run.where}\n\n"
        f"{GATE_LINE}`{failing.first.command}` {last.result()}\n\n"
        "## Critical\n\n"
        f"- The gate failed on the tree that would become main: `{failing.first.command}` "
        f"{last.result()} (run twice). Its last lines:\n\n{shown}\n\n"
        "  Make it pass (run `teleclaude check` in the worktree to see it again), then delete this file.\n\n"
        "## Important\n\nNone.\n\n## Suggestions\n\nNone.\n\n"
        "## Verdict\n\n- [ ] APPROVE\n- [x] REQUEST CHANGES\n"
    )


def gate_line(text: str) -> str:
    """The failing command a red gate's review-findings.md names, or ""."""
    for line in text.splitlines():
        if line.startswith(GATE_LINE):
            return line[len(GATE_LINE) :].strip()
    return ""


def tail_of(data: bytes, lines: int = TAIL_LINES) -> tuple[str, ...]:
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    kept = [line[:TAIL_LINE_LENGTH] for line in text.rstrip("\n").split("\n")][-lines:]
    return tuple(kept) if text.strip() else ()


@dataclass(frozen=True)
class GateRecord:
    slug: str
    kind: str  # "finalize", "turn" (a builder's or fixer's finished turn), "check", "setup"
    verdict: Verdict
    seconds: float
    summary: str
    at: float  # epoch seconds


def verdicts(entries: tuple[GateRecord, ...], limit: int = 5) -> str:
    """An item's last gate runs in one short line: `gate: red 3.1s (turn), green 2.2s (finalize)`; the last
    run that was not green names its command."""
    if not entries:
        return ""
    shown = ", ".join(f"{e.verdict.value} {e.seconds:.1f}s ({e.kind})" for e in entries[-limit:])
    last = entries[-1]
    why = f": {last.summary.split(': ', 1)[-1]}" if last.verdict is not Verdict.GREEN else ""
    return f"gate: {shown}{why}"


def red_streak(entries: tuple[GateRecord, ...]) -> int:
    """Red finalize gates since the last green or flaky one: how often the item was sent back in a row."""
    count = 0
    for entry in reversed([e for e in entries if e.kind == "finalize"]):
        if entry.verdict is not Verdict.RED:
            break
        count += 1
    return count
