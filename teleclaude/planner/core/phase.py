"""`teleclaude status`: where each roadmap item stands, derived by asking the planner's own decision order.

`phase_of` runs `decide_work` (and `decide_prepare` for unprepared items) on the same `Facts` and names the
step it would take; effects are never applied, so deriving a phase changes nothing. `render_board` prints
the result for an 80-column terminal, each item in progress followed by its worker's last tool uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.core.decide import (
    Facts,
    decide_prepare,
    decide_work,
    not_the_planners,
    open_dependencies,
)
from teleclaude.planner.core.gate import GateRecord, verdicts
from teleclaude.planner.core.layout import ROADMAP
from teleclaude.planner.core.lint import Finding
from teleclaude.planner.core.model import (
    Action,
    AgentReport,
    Complete,
    Dispatch,
    Marker,
    Roadmap,
    RoadmapItem,
    RunYourself,
    Step,
    WorktreeState,
)
from teleclaude.planner.core.render import usage_by_agent, usage_text
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration, format_utc


class Stage(Enum):
    NEEDS_REQUIREMENTS = "needs requirements"  # also a `[ ]` item with nothing written for it yet
    NEEDS_PLAN = "needs plan"
    PREPARED = "prepared"  # next_work would create its worktree
    BUILDING = "building"
    NEEDS_COMMIT = "needs commit"
    REVIEWING = "reviewing"
    FIXING = "fixing"
    FINALIZING = "finalizing"
    DONE = "done"
    BLOCKED = "blocked"  # `[ ]` waiting for open dependencies
    STUCK = "stuck"  # the planner answers with an error a human must resolve, or lint finds one on its line


_BY_STEP = {
    Step.COMMIT: Stage.NEEDS_COMMIT,
    Step.BUILD: Stage.BUILDING,
    Step.REVIEW: Stage.REVIEWING,
    Step.FIX: Stage.FIXING,
    Step.FINALIZE: Stage.FINALIZING,
    Step.FIX_MERGE: Stage.FIXING,
    Step.REQUIREMENTS: Stage.NEEDS_REQUIREMENTS,
    Step.PLAN: Stage.NEEDS_PLAN,
}


@dataclass(frozen=True)
class Phase:
    stage: Stage
    # "7/12" (building), "round 2" (fixing), "by a, b" (blocked), an error or lint code (stuck)
    detail: str = ""

    @property
    def label(self) -> str:
        return f"{self.stage.value} {self.detail}".strip()


@dataclass(frozen=True)
class Row:
    item: RoadmapItem
    phase: Phase
    worktree: str  # "" (none), "clean", "3 changed", "broken"
    tools: tuple[str, ...] = ()  # its worker's last tool uses, `Read: src/x.py (1m ago)`, already escaped
    gates: tuple[GateRecord, ...] = ()  # its [checks] gate runs, oldest first


@dataclass(frozen=True)
class Board:
    project: str
    rows: tuple[Row, ...]
    agents: AgentReport | None
    problems: int = 0  # roadmap lines with a lint error (see `teleclaude lint`)
    main_changes: tuple[str, ...] = ()  # uncommitted outside todos/: no new item starts, no finalize merges
    gated: str = ""  # whether merges into main are gated by [checks], in one line


def board(
    facts: Facts,
    roadmap: Roadmap,
    agents: AgentReport | None,
    tools: Mapping[str, Sequence[str]] | None = None,  # slug -> its worker's last tool uses (tool_lines)
    findings: Iterable[Finding] = (),  # lint's of the roadmap: an open item with an error there is stuck
    gates: Mapping[str, tuple[GateRecord, ...]] | None = None,  # slug -> its gate runs
    gated: str = "",
) -> Board:
    tools, gates = tools or {}, gates or {}
    errors: dict[int, str] = {}
    for finding in findings:
        if finding.path == ROADMAP and finding.is_error:
            errors.setdefault(finding.line, finding.code)
    rows = tuple(
        Row(
            item,
            _lint_stuck(item, errors) or phase_of(facts, roadmap, item),
            worktree_label(facts, item.slug),
            tuple(tools.get(item.slug, ())),
            gates.get(item.slug, ()),
        )
        for item in roadmap.items
    )
    return Board(facts.project, rows, agents, len(errors), not_the_planners(facts.main_changes()), gated)


def _lint_stuck(item: RoadmapItem, errors: Mapping[int, str]) -> Phase | None:
    """An open item whose roadmap line lint calls an error (a misspelled `(afer: x)`, a duplicate) is not
    what its author meant: it shows as stuck with lint's code, whatever the planner would do with it."""
    code = errors.get(item.line)
    return Phase(Stage.STUCK, code) if code and item.marker is not Marker.DONE else None


