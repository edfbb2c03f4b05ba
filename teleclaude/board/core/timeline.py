"""A run's timeline: one row per item, one bar per worker session, coloured by agent; and its HTML page.

Pure: built from the run's session records and their events (the session store keeps both), `now` given for
a run still going. A bar's work runs from the moment its command was typed to the session's last change (to
`now` while it lives); a worker started ahead of its step (`teleclaude run` starts the likely next one while
the step before works) waited at its prompt before that, and that wait is drawn apart, never counted as
work; a worker started ahead and ended unneeded did no step and has no bar. A `rate_limited` event is a
limit mark, a session that takes over its step from one that hit a limit with another agent is a fallback
mark, and the time between one step of an item and the start of its next step's work is a wait. The page is
one self-contained file: inline CSS and SVG, no script, no URL.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from teleclaude.agents import PROFILES
from teleclaude.agents.tokens import Tokens
from teleclaude.config.spend import SpendConfig
from teleclaude.planner.core.gate import GateRecord, Verdict
from teleclaude.planner.core.model import Step
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.core.timeparse import format_duration, format_utc
from teleclaude.runtime.core.sessions import Event, EventKind, Session, SessionState
from teleclaude.runtime.core.spend import Total
from teleclaude.runtime.core.supervision import bare_command

FIX = Step.FIX.command  # a fix round's step
OTHER_COLOURS = ("#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f")


class MarkKind(Enum):
    LIMIT = "limit"  # the worker hit a rate limit
    FALLBACK = "fallback"  # its step went on with another agent after a limit
    REMINDER = "reminder"  # no progress: the runtime typed a reminder


@dataclass(frozen=True)
class Mark:
    kind: MarkKind
    at: datetime
    detail: str = ""


@dataclass(frozen=True)
class Bar:
    session_id: str
    step: str  # next-build, next-review, …
    agent: str
    computer: str
    start: datetime  # its worker started
    end: datetime
    outcome: str  # the session's state: done, errored, cancelled, rate_limited, running, …
    live: bool
    marks: tuple[Mark, ...] = ()
    began: datetime | None = None  # its command typed (None: at `start`); it waited at its prompt before
    tokens: Tokens | None = None  # what it used, as its stop hook last read it (None: unknown)
    resumed_from: str = ""  # the session whose conversation it went on with (runtime/core/continuation.py)
    handed_over_from: str = ""  # the session whose step it took over from another agent, with a note

    @property
    def start_kind(self) -> str:
        """How its worker began: `resumed`, `handed_over` or `fresh`."""
        return "resumed" if self.resumed_from else "handed_over" if self.handed_over_from else "fresh"

    @property
    def work_start(self) -> datetime:
        return min(self.end, max(self.start, self.began or self.start))

    @property
    def seconds(self) -> float:
        """Its work: from its command to its end."""
        return max(0.0, (self.end - self.work_start).total_seconds())

    @property
    def ahead(self) -> float:
        """Seconds it waited at its prompt for its step (started ahead), before its command."""
        return (self.work_start - self.start).total_seconds()


@dataclass(frozen=True)
class Row:
    slug: str
    bars: tuple[Bar, ...]  # by start
    gates: tuple[GateRecord, ...] = ()  # its [checks] gate runs during the run

    @property
    def waits(self) -> tuple[tuple[datetime, datetime], ...]:
        """The gaps between one step of the item and its next step's work."""
        return tuple(
            (a.end, b.work_start)
            for a, b in zip(self.bars, self.bars[1:], strict=False)
            if b.work_start > a.end
        )


