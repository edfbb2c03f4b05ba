"""The board's pure core: a run's timeline and its HTML page, and the board's view, from values alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from html.parser import HTMLParser

from teleclaude.agents import PROFILES
from teleclaude.board.core.timeline import MarkKind, render_html, timeline
from teleclaude.board.core.view import Lane, build_view, follow
from teleclaude.planner.core.model import AgentReport, Marker, RoadmapItem, Unavailability, UsageWindow
from teleclaude.planner.core.phase import Board, Phase, Row, Stage
from teleclaude.runtime.core.sessions import (
    Activity,
    Chunk,
    Cursor,
    Event,
    EventKind,
    Session,
    SessionState,
)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def session(
    sid: str, agent: str, command: str, slug: str, start: float, end: float, state: SessionState, **kw
):
    kw.setdefault("delivered_at", None if state is SessionState.PENDING else at(start))
    return Session(
        sid, agent, command, slug, "/p", f"trees/{slug}", state, at(start), at(end), run_id="r1", **kw
    )


RUN = [
    session("s1", "claude", "next-build", "greeting", 0, 10, SessionState.DONE),
    session("s2", "gemini", "next-review", "greeting", 12, 14, SessionState.CANCELLED),
    session("s3", "claude", "next-review", "greeting", 15, 20, SessionState.DONE),
    session("s4", "codex", "prompts:next-build", "shouting", 1, 30, SessionState.RUNNING),
]
EVENTS = [
    Event("s2", EventKind.RATE_LIMITED, at(13), "gemini quota"),
    Event("s4", EventKind.REMINDED, at(20), "soft"),
    Event("s1", EventKind.EXITED, at(10)),
]


def test_a_run_is_one_row_per_item_with_limits_fallbacks_and_waits():
    data = timeline("r1", "/p", at(0), None, "", RUN, EVENTS, now=at(25))
    rows = {row.slug: row for row in data.rows}
    assert list(rows) == ["greeting", "shouting"]
    greeting = rows["greeting"]
    assert [(b.step, b.agent) for b in greeting.bars] == [
        ("next-build", "claude"),
        ("next-review", "gemini"),
        ("next-review", "claude"),
    ]
    assert [m.kind for m in greeting.bars[1].marks] == [MarkKind.LIMIT]
    assert [m.kind for m in greeting.bars[2].marks] == [MarkKind.FALLBACK]
    assert greeting.waits == ((at(10), at(12)), (at(14), at(15)))
    shouting = rows["shouting"].bars[0]
    assert shouting.step == "next-build" and shouting.live  # codex's old command name, still running
    assert shouting.end == at(25)  # a live bar runs to now
    assert [m.kind for m in shouting.marks] == [MarkKind.REMINDER]
    assert dict(data.totals("agent")) == {"claude": 15 * 60, "codex": 24 * 60, "gemini": 2 * 60}
    assert dict(data.totals("step")) == {"next-build": 34 * 60, "next-review": 7 * 60}
    assert data.waited == 3 * 60


def test_the_same_agent_again_after_a_limit_is_no_fallback():
    again = [RUN[1], session("s5", "gemini", "next-review", "greeting", 16, 18, SessionState.DONE)]
    data = timeline("r1", "/p", at(0), at(20), "COMPLETE", again, EVENTS, now=at(30))
    assert [m.kind for m in data.rows[0].bars[1].marks] == []
    assert data.end == at(20)


def test_a_done_steps_bar_ends_with_its_turn_not_when_its_pane_was_closed_after_the_next_step_began():
    """The run ends a worker whose turn ended beside typing the next step into a worker started ahead: its
    session's end may come after the next step's command; its bar ends at its turn's end all the same."""
    run = [
        session("f", "claude", "next-fix-review", "greeting", 0, 10.2, SessionState.DONE),
        session("r", "codex", "next-review", "greeting", 5, 20, SessionState.DONE, delivered_at=at(10.1)),
    ]
    events = [Event("f", EventKind.TURN_ENDED, at(10)), Event("r", EventKind.TURN_ENDED, at(19))]
    (row,) = timeline("r1", "/p", at(0), at(20), "COMPLETE", run, events, now=at(20)).rows
    fixed, reviewed = row.bars
    assert fixed.end == at(10) and reviewed.work_start == at(10.1) >= fixed.end
    assert reviewed.end == at(19)


