"""`teleclaude notify [--test]` and `teleclaude lint` on `[notify]`, as processes, against a real HTTP
receiver on 127.0.0.1 (Apprise's `json://` target)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ..servers import Receiver

SECRET = "s3cret-webhook-path"


def first_line(text: str) -> str:
    return text.splitlines()[0]


def notify_file(text: str, mode: int = 0o600) -> Path:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "notify.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def urls(*values: str) -> str:
    return "[notify]\nurls = [" + ", ".join(f'"{value}"' for value in values) + "]\n"


def imported(stderr: str) -> set[str]:
    return {m[1].split(".")[0] for m in re.finditer(r"import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", stderr)}


def test_notify_test_sends_one_message_to_each_url_and_says_which_took_it(project, cli, subprocess_env):
    subprocess_env["TELECLAUDE_DEBUG"] = "1"  # and not even the debug log names a URL
    with Receiver() as good, Receiver("fail") as bad:
        notify_file(urls(good.url(SECRET), bad.url(SECRET)))
        done = cli("notify", "--test", "--cwd", str(project), process=True)
        assert done.returncode == 1, done.stdout + done.stderr
        assert first_line(done.stdout) == "ERROR: NOTIFY_FAILED"
        assert "  sent: notify.urls[0] (json://…)" in done.stdout
        assert "  NOT SENT: notify.urls[1] (json://…)" in done.stdout
        (message,) = good.messages
        assert message["title"] == "teleclaude: test"
        for text in (done.stdout, done.stderr):
            assert SECRET not in text and f"127.0.0.1:{good.port}" not in text
        notify_file(urls(good.url(SECRET)))
        done = cli("notify", "--test", "--cwd", str(project), process=True)
        assert done.returncode == 0 and first_line(done.stdout) == "OK: the test message went to 1 of 1 URL."
        assert len(good.messages) == 2


def test_notify_shows_the_settings_without_sending_or_loading_apprise(project, cli):
    notify_file(urls(f"tgram://{SECRET}/42") + "min_interval = 90\n")
    done = cli("notify", "--cwd", str(project), python_flags=("-X", "importtime"))
    assert done.returncode == 0 and first_line(done.stdout) == "OK: 1 URL set; nothing sent."
    assert "notify.urls[0] (tgram://…)" in done.stdout and SECRET not in done.stdout
    assert "apprise" not in imported(done.stderr)


def test_without_urls_notify_test_says_where_to_set_them(project, cli):
    done = cli("notify", "--test", "--cwd", str(project))
    assert done.returncode == 1 and first_line(done.stdout) == "ERROR: INVALID_CONFIG"


def test_a_notify_file_others_may_read_is_refused_by_notify_lint_and_run(project, cli):
    path = notify_file(urls(f"json://127.0.0.1:9/{SECRET}"), mode=0o644)
    for argv in (["notify", "--test"], ["lint"], ["run"]):
        done = cli(*argv, "--cwd", str(project), process=True)
        assert done.returncode == 1, (argv, done.stdout + done.stderr)
        assert "ERROR: INVALID_CONFIG" in done.stdout.splitlines(), (argv, done.stdout)
        assert str(path) in done.stdout and "chmod 600" in done.stdout
        assert SECRET not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("url", [f"nosuchservice://{SECRET}", "tgram://x"])
def test_lint_names_the_key_of_a_url_apprise_does_not_take(project, cli, url):
    notify_file(urls("ntfy://topic", url))
    done = cli("lint", "--cwd", str(project), process=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ERROR: INVALID_CONFIG" in done.stdout.splitlines()
    assert "notify.urls[1]" in done.stdout and SECRET not in done.stdout


def test_lint_without_notify_urls_loads_no_apprise(project, cli):
    done = cli("lint", "--cwd", str(project), python_flags=("-X", "importtime"))
    assert "apprise" not in imported(done.stderr), done.stdout


def test_trust_lists_a_project_files_urls_by_scheme_alone(project, cli):
    (project / "teleclaude.toml").write_text(urls(f"tgram://{SECRET}/42"))
    done = cli("trust", "--status", "--cwd", str(project))
    assert 'notify.urls = ["tgram://…"]' in done.stdout, done.stdout
    assert SECRET not in done.stdout


def test_a_project_files_urls_wait_for_trust_and_the_run_says_so_without_the_url(project, cli):
    (project / "teleclaude.toml").write_text(urls(f"json://127.0.0.1:9/{SECRET}"))
    done = cli("run", "--cwd", str(project), process=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ERROR: UNTRUSTED_CONFIG" in done.stdout.splitlines() and "notify.urls" in done.stdout
    assert SECRET not in done.stdout + done.stderr
    assert cli("notify", "--cwd", str(project)).returncode == 1  # nothing set until trusted
    assert cli("trust", "--cwd", str(project)).returncode == 0
    shown = cli("notify", "--cwd", str(project))
    assert shown.returncode == 0 and "notify.urls[0] (json://…)" in shown.stdout
    assert SECRET not in shown.stdout
