"""What a worker used: the drivers' token readers, prices, the sums, and the [budget] verdict (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.agents import PROFILES
from teleclaude.agents.tokens import Tokens
from teleclaude.config.parse import ConfigError, parse_config
from teleclaude.config.spend import Budget, SpendConfig
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.core.spend import (
    Level,
    Reading,
    Scope,
    Total,
    decide,
    decode_tokens,
    encode_tokens,
    raised,
    since,
    total,
    turns,
)

T0 = datetime(2026, 11, 28, 12, tzinfo=UTC)


def lines(*objects: object) -> str:
    return "\n".join(json.dumps(o) for o in objects) + "\n"


def claude_message(name: str, fresh: int, out: int, read: int = 0, written: int = 0) -> dict:
    usage = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }
    return {"type": "assistant", "message": {"id": name, "model": "claude-sonnet-4-5", "usage": usage}}


def test_claude_counts_each_message_once_with_its_last_usage() -> None:
    text = lines(
        {"type": "user", "message": {"content": "hi"}},
        claude_message("a", 10, 1, read=5),
        claude_message("a", 10, 7, read=5),  # the same message's next content block: its final count
        claude_message("b", 20, 3, written=2),
    )
    tokens = PROFILES["claude"].tokens.read(text)  # type: ignore[misc]
    assert tokens == Tokens(37, 5, 10, None, None, "claude-sonnet-4-5")


def test_codex_takes_the_last_total_of_its_rollout() -> None:
    def count(i: int, o: int) -> dict:
        usage = {
            "input_tokens": i,
            "cached_input_tokens": 3,
            "output_tokens": o,
            "reasoning_output_tokens": 2,
        }
        return {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": usage}}}

    text = lines(
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        count(10, 5),
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
        count(30, 9),
    )
    assert PROFILES["codex"].tokens.read(text) == Tokens(30, 3, 9, 2, None, "gpt-5-codex")  # type: ignore[misc]


def test_gemini_counts_each_model_message_once() -> None:
    def message(name: str, i: int, o: int, thoughts: int = 0) -> dict:
        tokens = {"input": i, "output": o, "cached": 1, "thoughts": thoughts, "tool": 0, "total": i + o}
        return {"id": name, "type": "gemini", "model": "gemini-2.5-pro", "tokens": tokens}

    text = lines(
        {"id": "u", "type": "user"}, message("m1", 10, 2), message("m1", 10, 4), message("m2", 7, 1, 3)
    )
    assert PROFILES["gemini"].tokens.read(text) == Tokens(17, 2, 8, 3, None, "gemini-2.5-pro")  # type: ignore[misc]


@pytest.mark.parametrize(
    "bad",
    [-1, "12", 1e300, float("nan"), True, None, 10**13, 1.5],
)
def test_a_hostile_count_is_unknown_never_zero_nor_a_traceback(bad: object) -> None:
    text = lines(
        claude_message("a", 10, 1),
        {"type": "assistant", "message": {"id": "b", "usage": {"input_tokens": bad, "output_tokens": 3}}},
    )  # noqa: E501
    tokens = PROFILES["claude"].tokens.read(text)  # type: ignore[misc]
    assert tokens is not None and tokens.input is None and tokens.total is None
    assert Total().plus(tokens, "claude", SpendConfig()).text() == "unknown"


@pytest.mark.parametrize(
    "text", ["", "not json\n", '{"type": "assistant", "mess', "\x00\xff" * 100, "[1, 2]\n"]
)
def test_a_truncated_or_foreign_record_reads_as_nothing(text: str) -> None:
    for agent in ("claude", "codex", "gemini"):
        assert PROFILES[agent].tokens.read(text) is None  # type: ignore[misc]


def test_opencode_says_what_it_lacks() -> None:
    assert PROFILES["opencode"].tokens.read is None and PROFILES["opencode"].tokens.lacking


def test_prices_estimate_and_subscription_and_unknown() -> None:
    config = parse_config(
        [
            (
                "t.toml",
                '[prices]\nsubscription = ["gemini"]\n"my-model" = {input = 2, cached = 1, output = 10}\n',
            )
        ]
    ).spend
    tokens = Tokens(1_000_000, 500_000, 100_000, model="vendor/my-model-large")
    one = Total().plus(tokens, "codex", config)
    assert one.usd == pytest.approx(0.5 * 2 + 0.5 * 1 + 0.1 * 10) and one.estimate
    assert "(estimate)" in one.text()
    plan = Total().plus(tokens, "gemini", config)
    assert "subscription" in plan.text() and "$" not in plan.text() and plan.tokens == 1_100_000
    unpriced = Total().plus(Tokens(10, 0, 1, model="nobody-knows"), "codex", config)
    assert unpriced.as_json()["usd"] is None and unpriced.as_json()["tokens"] == 11
    reported = Total().plus(Tokens(10, 0, 1, cost_usd=0.25, model="nobody-knows"), "codex", config)
    assert reported.usd == 0.25 and not reported.estimate
    assert SpendConfig().price("claude-opus-4-5-20251101") == SpendConfig().prices["opus-4-5"]


def test_a_total_counts_the_sessions_it_could_not_count() -> None:
    found = total(
        {"a": Tokens(100, 0, 10, model="claude-haiku-4-5")}, {"a": "claude", "b": "opencode"}, SpendConfig()
    )
    assert found.tokens == 110 and found.unknown == 1 and "1 session unknown" in found.text()
    assert found.as_json()["unknown_sessions"] == 1


def test_turns_are_the_differences_and_a_shrunk_record_is_unknown() -> None:
    rows = [
        Reading("s", T0, Tokens(10, 0, 2, 0)),
        Reading("s", T0 + timedelta(minutes=1), Tokens(25, 5, 6, 0)),
        Reading("s", T0 + timedelta(minutes=2), Tokens(5, 0, 1, 0)),  # rotated
    ]
    assert [t.tokens.total for t in turns(rows)] == [12, 19, None]


def test_a_day_counts_only_what_was_read_that_day() -> None:
    start = T0.replace(hour=0)
    rows = [
        Reading("s", start - timedelta(hours=1), Tokens(100, 0, 10, 0)),
        Reading("s", start + timedelta(hours=1), Tokens(150, 0, 20, 0)),
        Reading("t", start + timedelta(hours=2), Tokens(7, 0, 1, 0)),
        Reading("old", start - timedelta(hours=2), Tokens(999, 0, 1, 0)),
    ]
    assert {k: v.total for k, v in since(rows, start).items()} == {"s": 60, "t": 8}


def spent(tokens: int = 0, usd: float = 0.0) -> Total:
    return Total(sessions=1, tokens=tokens, usd=usd)


def test_budget_verdict_ok_warn_over_and_the_item_first() -> None:
    budget = Budget(item_tokens=1000, run_usd=10.0, day_tokens=5000)
    assert decide(budget, spent(100), spent(usd=1), spent(100)).level is Level.OK
    warn = decide(budget, spent(800), spent(usd=1), spent(800))
    assert (warn.level, warn.scope, warn.key) == (Level.WARN, Scope.ITEM, "item_tokens")
    over = decide(budget, spent(1000), spent(usd=10), spent(6000))
    assert (over.level, over.scope, over.key) == (Level.OVER, Scope.ITEM, "item_tokens")
    run = decide(budget, spent(10), spent(usd=12.5), spent(10))
    assert (run.level, run.scope, run.key, run.spent, run.limit) == (
        Level.OVER,
        Scope.RUN,
        "run_usd",
        12.5,
        10.0,
    )
    day = decide(budget, spent(10), spent(usd=1), spent(5000))
    assert (day.level, day.scope) == (Level.OVER, Scope.DAY)
    assert raised(run) == "run_usd=20" and raised(over) == "item_tokens=2000"
    assert decide(Budget(), spent(10**9), spent(usd=1e6), spent(10**9)).level is Level.OK


def test_unknown_spend_holds_nothing_back_and_a_subscription_counts_in_tokens() -> None:
    config = SpendConfig(subscription=("claude",))
    unknown = Total().plus(None, "opencode", config)
    plan = Total().plus(Tokens(900, 0, 200), "claude", config)
    budget = Budget(item_tokens=1000, item_usd=0.01)
    assert decide(budget, unknown, Total(), Total()).level is Level.OK
    assert decide(budget, plan, Total(), Total()).key == "item_tokens"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("[budget]\nitem_usd = 0\n", "budget.item_usd"),
        ("[budget]\nrun_tokens = -5\n", "budget.run_tokens"),
        ("[budget]\nday_usd = 'a lot'\n", "budget.day_usd"),
        ("[budget]\nitem_tokens = 1.5\n", "budget.item_tokens"),
        ("[budget]\nweek_usd = 5\n", "budget.week_usd"),
        ('[prices]\n"x" = {input = -1, output = 1}\n', "prices.x.input"),
        ('[prices]\n"x" = {input = 1}\n', "prices.x"),
    ],
)
def test_a_bad_budget_or_price_is_a_config_error_naming_its_key(table: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised_error:
        parse_config([("teleclaude.toml", table)])
    assert raised_error.value.key == key
    assert key in str(raised_error.value)


def test_budget_keys_are_read() -> None:
    config = parse_config([("t.toml", "[budget]\nitem_usd = 5\nrun_tokens = 2000000\nday_usd = 40\n")])
    assert config.spend.budget == Budget(item_usd=5.0, run_tokens=2_000_000, day_usd=40.0)


def test_the_timeline_sums_per_item_agent_and_step_the_most_expensive_first_with_fix_rounds() -> None:
    from teleclaude.board.core.timeline import render_html, timeline

    from .factories import running_session

    def worker(sid: str, slug: str, command: str, agent: str = "claude") -> Session:
        return running_session(T0, id=sid, args=slug, command=command, agent=agent, state=SessionState.DONE)

    sessions = [
        worker("b1", "cheap", "next-build"),
        worker("b2", "dear", "next-build", "codex"),
        worker("f1", "dear", "next-fix-review"),
        worker("f2", "dear", "next-fix-review"),
        worker("g1", "dear", "next-review", "gemini"),
    ]
    used = {
        "b1": Tokens(1000, 0, 100, model="claude-sonnet-4-5"),
        "b2": Tokens(2000, 0, 100, model="gpt-5-codex"),
        "f1": Tokens(50_000, 40_000, 2000, model="claude-sonnet-4-5"),
        "f2": Tokens(60_000, 50_000, 3000, model="claude-sonnet-4-5"),
    }  # g1: unknown
    data = timeline("r", "/p", T0, T0, "COMPLETE", sessions, [], T0, None, used, SpendConfig())
    assert [name for name, _ in data.spend("item")] == ["dear", "cheap"]
    rounds, fixes = data.rounds("dear")
    assert rounds == 2 and fixes.tokens == 115_000 and fixes.estimate
    agents = dict(data.spend("agent"))
    assert agents["gemini"].text() == "unknown" and agents["claude"].tokens == 1100 + 115_000
    assert data.spent().unknown == 1
    page = render_html(data)
    assert 'class="spend" data-item="dear"' in page and "1 session unknown" in page
    assert page.index('data-item="dear"') < page.index('data-item="cheap"')


def test_a_remote_workers_spend_mark_reads_back_and_a_hostile_one_is_unknown():
    used = Tokens(1000, 10, 100, 5, 0.25, "opus")
    assert decode_tokens(encode_tokens(used)) == used
    assert decode_tokens(encode_tokens(Tokens())) == Tokens()
    for mark in (
        "",
        "not json",
        "[1, 2]",
        '{"input": 1}',
        "[-1, 0, 5, 0, -3, 7]",
        '["a", 0, 1e300, 0, "x", 1]',
    ):
        found = decode_tokens(mark)
        assert found.total is None and found.cost_usd is None, mark


def test_a_reading_read_again_replaces_the_last_only_when_it_says_more():
    before = Tokens(1000, 10, 50, None, None, "m")
    assert Tokens(1500, 10, 90, None, None, "m").ahead_of(before)  # the turn's last answer, written late
    assert not before.ahead_of(before)
    assert not Tokens(900, 10, 90, None, None, "m").ahead_of(before)  # a count shrank: rotated, not more
    assert not Tokens(None, None, 90, None, None, "m").ahead_of(before)  # a count it knew is unknown now
    assert Tokens(1000, 10, 50, None, 0.5, "m").ahead_of(before)  # a cost said now
    assert Tokens(1000, 10, 50).ahead_of(Tokens())  # a record missing at the stop, found later