@dataclass(frozen=True)
class Timeline:
    run_id: str
    project: str
    start: datetime
    end: datetime  # the run's end, or now while it runs
    outcome: str  # "" while it runs
    rows: tuple[Row, ...]
    prices: SpendConfig = SpendConfig()  # [prices]: the bars' tokens as dollars

    def spend(self, key: str) -> tuple[tuple[str, Total], ...]:
        """What was used per item (`key="item"`), agent or step kind, the most expensive first (dollars,
        then tokens)."""
        sums: dict[str, Total] = {}
        for row in self.rows:
            for bar in row.bars:
                name = row.slug if key == "item" else bar.agent if key == "agent" else bar.step
                sums[name] = sums.get(name, Total()).plus(bar.tokens, bar.agent, self.prices)
        return tuple(sorted(sums.items(), key=lambda pair: (-pair[1].usd, -pair[1].tokens, pair[0])))

    def spent(self) -> Total:
        found = Total()
        for row in self.rows:
            for bar in row.bars:
                found = found.plus(bar.tokens, bar.agent, self.prices)
        return found

    def rounds(self, slug: str) -> tuple[int, Total]:
        """The item's fix rounds (its fixers' sessions) and what they used: a runaway loop shows here."""
        row = next((r for r in self.rows if r.slug == slug), None)
        fixes = [bar for bar in row.bars if bar.step == FIX] if row else []
        found = Total()
        for bar in fixes:
            found = found.plus(bar.tokens, bar.agent, self.prices)
        return len(fixes), found

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(bar.agent for row in self.rows for bar in row.bars))

    def totals(self, key: str) -> tuple[tuple[str, float], ...]:
        """Seconds of work per agent (`key="agent"`) or per step kind (`key="step"`), largest first."""
        sums: dict[str, float] = {}
        for row in self.rows:
            for bar in row.bars:
                name = bar.agent if key == "agent" else bar.step
                sums[name] = sums.get(name, 0.0) + bar.seconds
        return tuple(sorted(sums.items(), key=lambda pair: (-pair[1], pair[0])))

    def starts(self) -> dict[str, int]:
        """How many workers began fresh, resumed a conversation, or took over a step with a note."""
        counts = {"fresh": 0, "resumed": 0, "handed_over": 0}
        for row in self.rows:
            for bar in row.bars:
                counts[bar.start_kind] += 1
        return counts

    @property
    def waited(self) -> float:
        return sum((b - a).total_seconds() for row in self.rows for a, b in row.waits)

    @property
    def ahead(self) -> float:
        """Seconds workers started ahead waited at their prompts for their steps (no work)."""
        return sum(bar.ahead for row in self.rows for bar in row.bars)


def timeline(
    run_id: str,
    project: str,
    started: datetime,
    ended: datetime | None,
    outcome: str,
    sessions: Sequence[Session],
    events: Sequence[Event],
    now: datetime,
    gates: Mapping[str, tuple[GateRecord, ...]] | None = None,  # slug -> its gate runs, any time
    used: Mapping[str, Tokens] | None = None,  # session id -> what it used (core/spend.py)
    prices: SpendConfig | None = None,
) -> Timeline:
    by_session: dict[str, list[Event]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event)
    ordered = sorted(sessions, key=lambda s: (s.created_at, s.id))
    limited: dict[tuple[str, str], str] = {}  # (step, slug) -> the agent whose session of it hit a limit
    rows: dict[str, list[Bar]] = {}
    for session in ordered:
        if session.state is SessionState.CANCELLED and session.delivered_at is None:
            continue  # started ahead and not needed (or ended before its command): no step was taken
        step = bare_command(session.command)
        own = by_session.get(session.id, [])
        marks = [Mark(MarkKind.LIMIT, e.at, e.detail) for e in own if e.kind is EventKind.RATE_LIMITED]
        marks += [Mark(MarkKind.REMINDER, e.at, e.detail) for e in own if e.kind is EventKind.REMINDED]
        before = limited.pop((step, session.slug), None)
        if before is not None and before != session.agent:
            marks.append(Mark(MarkKind.FALLBACK, session.created_at, f"{before} → {session.agent}"))
        if any(m.kind is MarkKind.LIMIT for m in marks) or session.state is SessionState.RATE_LIMITED:
            limited[(step, session.slug)] = session.agent
        live = not session.state.is_final
        end = now if live else max(session.updated_at, session.created_at)
        turn_ends = [e.at for e in own if e.kind is EventKind.TURN_ENDED]
        if session.state is SessionState.DONE and turn_ends:  # its work ended with its turn, not its pane
            end = max(session.created_at, min(end, turn_ends[-1]))  # (the next step may begin meanwhile)
        waiting = session.state is SessionState.PENDING  # at its prompt, its command not typed yet
        bar = Bar(
            session.id,
            step,
            session.agent,
            session.computer,
            session.created_at,
            end,
            session.state.value,
            live,
            tuple(sorted(marks, key=lambda m: m.at)),
            end if waiting else session.delivered_at,
            (used or {}).get(session.id),
            session.resumed_from,
            session.handed_over_from,
        )
        rows.setdefault(session.slug, []).append(bar)
    last = ended or now
    end = max([last, *(bar.end for bars in rows.values() for bar in bars)])
    during = {
        slug: tuple(g for g in runs if started.timestamp() <= g.at <= end.timestamp())
        for slug, runs in (gates or {}).items()
    }
    return Timeline(
        run_id,
        project,
        started,
        end,
        outcome,
        tuple(Row(slug, tuple(bars), during.get(slug, ())) for slug, bars in rows.items()),
        prices or SpendConfig(),
    )