def phase_of(facts: Facts, roadmap: Roadmap, item: RoadmapItem) -> Phase:
    slug = item.slug
    if item.marker is Marker.DONE or facts.archive(slug):
        return Phase(Stage.DONE)
    if item.marker is Marker.PENDING:
        waiting = open_dependencies(roadmap, item, lambda dep: bool(facts.archive(dep)))
        if waiting:
            return Phase(Stage.BLOCKED, "by " + ", ".join(waiting))
        if not facts.has_requirements(slug) and facts.plan(slug) is None:
            return Phase(Stage.NEEDS_REQUIREMENTS)
    decision = decide_work(facts, slug)
    if decision.action is None:  # it would create the worktree first
        return Phase(Stage.PREPARED)
    return _phase_of_action(facts, slug, decision.action)


def _phase_of_action(facts: Facts, slug: str, action: Action) -> Phase:
    match action:
        case Dispatch(step=step) | RunYourself(step=step):
            return _phase_of_step(facts, slug, step)
        case Complete():
            return Phase(Stage.DONE)
        case Error(code=ErrorCode.NOT_PREPARED):
            prepare = decide_prepare(facts, slug).action
            if isinstance(prepare, (Dispatch, RunYourself)):
                return _phase_of_step(facts, slug, prepare.step)
            return Phase(Stage.STUCK, "git ignores its files")
        case Error(code=code):
            return Phase(Stage.STUCK, code.value)
    return Phase(Stage.STUCK)


def _phase_of_step(facts: Facts, slug: str, step: Step) -> Phase:
    stage = _BY_STEP.get(step, Stage.STUCK)
    if stage is Stage.BUILDING:
        plan = facts.plan(slug)
        assert plan is not None  # decide_work builds only a prepared item, and a prepared item has a plan
        return Phase(stage, f"{plan.build_tasks - plan.open_build_tasks}/{plan.build_tasks}")
    if stage is Stage.FIXING:
        return Phase(stage, f"round {facts.review_rounds(slug) + 1}")
    return Phase(stage)


def worktree_label(facts: Facts, slug: str) -> str:
    state = facts.worktree(slug).state
    if state is WorktreeState.ABSENT:
        return ""
    if state in (WorktreeState.BROKEN, WorktreeState.UNFINISHED):
        return str(state.value)  # mypy forgets the value's type of an enum narrowed to some members
    changes = len(facts.worktree_changes(slug))
    return f"{changes} changed" if changes else "clean"


# --- rendering --------------------------------------------------------------------------------------

_COLOURS = {
    Stage.DONE: "32",
    Stage.BLOCKED: "31",
    Stage.STUCK: "31;1",
    Stage.NEEDS_COMMIT: "33",
    Stage.BUILDING: "36",
    Stage.REVIEWING: "36",
    Stage.FIXING: "36",
    Stage.FINALIZING: "36",
    Stage.NEEDS_REQUIREMENTS: "2",
}
_SLUG_MAX, _WORKTREE_MIN = 32, 10