def test_a_worker_started_ahead_waits_apart_from_its_work_and_an_unneeded_one_is_no_step():
    """The reviewer started at minute 1 while the build worked to minute 10, its command typed at 11: its
    review is minutes 11 to 15; the finalizer started ahead and ended unneeded (a fix came next) took no
    step."""
    run = [
        session("b", "claude", "next-build", "greeting", 0, 10, SessionState.DONE),
        session("r", "codex", "next-review", "greeting", 1, 15, SessionState.DONE, delivered_at=at(11)),
        session(
            "f", "gemini", "next-finalize", "greeting", 11, 16, SessionState.CANCELLED, delivered_at=None
        ),
        session("x", "gemini", "next-fix-review", "greeting", 16, 20, SessionState.RUNNING),
        session(
            "w", "codex", "next-review", "greeting", 17, 17, SessionState.PENDING
        ),  # ahead, still waiting
    ]
    data = timeline("r1", "/p", at(0), None, "", run, [], now=at(20))
    (row,) = data.rows
    assert [(bar.session_id, bar.seconds, bar.ahead) for bar in row.bars] == [
        ("b", 10 * 60, 0),
        ("r", 4 * 60, 10 * 60),
        ("x", 4 * 60, 0),
        ("w", 0, 3 * 60),
    ]
    assert dict(data.totals("step")) == {"next-build": 600, "next-review": 240, "next-fix-review": 240}
    assert row.waits == ((at(10), at(11)), (at(15), at(16)))
    assert data.waited == 2 * 60 and data.ahead == 13 * 60
    page = Page()
    page.feed(render_html(data))
    assert [bar["data-step"] for bar in page.bars] == [
        "next-build",
        "next-review",
        "next-fix-review",
        "next-review",
    ]
    build, review = page.bars[0], page.bars[1]
    assert float(review["x"] or 0) >= float(build["x"] or 0) + float(
        build["width"] or 0
    )  # no bar over another
    assert page.ahead == ["codex", "codex"]


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self.bars: list[dict[str, str | None]] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.ahead: list[str] = []  # the agents of the workers drawn waiting at their prompts

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.tags.add(tag)
        if tag == "g" and (found.get("class") or "") == "item":
            self.items.append(found["data-slug"] or "")
        if tag == "rect":
            self.bars.append(found)
        if tag == "line" and found.get("class") == "ahead":
            self.ahead.append(found.get("data-agent") or "")
        self.urls += [v for k, v in attrs if k in ("href", "src", "xlink:href", "action") and v]


def test_the_page_has_every_item_row_and_agent_colour_and_no_url():
    hostile = session("s9", "claude", "next-build", "x", 2, 3, SessionState.DONE, status_text="ignored")
    hostile = Session(**{**hostile.__dict__, "args": 'evil"><script>alert(1)</script>\x1b[2J'})
    data = timeline("r1", "/p<b>", at(0), at(30), "COMPLETE", [*RUN, hostile], EVENTS, now=at(30))
    text = render_html(data)
    page = Page()
    page.feed(text)
    assert page.items == ["greeting", "shouting", 'evil"><script>alert(1)</script>\\x1b[2J']
    assert {bar["data-agent"]: bar["fill"] for bar in page.bars} == {
        agent: PROFILES[agent].colour for agent in ("claude", "gemini", "codex")
    }
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    assert page.urls == []
    assert "http:" not in text and "https:" not in text and "//" not in text.replace("<!--", "")
    assert "\x1b" not in text


def test_the_view_puts_each_stage_in_its_lane_and_marks_the_items_worked_on():
    items = {
        "a": (Stage.NEEDS_REQUIREMENTS, ""),
        "b": (Stage.BLOCKED, "by a"),
        "c": (Stage.PREPARED, ""),
        "d": (Stage.BUILDING, "2/5"),
        "e": (Stage.FIXING, "round 2"),
        "f": (Stage.DONE, ""),
    }
    rows = tuple(
        Row(RoadmapItem(slug, Marker.PENDING, i, ("a",) if slug == "b" else ()), Phase(stage, detail), "")
        for i, (slug, (stage, detail)) in enumerate(items.items())
    )
    report = AgentReport(("claude", "codex"), (Unavailability("codex", at(90), "quota\x1b"),), at(0))
    live = session(
        "s1", "claude", "next-build", "d", 0, 1, SessionState.RUNNING, activity=Activity.WAITING_API
    )
    done = session("s0", "claude", "next-build", "f", 0, 1, SessionState.DONE)
    view = build_view(
        Board("/p", rows, report), {"e": 1}, [done, live], {"s1": ("Read: x (1s ago)",)}, at(30)
    )
    lanes = {lane: [card.slug for card in cards] for lane, cards in view.lanes}
    assert lanes[Lane.TO_PREPARE] == ["a", "b"] and lanes[Lane.READY] == ["c"] and lanes[Lane.DONE] == ["f"]
    assert Lane.STUCK not in lanes
    cards = {card.slug: card for _, group in view.lanes for card in group}
    assert cards["d"].current and not cards["f"].current
    assert cards["b"].after == ("a",) and cards["e"].rounds == 1
    assert [(w.id, w.activity) for w in view.workers] == [("s1", "waiting on API"), ("s0", "done")]
    assert view.workers[0].tools == ("Read: x (1s ago)",)
    codex = view.agents[1]
    assert codex.left == "1h00m" and codex.reason == "quota\\x1b"


