"""Notices through Apprise to a real HTTP receiver on 127.0.0.1 (its `json://` target), and the files that
hold the URLs."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from teleclaude.adapters import notify
from teleclaude.config.notify import NotifyConfig, Target
from teleclaude.config.parse import ConfigError
from teleclaude.runtime.core import notices

from ..servers import Receiver

SECRET = "s3cret-webhook-path"


def config_for(*urls: str, **settings) -> NotifyConfig:
    targets = tuple(Target("notify.toml", f"notify.urls[{i}]", url) for i, url in enumerate(urls))
    return NotifyConfig(targets=targets, **settings)


def flap(index: int):
    return notices.unresponsive(f"s{index}", "next-build greeting", "gemini", "no progress", "/p")


def assert_no_secret(caplog, receiver: Receiver) -> None:
    """In no log line that reaches a handler of teleclaude's (stderr, the supervisor's log). Apprise's and
    urllib3's own debug lines name the URL: they never propagate there (pytest catches them anyway)."""
    shown = [r.getMessage() for r in caplog.records if not r.name.startswith(("apprise", "urllib3"))]
    for text in shown:
        assert SECRET not in text and f"127.0.0.1:{receiver.port}" not in text
    for name in ("apprise", "urllib3"):
        assert not logging.getLogger(name).propagate


def test_fifty_flaps_in_a_minute_send_one_message(caplog):
    caplog.set_level(logging.DEBUG)
    with Receiver() as receiver:
        notifier = notify.Notifier(config_for(receiver.url(SECRET), min_interval=60))
        for index in range(50):
            notifier.post(flap(index))
        receiver.wait_for(1)  # close() waits at most the timeout: importing Apprise may take longer, loaded
        notifier.close()  # what was queued is sent first
        assert len(receiver.messages) == 1
        (message,) = receiver.messages
        assert message["title"] == "teleclaude: gemini unresponsive" and message["type"] == "warning"
        assert "teleclaude sessions output s0" in message["message"]
        assert receiver.paths == [f"/{SECRET}"]
        assert_no_secret(caplog, receiver)


def test_a_service_that_answers_500_is_logged_once_and_tried_once_more(caplog):
    with Receiver("fail") as receiver:
        notifier = notify.Notifier(config_for(receiver.url(SECRET)), retry_after=0.0)
        notifier.post(flap(0))
        receiver.wait_for(2)  # the first try and the one more
        notifier.close()
        assert len(receiver.messages) == 2
    ours = [r for r in caplog.records if r.name.startswith("teleclaude")]  # apprise's own never reach a log
    warnings = [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "notify.urls[0] (json://…)" in warnings[0], warnings
    assert_no_secret(caplog, receiver)


def test_a_service_that_hangs_costs_its_timeout_and_never_the_callers_time(caplog):
    with Receiver("hang") as receiver:
        notifier = notify.Notifier(config_for(receiver.url(SECRET), timeout=1))
        notifier.post(flap(0))  # returns at once: the send is the notifier's thread's
        receiver.wait_for(1)
        assert not receiver.released.is_set()  # still holding the request
        notifier.close()  # bounded by the timeout
        results = notify.send_all(notifier.config.targets, notices.trial("/p"), timeout=1)
        assert list(results.values()) == ["the service did not take it"]
    assert "notify.urls[0] (json://…): the unresponsive notice was not sent" in caplog.text
    assert_no_secret(caplog, receiver)


def test_an_event_not_asked_for_and_a_digest_without_digests_are_not_sent():
    with Receiver() as receiver:
        notifier = notify.Notifier(config_for(receiver.url(SECRET), events=frozenset()))
        notifier.post(flap(0))
        notifier.post(notices.digest("s1", "next-build x", "running 5m"))
        notifier.close()
        assert receiver.messages == []


def test_worker_text_is_sent_as_plain_text():
    with Receiver() as receiver:
        notifier = notify.Notifier(config_for(receiver.url(SECRET), digests=True))
        notifier.post(notices.digest("s1", "next-build x", 'status "<b>*done*</b>" \x1b[2J\x07 ok'))
        notifier.close()
        (message,) = receiver.wait_for(1)
        assert "<b>*done*</b>" in message["message"] and "\x1b" not in message["message"]
        assert "\x07" not in message["message"]


# --- checking the URLs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"nosuchservice://{SECRET}", "knows no service nosuchservice://"),
        ("tgram://x", "not a URL Apprise takes"),
    ],
)
def test_a_url_apprise_does_not_take_is_a_config_error_naming_its_key(url, said):
    with pytest.raises(ConfigError) as raised:
        notify.check_urls(config_for("json://127.0.0.1:9/x", url))
    assert raised.value.key == "notify.urls[1]" and said in str(raised.value)
    assert SECRET not in str(raised.value)


# --- the files ------------------------------------------------------------------------------------------


def notify_file(text: str, mode: int) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "notify.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_notify_file_others_may_read_is_refused(tmp_path, mode):
    path = notify_file(f'[notify]\nurls = ["json://127.0.0.1:9/{SECRET}"]\n', mode)
    with pytest.raises(notify.NotifyFileOpen) as raised:
        notify.load_notify(tmp_path)
    assert raised.value.code.value == "INVALID_CONFIG" and str(path) in str(raised.value)
    assert "chmod 600" in str(raised.value) and SECRET not in str(raised.value)


def test_the_notify_file_overrides_teleclaude_toml_key_by_key(tmp_path):
    (Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude").mkdir(parents=True)
    user_toml = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "teleclaude.toml"
    user_toml.write_text("[notify]\nmin_interval = 30\ntimeout = 3\n")
    notify_file('[notify]\nurls = ["ntfy://topic"]\ntimeout = 4\n', 0o600)
    config = notify.load_notify(tmp_path)
    assert [t.scheme for t in config.targets] == ["ntfy"]
    assert (config.min_interval, config.timeout) == (30.0, 4.0)


def test_urls_in_the_users_teleclaude_toml_need_it_private_too(tmp_path):
    user_toml = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "teleclaude.toml"
    user_toml.parent.mkdir(parents=True)
    user_toml.write_text('[notify]\nurls = ["ntfy://topic"]\n')
    user_toml.chmod(0o644)
    with pytest.raises(notify.NotifyFileOpen):
        notify.load_notify(tmp_path)
    user_toml.chmod(0o600)
    assert len(notify.load_notify(tmp_path).targets) == 1


def test_a_notify_file_with_other_tables_is_a_config_error(tmp_path):
    notify_file('[runtime]\nsocket = "x"\n', 0o600)
    with pytest.raises(ConfigError) as raised:
        notify.load_notify(tmp_path)
    assert raised.value.key == "runtime"