def render_board(data: Board, width: int = 80, color: bool = False) -> str:
    slug_width = min(_SLUG_MAX, max((len(r.item.slug) for r in data.rows), default=4))
    room = max(8, width - 4 - slug_width - 4 - _WORKTREE_MIN)
    phase_width = min(room, max((len(r.phase.label) for r in data.rows), default=5))
    lines = [_fit(f"    {'ITEM':<{slug_width}}  {'PHASE':<{phase_width}}  WORKTREE", width)]
    for row in data.rows:
        slug = _clip(printable(row.item.slug), slug_width)
        phase = _clip(printable(row.phase.label), phase_width)
        tree = _clip(printable(row.worktree), max(0, width - 4 - slug_width - 2 - phase_width - 2))
        painted = _paint(f"{phase:<{phase_width}}", _COLOURS.get(row.phase.stage), color)
        lines.append(f"[{row.item.marker.value}] {slug:<{slug_width}}  {painted}  {tree}".rstrip())
        lines += [_fit(f"    {line}", width) for line in row.tools]  # as `sessions list` shows them
        if row.gates:
            lines.append(_fit(f"    {printable(verdicts(row.gates))}", width))
    if not data.rows:
        lines.append("(no items in todos/roadmap.md)")
    if data.problems:
        lines.append(_fit(f"{data.problems} roadmap line(s) with errors: run `teleclaude lint`", width))
    if data.main_changes:
        shown = ", ".join(printable(path) for path in data.main_changes[:5])
        more = f" and {len(data.main_changes) - 5} more" if len(data.main_changes) > 5 else ""
        lines += [
            f"WARNING: the main checkout has uncommitted changes ({shown}{more}):",
            "  next-work starts no new item and no finalize merges until they are committed or moved away",
        ]
    if data.gated:
        lines.append(_fit(printable(data.gated), width))
    if data.agents is not None:
        lines += ["", *(_fit(line, width) for line in _agent_lines(data.agents, width))]
    return "\n".join(lines)


def _agent_lines(report: AgentReport, width: int) -> list[str]:
    """One line per agent, its usage after it, or on a line of its own below when both do not fit."""
    out = {u.agent: u for u in report.unavailable}
    usage = usage_by_agent(report)
    lines = []
    for agent in report.agents:
        u = out.get(agent)
        if u is None:
            line = f"{printable(agent):<8} available"
        else:
            why = f", {printable(u.reason)}" if u.reason else ""
            left = format_duration((u.until - report.now).total_seconds(), "m")
            line = f"{printable(agent):<8} unavailable, {left} left (until {format_utc(u.until)}{why})"
        used = usage_text(usage.get(agent, ()), report.now, report.zone)
        if not used:
            lines.append(line)
        elif len(line) + 3 + len(used) <= width:
            lines.append(f"{line} · {used}")
        else:
            lines += [line, f"{'':<8} {used}"]
    return lines


def board_dict(data: Board) -> dict[str, object]:
    agents: list[dict[str, object]] = []
    if data.agents is not None:
        out = {u.agent: u for u in data.agents.unavailable}
        usage = usage_by_agent(data.agents)
        for agent in data.agents.agents:
            u = out.get(agent)
            agents.append(
                {
                    "agent": agent,
                    "available": u is None,
                    "until": format_utc(u.until) if u else None,
                    "minutes_left": max(0, int((u.until - data.agents.now).total_seconds() // 60))
                    if u
                    else None,
                    "reason": u.reason if u else None,
                    "usage": [
                        {
                            "window": w.window,
                            "used_percent": w.used_percent,
                            "resets_at": format_utc(w.resets_at) if w.resets_at else None,
                            "seen_at": format_utc(w.seen_at),
                        }
                        for w in usage.get(agent, ())
                    ],
                }
            )
    return {
        "project": data.project,
        "items": [
            {
                "slug": r.item.slug,
                "marker": r.item.marker.value,
                "line": r.item.line,
                "phase": r.phase.label,
                "stage": r.phase.stage.value,
                "detail": r.phase.detail or None,
                "worktree": r.worktree or None,
                "recent_tools": list(r.tools),
                "gates": [
                    {"kind": g.kind, "verdict": g.verdict.value, "seconds": g.seconds, "summary": g.summary}
                    for g in r.gates
                ],
            }
            for r in data.rows
        ],
        "problems": data.problems,
        "main_changes": list(data.main_changes),
        "gated": data.gated or None,
        "agents": agents,
    }


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _fit(line: str, width: int) -> str:
    return _clip(line, width)


def _paint(text: str, code: str | None, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color and code else text
