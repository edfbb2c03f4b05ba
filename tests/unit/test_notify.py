"""`[notify]` as values: its table, the trust rule for a project's URLs, the notices, their de-duplication."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from teleclaude.config.notify import Notice, NotifyConfig, NotifyEvent, Quiet, Target, without_secrets
from teleclaude.config.parse import ConfigError, parse_config
from teleclaude.runtime.core import notices
from teleclaude.runtime.core.sessions import Event, EventKind

from .factories import running_session

SECRET = "123456:AAH-bot-token"
URL = f"tgram://{SECRET}/4242"


def notify_of(text: str, untrusted: tuple[str, ...] = ()) -> NotifyConfig:
    return parse_config([("teleclaude.toml", text)], untrusted=untrusted).notify


def test_a_notify_table_is_read_with_its_urls_events_and_times():
    config = notify_of(
        f'[notify]\nurls = ["{URL}", "json://127.0.0.1:8080/hook"]\nevents = ["run_ended", "parked"]\n'
        "min_interval = 120\ndigests = true\ntimeout = 5\n"
    )
    assert [t.key for t in config.targets] == ["notify.urls[0]", "notify.urls[1]"]
    assert [t.scheme for t in config.targets] == ["tgram", "json"]
    assert config.events == {NotifyEvent.RUN_ENDED, NotifyEvent.PARKED}
    assert (config.min_interval, config.digests, config.timeout) == (120.0, True, 5.0)


def test_without_a_notify_table_nothing_is_sent():
    config = notify_of("max_review_rounds = 2\n")
    assert config.targets == () and not config.wants(NotifyEvent.RUN_ENDED)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        (f'urls = "{URL}"', "notify.urls"),
        (f'urls = ["{URL}", "not a url {SECRET}"]', "notify.urls[1]"),
        (f'urls = ["{URL}", "://{SECRET}"]', "notify.urls[1]"),
        ('events = ["run_ended", "lunch"]', "notify.events"),
        ("min_interval = -1", "notify.min_interval"),
        ("timeout = 0", "notify.timeout"),
        ('digests = "yes"', "notify.digests"),
        ("colour = 1", "notify.colour"),
    ],
)
def test_a_wrong_notify_value_is_a_config_error_naming_its_key_and_never_the_secret(table, key):
    with pytest.raises(ConfigError) as raised:
        notify_of(f"[notify]\n{table}\n")
    assert raised.value.code.value == "INVALID_CONFIG"
    assert raised.value.key == key
    assert SECRET not in str(raised.value)


def test_urls_of_a_project_file_not_trusted_are_left_out_and_named_like_what_starts_processes():
    text = f'[notify]\nurls = ["{URL}"]\nmin_interval = 60\n'
    config = parse_config([("teleclaude.toml", text)], untrusted=("teleclaude.toml",))
    assert config.notify.targets == () and config.notify.min_interval == 60.0
    assert config.runtime is not None and config.runtime.untrusted is not None
    assert config.runtime.untrusted.keys == ("notify.urls",)
    with pytest.raises(ConfigError):  # still checked whole, trusted or not
        parse_config([("teleclaude.toml", '[notify]\nurls = ["nope"]\n')], untrusted=("teleclaude.toml",))


def test_a_url_never_shows_in_a_repr_or_in_what_trust_lists():
    target = Target("notify.toml", "notify.urls[0]", URL)
    assert SECRET not in repr(target) and SECRET not in repr(NotifyConfig(targets=(target,)))
    assert SECRET not in target.shown and target.shown == "notify.urls[0] (tgram://…)"
    assert without_secrets([URL, "ntfy://topic"]) == '["tgram://…", "ntfy://…"]'


def flap(index: int) -> Notice:
    return notices.unresponsive(f"s{index}", "build greeting", "gemini", "no progress", "/p")


def test_fifty_flaps_of_one_agent_in_a_minute_send_one_and_one_more_after_min_interval():
    quiet, sent = Quiet(min_interval=300), 0
    for second in range(50):
        quiet, admitted = quiet.admit(flap(second), now=float(second))
        sent += admitted
    assert sent == 1
    assert quiet.admit(flap(0), now=301.0)[1]
    other = notices.unresponsive("s9", "review greeting", "codex", "no progress", "/p")
    assert quiet.admit(other, now=10.0)[1]  # another agent is another subject


def test_the_out_and_the_back_of_one_wait_are_two_messages_but_a_second_out_is_held():
    until = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    quiet = Quiet(min_interval=600)
    quiet, out = quiet.admit(notices.agents_out("build x", "gemini", until, "/p"), 0.0)
    quiet, back = quiet.admit(notices.agents_back("build x", "gemini", "/p"), 5.0)
    quiet, again = quiet.admit(notices.agents_out("build y", "claude", until, "/p"), 9.0)
    assert (out, back, again) == (True, True, False)


def test_the_run_ended_notice_has_the_reason_the_count_and_the_next_command():
    report = (
        "NEEDS_ATTENTION: next-build greeting (gemini, session s1) needs a human: \x1b[31mstuck\x1b[0m\n"
        "Look at it from /p: teleclaude sessions output s1\n\nsteps: 2 sessions started\n"
        "delivered: nothing in this run\nrunning: 1\nnext: look at the worker, then: cd /p && teleclaude run"
    )
    notice = notices.run_ended(report, 2, (), 3725.0, "/srv/p", "NEEDS_ATTENTION")
    assert notice.event is NotifyEvent.RUN_ENDED and "NEEDS_ATTENTION" in notice.title
    lines = notice.body.splitlines()
    assert lines[0].startswith("NEEDS_ATTENTION: next-build greeting") and "\x1b" not in notice.body
    assert lines[-1] == "next: look at the worker, then: cd /p && teleclaude run"
    failed = notices.run_ended(
        "ERROR: REVIEW_ROUND_LIMIT\ntodos/x has been through 3 review rounds\n\nnext: do it",
        4,
        (),
        9,
        "/p",
        "ERROR",
    )
    assert failed.body.splitlines()[0] == "ERROR: REVIEW_ROUND_LIMIT todos/x has been through 3 review rounds"
    done = notices.run_ended(
        "COMPLETE: every roadmap item is done", 6, ("done/001-a/",), 60, "/p", "COMPLETE"
    )
    assert "6 sessions" in done.body and "delivered 1 item: done/001-a/" in done.body


@pytest.mark.parametrize(
    ("kind", "detail", "in_run", "event"),
    [
        (EventKind.RATE_LIMITED, "unresponsive until 2026-11-28T03:00:00+00:00: stuck", True, "unresponsive"),
        (EventKind.RATE_LIMITED, "rate_limited until 03:00", True, None),
        (EventKind.NEEDS_ATTENTION, "no progress for 14m", False, "unresponsive"),
        (EventKind.NEEDS_ATTENTION, "no progress for 14m", True, None),  # the run's own report says it
        (EventKind.DIGEST, "running 20m, state stalled, status never, 2 reminder(s) sent, NO PROGRESS", True,
         "no_progress"),
        (EventKind.DIGEST, "running 20m, state running, status never, 0 reminder(s) sent", True, None),
        (EventKind.TURN_ENDED, "", True, None),
    ],
)  # fmt: skip
def test_which_worker_events_are_worth_a_message(kind, detail, in_run, event):
    session = running_session()
    notice = notices.of_event(Event(session.id, kind, datetime.now(UTC), detail), session, "/p", in_run)
    assert (notice.event.value if notice and notice.event else None) == event


def test_a_digest_is_sent_only_when_digests_are_asked_for():
    target = (Target("f", "notify.urls[0]", "json://localhost/x"),)
    assert not NotifyConfig(targets=target).wants(None)
    assert NotifyConfig(targets=target, digests=True).wants(None)
    assert not NotifyConfig(targets=target, events=frozenset()).wants(NotifyEvent.RUN_ENDED)
    long = "x" * 2000
    assert len(notices.digest("s1", "next-build x", long).body) <= notices.LINE
