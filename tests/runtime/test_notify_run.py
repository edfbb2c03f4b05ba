"""`[notify]` from `teleclaude run`, with stand-in agent CLIs in real tmux and a real HTTP receiver on
127.0.0.1 (Apprise's `json://` target)."""

from __future__ import annotations

import os
from pathlib import Path

from teleclaude.adapters.notify import Notifier
from teleclaude.config.notify import NotifyConfig, NotifyEvent, Target
from teleclaude.demo.scenario import commit_all
from teleclaude.planner import api as app
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.orchestrator import Outcome

from ..servers import Receiver
from .conftest import back_at_countdown

SECRET = "s3cret-webhook-path"


def notifier_for(receiver: Receiver, **settings) -> Notifier:
    return Notifier(
        NotifyConfig(targets=(Target("notify.toml", "notify.urls[0]", receiver.url(SECRET)),), **settings)
    )


def titles(receiver: Receiver) -> list[str]:
    return [message["title"] for message in receiver.messages]


def test_a_run_that_needs_attention_sends_one_message_with_the_reason_and_the_next_command(
    project, fake_agents, tmux_socket, monkeypatch, teleclaude_cli
):
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text()
        + "soft_remind = 0.5\nhard_remind = 1.0\nmax_nudges = 1\nunresponsive_pause = 0\n"
    )
    commit_all(project, "Remind quickly; a stuck worker is left for a human")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")  # the builder never answers
    monkeypatch.setenv("TELECLAUDE_DEBUG", "1")  # every log line, and still no URL in any
    with Receiver() as receiver:
        path = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "notify.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'[notify]\nurls = ["{receiver.url(SECRET)}"]\n')
        path.chmod(0o600)
        process = teleclaude_cli(project, "run", "greeting")
        out, err = process.communicate(timeout=180)
        assert process.returncode == 1, out + err
        report = out[out.index("NEEDS_ATTENTION: ") :]
        (message,) = receiver.messages  # sent before the process ended
    assert message["title"] == f"teleclaude run NEEDS_ATTENTION ({project.name})"
    lines = message["message"].splitlines()
    assert lines[0] == report.splitlines()[0]  # what happened: the stuck worker, its session
    assert "needs a human" in lines[0]
    assert lines[-1] == next(line for line in report.splitlines() if line.startswith("next: "))
    assert "teleclaude run greeting" in lines[-1]  # the one command that goes on
    for text in (out, err):
        assert SECRET not in text and f"127.0.0.1:{receiver.port}" not in text


def test_a_wait_for_every_agent_sends_one_message_and_one_when_work_resumes(
    project, fake_agents, tmux_socket
):
    for agent in ("claude", "codex"):
        app.mark_agent_unavailable(agent, "2h", "quota_exhausted", cwd=project)
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)  # the first back
    lines: list[str] = []
    with Receiver() as receiver:
        # a send past its timeout counts as failed but may still arrive, after the next notice: on a loaded
        # machine Apprise's first start alone took 10 s
        notifier = notifier_for(receiver, timeout=60)
        report = orchestrator.run(
            project, "greeting", False, 40, open_runtime(project), lines.append,
            back_at_countdown(project, "gemini", []), notify=notifier.post,
        )  # fmt: skip
        notifier.close()
        assert report.outcome is Outcome.COMPLETE, report.text
        name = project.name
        assert titles(receiver) == [
            f"teleclaude: every agent out ({name})",
            f"teleclaude: work resumes ({name})",
            f"teleclaude run COMPLETE ({name})",
        ]
        out = receiver.messages[0]["message"]
        assert "gemini" in out and "teleclaude agents available gemini" in out
        assert "delivered 1 item: done/" in receiver.messages[2]["message"]
    assert not any(SECRET in line for line in lines)


def test_a_service_that_hangs_does_not_hold_the_run_up(project, fake_agents, tmux_socket, caplog):
    for agent in ("claude", "codex"):
        app.mark_agent_unavailable(agent, "2h", "quota_exhausted", cwd=project)
    app.mark_agent_unavailable("gemini", "1h", "rate_limited", cwd=project)  # the first back
    with Receiver("hang") as receiver:
        notifier = notifier_for(receiver, timeout=1)
        report = orchestrator.run(
            project, "greeting", False, 40, open_runtime(project), print,
            back_at_countdown(project, "gemini", []), notify=notifier.post,
        )  # fmt: skip
        assert report.outcome is Outcome.COMPLETE, report.text
        assert receiver.messages and not receiver.released.is_set()  # the service never answered
        notifier.close()  # at most the timeout
    assert "notify.urls[0] (json://…): the agents_out notice was not sent" in caplog.text
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith(("apprise", "urllib3"))]
    assert not any(SECRET in line for line in ours)  # Apprise's own never propagate to a handler


def test_a_worker_marked_unresponsive_sends_one_message_and_the_run_goes_on(
    project, fake_agents, tmux_socket, monkeypatch
):
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + "soft_remind = 0.5\nhard_remind = 1.0\nmax_nudges = 1\n")
    commit_all(project, "Remind quickly")
    monkeypatch.setenv("FAKE_AGENT_GEMINI", "hang")  # the builder never answers its reminders
    with Receiver() as receiver:
        notifier = notifier_for(receiver, events=frozenset({NotifyEvent.UNRESPONSIVE}))
        report = orchestrator.run(
            project, "greeting", False, 40, open_runtime(project), print, lambda progress: None,
            notify=notifier.post,
        )  # fmt: skip
        notifier.close()
        assert report.outcome is Outcome.COMPLETE, report.text  # claude took the step over
        (message,) = receiver.messages
    assert message["title"] == "teleclaude: gemini unresponsive"
    assert "next-build greeting" in message["message"] and "teleclaude sessions output" in message["message"]