def test_an_item_stays_in_its_workers_lane_and_a_worker_started_ahead_is_shown_waiting():
    """git says `greeting` is up for review (its builder committed), but the builder's turn goes on: it is
    building, and the reviewer started ahead waits at its prompt."""
    rows = (
        Row(RoadmapItem("greeting", Marker.PENDING, 0), Phase(Stage.REVIEWING), "clean"),
        Row(RoadmapItem("shouting", Marker.PENDING, 1), Phase(Stage.FINALIZING), "clean"),
    )
    sessions = [
        session("b", "claude", "next-build", "greeting", 0, 9, SessionState.RUNNING),
        session("r", "codex", "next-review", "greeting", 1, 1, SessionState.PENDING),
        session("f", "claude", "next-finalize", "shouting", 2, 2, SessionState.PENDING),
    ]
    view = build_view(Board("/p", rows, None), {}, sessions, {}, at(10))
    lanes = {lane: [(c.slug, c.phase, c.current, c.waiting) for c in cards] for lane, cards in view.lanes}
    assert lanes[Lane.BUILDING] == [("greeting", "building", True, ("next-review",))]
    assert lanes[Lane.IN_REVIEW] == []
    assert lanes[Lane.FINALIZING] == [("shouting", "finalizing", False, ("next-finalize",))]
    assert {w.id: w.activity for w in view.workers} == {"b": "working", "r": "waiting", "f": "waiting"}


def test_the_agents_panel_shows_each_agents_usage_in_the_reports_zone():
    zone = timezone(timedelta(hours=-3))
    usage = (
        UsageWindow("claude", "5h", 83.4, at(120), at(-5)),
        UsageWindow("claude", "7d", 41, at(3 * 24 * 60), at(-5)),
        UsageWindow("codex", "primary", 99, at(-1), at(-5)),  # reset a minute ago: no longer counts
    )
    report = AgentReport(("claude", "codex"), (), at(0), usage, 90, zone)
    view = build_view(Board("/p", (), report), {}, [], {}, at(0))
    five, seven = at(120).astimezone(zone), at(3 * 24 * 60).astimezone(zone)
    assert [(a.agent, a.usage) for a in view.agents] == [
        ("claude", f"5h 83% ↺ {five:%H:%M} · 7d 41% ↺ {seven:%a %d %H:%M}"),
        ("codex", ""),
    ]


def chunk(rows: list[str], line: int, partial: str = "", **kw) -> Chunk:
    return Chunk(tuple(rows), partial, Cursor("%1", 7, line, 0), **kw)


def test_the_output_followed_from_the_cursor_keeps_the_newest_rows_escaped():
    first = follow(None, chunk(["$ claude", "thinking"], 2, "> typ"), keep=4)
    assert first.lines == ("$ claude", "thinking", "> typ") and first.cursor == "%1:7:2:0::"
    later = follow(first, chunk(["> typed", "\x1b[2Jrow\u202e", "three"], 5), keep=4)
    assert later.lines == ("thinking", "> typed", "\\x1b[2Jrow\\u202e", "three")  # partial done
    gap = follow(later, chunk(["after"], 9, lines_missed=2), keep=3)
    assert gap.rows[-1] == "after" and "2" in gap.rows[-2]  # the rows never read are said, where they were
    assert follow(later, chunk([], 5, truncated=True, partial="x"), keep=4).partial == ""


def test_an_alternate_screen_read_replaces_the_rows_kept():
    shown = follow(None, chunk(["codex", "working"], 0, alternate_screen=True), keep=10)
    changed = follow(shown, chunk(["codex", "done"], 0, alternate_screen=True), keep=10)
    assert changed.rows == ("codex", "done")
    assert follow(shown, chunk([], 0, alternate_screen=True), keep=10).rows == shown.rows  # unchanged


def test_the_report_counts_fresh_starts_resumes_and_hand_overs_and_marks_each():
    run = [
        session("b1", "claude", "next-build", "greeting", 0, 5, SessionState.ERRORED),
        session("b2", "claude", "next-build", "greeting", 5, 8, SessionState.CANCELLED, resumed_from="b1"),
        session("b3", "codex", "next-build", "greeting", 8, 12, SessionState.DONE, handed_over_from="b2"),
    ]
    data = timeline("r1", "/p", at(0), at(12), "COMPLETE", run, [], now=at(12))
    assert data.starts() == {"fresh": 1, "resumed": 1, "handed_over": 1}
    page = render_html(data)
    assert page.count('data-start="resumed"') == 2  # its bar and its count
    assert "resumed from tc-b1" in page and "handed over from tc-b2" in page


def test_the_board_marks_a_resumed_worker_and_a_handed_over_one():
    from teleclaude.board.core.view import worker

    resumed = session("b2", "claude", "next-build", "greeting", 5, 8, SessionState.RUNNING, resumed_from="b1")
    handed = session(
        "b3", "codex", "next-build", "greeting", 8, 9, SessionState.RUNNING, handed_over_from="b2"
    )
    fresh = session("b1", "claude", "next-build", "greeting", 0, 5, SessionState.ERRORED)
    assert worker(resumed, (), at(9)).began == "resumed from tc-b1"
    assert worker(handed, (), at(9)).began == "handed over from tc-b2"
    assert worker(fresh, (), at(9)).began == ""