def colours(agents: Sequence[str]) -> dict[str, str]:
    """agent -> its colour: a known CLI its driver's, any other the next of a fixed palette."""
    others = iter(OTHER_COLOURS * (len(agents) // len(OTHER_COLOURS) + 1))
    return {agent: (PROFILES[agent].colour if agent in PROFILES else "") or next(others) for agent in agents}


# --- the HTML page ------------------------------------------------------------------------------------------

_LABEL, _WIDTH, _ROW, _TOP = 180, 900, 34, 30


def _e(text: str) -> str:
    """Text from files and workers, for HTML: controls shown as escapes, then HTML-escaped."""
    return html.escape(printable(text), quote=True)


def render_html(data: Timeline) -> str:
    painted = colours(data.agents)
    span = max(1.0, (data.end - data.start).total_seconds())

    def x(moment: datetime) -> float:
        return _LABEL + _WIDTH * max(0.0, (moment - data.start).total_seconds()) / span

    height = _TOP + _ROW * max(1, len(data.rows)) + 10
    svg = [
        f'<svg role="img" width="{_LABEL + _WIDTH + 20}" '
        f'height="{height}" viewBox="0 0 {_LABEL + _WIDTH + 20} {height}">',
        f'<text class="axis" x="{_LABEL}" y="16">{_e(format_utc(data.start))}</text>',
        f'<text class="axis" x="{_LABEL + _WIDTH}" y="16" text-anchor="end">{_e(format_utc(data.end))} '
        f"({_e(format_duration(span))})</text>",
    ]
    for index, row in enumerate(data.rows):
        y = _TOP + index * _ROW
        svg.append(f'<g class="item" data-slug="{_e(row.slug)}">')
        svg.append(f'<text class="slug" x="4" y="{y + 20}">{_e(row.slug or "(bugs)")}</text>')
        for start, end in row.waits:
            svg.append(
                f'<line class="wait" x1="{x(start):.1f}" x2="{x(end):.1f}" y1="{y + 15}" y2="{y + 15}">'
                f"<title>waited {_e(format_duration((end - start).total_seconds()))}</title></line>"
            )
        for bar in row.bars:  # under the bars: a worker started ahead waited at its prompt, it did not work
            if bar.ahead >= 1:
                svg.append(
                    f'<line class="ahead" data-agent="{_e(bar.agent)}" x1="{x(bar.start):.1f}" '
                    f'x2="{x(bar.work_start):.1f}" y1="{y + 29}" y2="{y + 29}" stroke="{painted[bar.agent]}">'
                    f"<title>{_e(f'{bar.step} {row.slug} · {bar.agent} started ahead: ')}"
                    f"{_e(f'waited {format_duration(bar.ahead)} at its prompt')}</title></line>"
                )
        for bar in row.bars:
            left, right = x(bar.work_start), x(bar.end)
            used = Total().plus(bar.tokens, bar.agent, data.prices).text()
            title = (
                f"{bar.step} {row.slug} · {bar.agent}@{bar.computer} · {format_duration(bar.seconds)} · "
                f"{bar.outcome} · {used}"
            )
            if bar.resumed_from:
                title += f" · resumed from tc-{bar.resumed_from}"
            elif bar.handed_over_from:
                title += f" · handed over from tc-{bar.handed_over_from}"
            svg.append(
                f'<rect class="bar{" live" if bar.live else ""}" data-agent="{_e(bar.agent)}" '
                f'data-start="{bar.start_kind}" '
                f'data-step="{_e(bar.step)}" x="{left:.1f}" y="{y + 4}" width="{max(2.0, right - left):.1f}" '
                f'height="22" rx="3" fill="{painted[bar.agent]}"><title>{_e(title)}</title></rect>'
            )
            label = _fit(bar.step.removeprefix("next-"), right - left - 8)
            if label:
                svg.append(f'<text class="step" x="{left + 4:.1f}" y="{y + 19}">{_e(label)}</text>')
            for mark in bar.marks:
                svg.append(_mark(mark, x(mark.at), y))
        for run in row.gates:
            at = x(datetime.fromtimestamp(run.at, UTC))
            tip = _e(f"gate ({run.kind}) {run.summary}")
            svg.append(
                f'<g class="gate {_e(run.verdict.value)}"><rect x="{at - 3:.1f}" y="{y + 26}" width="6" '
                f'height="6" fill="{_GATE_COLOURS[run.verdict]}"/><title>{tip}</title></g>'
            )
        svg.append("</g>")
    svg.append("</svg>")
    return _PAGE.format(
        title=_e(f"teleclaude run {data.run_id}"),
        heading=_e(f"run {data.run_id}"),
        project=_e(data.project),
        outcome=_e(data.outcome or "running"),
        start=_e(format_utc(data.start)),
        length=_e(format_duration(span)),
        legend="".join(
            f'<span class="agent" data-agent="{_e(a)}"><i style="background:{c}"></i>{_e(a)}</span>'
            for a, c in painted.items()
        ),
        svg="\n".join(svg),
        agents=_totals(data.totals("agent"), "agent"),
        steps=_totals(data.totals("step"), "step"),
        waited=_e(format_duration(data.waited)),
        ahead=_e(format_duration(data.ahead)),
        spent=_e(data.spent().text()),
        items=_costs(data, "item"),
        agent_costs=_costs(data, "agent"),
        step_costs=_costs(data, "step"),
        **{f"starts_{kind}": count for kind, count in data.starts().items()},
    )


def _fit(label: str, room: float) -> str:
    """`label` cut to what `room` pixels hold at about 7 pixels a character; "" when not even 3 fit."""
    chars = int(room // 7)
    if chars < 3:
        return ""
    return label if len(label) <= chars else label[: chars - 1] + "…"


def _mark(mark: Mark, at: float, y: int) -> str:
    tip = _e(f"{mark.kind.value} at {format_utc(mark.at)}{': ' + mark.detail if mark.detail else ''}")
    if mark.kind is MarkKind.LIMIT:
        shape = f'<path d="M{at:.1f} {y} l6 -8 h-12 z" fill="#c00"/>'
    elif mark.kind is MarkKind.FALLBACK:
        shape = f'<path d="M{at:.1f} {y + 30} l6 8 h-12 z" fill="#333"/>'
    else:
        shape = f'<circle cx="{at:.1f}" cy="{y + 2}" r="3" fill="#e8a400"/>'
    return f'<g class="mark {mark.kind.value}">{shape}<title>{tip}</title></g>'


_GATE_COLOURS = {Verdict.GREEN: "#2a2", Verdict.FLAKY: "#e8a400", Verdict.RED: "#c00", Verdict.BROKEN: "#555"}


def _costs(data: Timeline, kind: str) -> str:
    """One row per item, agent or step kind with what it used, the most expensive first; an item's row also
    counts its fix rounds and what they used."""
    rows = []
    for name, spent in data.spend(kind):
        label = (name or "(bugs)") if kind == "item" else name
        cells = [f"<td>{_e(label)}</td>", f'<td class="cost">{_e(spent.text())}</td>']
        if kind == "item":
            rounds, fixes = data.rounds(name)
            cells.append(f'<td class="rounds">{rounds}{_e(" · " + fixes.text()) if rounds else ""}</td>')
        rows.append(f'<tr class="spend" data-{kind}="{_e(name)}">{"".join(cells)}</tr>')
    return "".join(rows) or '<tr><td colspan="3">none</td></tr>'


def _totals(pairs: Sequence[tuple[str, float]], kind: str) -> str:
    rows = "".join(
        f'<tr class="total" data-{kind}="{_e(name)}"><td>{_e(name)}</td>'
        f"<td>{_e(format_duration(seconds))}</td></tr>"
        for name, seconds in pairs
    )
    return rows or '<tr><td colspan="2">none</td></tr>'


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }}
h2 {{ font-size: 16px; margin: 20px 0 4px; }}
.meta {{ color: #555; margin-bottom: 12px; }}
.legend span {{ margin-right: 16px; }}
.legend i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }}
svg {{ display: block; margin: 12px 0; }}
svg text {{ font: 12px system-ui, sans-serif; fill: #222; }}
svg text.step {{ fill: #fff; font-size: 11px; }}
svg text.axis {{ fill: #777; }}
svg .wait {{ stroke: #999; stroke-width: 2; stroke-dasharray: 4 3; }}
svg .ahead {{ stroke-width: 3; stroke-dasharray: 1 3; opacity: 0.8; }}
svg .bar.live {{ opacity: 0.75; }}
table {{ border-collapse: collapse; margin-right: 32px; display: inline-table; vertical-align: top; }}
td, th {{ padding: 2px 10px 2px 0; text-align: left; }}
</style>
</head>
<body>
<h1>{heading}</h1>
<div class="meta">{project} · started {start} · {length} · outcome: <b>{outcome}</b></div>
<div class="legend">{legend} <span>▼ limit</span> <span>▲ fallback</span> <span>● reminder</span>
<span>- - - wait</span> <span>····· started ahead, waiting</span>
<span>■ gate (green, flaky, red)</span></div>
{svg}
<table class="agents"><tr><th>agent</th><th>working</th></tr>{agents}</table>
<table class="steps"><tr><th>step</th><th>time</th></tr>{steps}</table>
<table class="waits"><tr><th>waits</th><th>{waited}</th></tr>
<tr><td>started ahead, waiting</td><td>{ahead}</td></tr></table>
<h2>Cost: <span class="spent">{spent}</span></h2>
<table class="item-costs"><tr><th>item</th><th>cost</th><th>fix rounds</th></tr>{items}</table>
<table class="agent-costs"><tr><th>agent</th><th>cost</th></tr>{agent_costs}</table>
<table class="step-costs"><tr><th>step</th><th>cost</th></tr>{step_costs}</table>
<table class="starts"><tr><th>workers</th><th></th></tr>
<tr class="start" data-start="fresh"><td>fresh starts</td><td>{starts_fresh}</td></tr>
<tr class="start" data-start="resumed"><td>resumed</td><td>{starts_resumed}</td></tr>
<tr class="start" data-start="handed_over"><td>handed over</td><td>{starts_handed_over}</td></tr></table>
</body>
</html>
"""
