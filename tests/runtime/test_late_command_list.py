"""opencode lists its commands long after its prompt shows (seconds on a loaded machine), and takes a command
line typed before that as a message to its model: the stand-in's `latelist` fault (as `opencode`). The
launcher waits for the command to be listed (`_until_listed`), typing its name again while it is not, and
the command is taken as a command: expanded, its step done, never sent as plain text."""

from __future__ import annotations

from dataclasses import replace

import pytest

from teleclaude.demo.workers import git
from teleclaude.runtime.core.sessions import EventKind, Started, StartRequest

BUILDER = "You are the **builder** for the work item `greeting`"


@pytest.mark.parametrize("command_wait", [30.0, 0.3], ids=["waits-for-the-list", "types-the-name-again"])
def test_a_command_typed_before_opencode_lists_it_is_taken_as_its_command(
    project, runtime, monkeypatch, watch, command_wait
):
    monkeypatch.setenv("FAKE_AGENT_OPENCODE", "latelist")
    runtime.context.config = replace(runtime.config, command_wait=command_wait)
    request = StartRequest("local", "next-build", "greeting", str(project), "opencode", "med")
    started = runtime.run_agent_command(request)
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert sum(BUILDER in row for row in screen) == 1, screen  # expanded once: taken as its command
    assert not [row for row in screen if "sent to the model as typed" in row], screen
    assert screen.count("running /next-build greeting") == 1, screen
    assert "Build greeting" in git(project, "log", "--format=%s", "-1")


def test_before_its_list_the_stand_in_takes_a_command_line_as_plain_text(
    project, runtime, monkeypatch, watch
):
    """The fault itself, as the real opencode showed it under load: a command line typed whole before its
    commands loaded reaches the model as typed, and no step is done. (A launcher that neither waits for the
    list nor confirms the expansion, here by the profile, types just so.)"""
    monkeypatch.setenv("FAKE_AGENT_OPENCODE", "latelist")
    monkeypatch.setenv("FAKE_AGENT_LIST_SECONDS", "600")  # not within this test
    plain = replace(runtime.config.profiles["opencode"], command_listed="", command_confirm=False)
    runtime.context.config = replace(runtime.config, profiles={**runtime.config.profiles, "opencode": plain})
    request = StartRequest("local", "next-build", "greeting", str(project), "opencode", "med")
    started = runtime.run_agent_command(request)
    assert isinstance(started, Started), started
    watch(runtime, started.session.id).until(EventKind.TURN_ENDED)
    screen = runtime.get_session_output(started.session.id).chunk.rows
    assert [row for row in screen if "sent to the model as typed" in row], screen
    assert not [row for row in screen if BUILDER in row or "running /next-build" in row], screen
    assert "Build greeting" not in git(project, "log", "--format=%s", "-1")
