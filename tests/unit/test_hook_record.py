"""`record`: a hook's news is told again while the session's row is busy, whatever keeps it busy."""

from __future__ import annotations

from pathlib import Path

import teleclaude.runtime.api as runtime_api
from teleclaude.adapters.store import StoreLocked
from teleclaude.runtime.hooks.record import record


class _Runtime:
    def owns(self, session_id: str, key: str) -> bool:
        return (session_id, key) == ("s1", "k1")


def test_a_write_refused_by_a_locked_file_is_tried_again(monkeypatch, capsys):
    monkeypatch.setenv("TELECLAUDE_SESSION_ID", "s1")
    monkeypatch.setenv("TELECLAUDE_SESSION_KEY", "k1")
    monkeypatch.setattr(runtime_api, "open_runtime", lambda cwd: _Runtime())
    tries: list[str] = []

    def write(runtime, session_id: str) -> bool:
        tries.append(session_id)
        if len(tries) < 3:
            raise StoreLocked(Path("teleclaude.db"), "database is locked")
        return True

    record(write, "the limit", attempts=5, pause=0)
    assert tries == ["s1", "s1", "s1"]
    assert capsys.readouterr().err == ""  # recorded: nothing to warn about


def test_a_file_locked_at_every_try_is_a_warning_not_a_crash(monkeypatch, capsys):
    monkeypatch.setenv("TELECLAUDE_SESSION_ID", "s1")
    monkeypatch.setenv("TELECLAUDE_SESSION_KEY", "k1")
    monkeypatch.setattr(runtime_api, "open_runtime", lambda cwd: _Runtime())

    def write(runtime, session_id: str) -> bool:
        raise StoreLocked(Path("teleclaude.db"), "database is locked")

    record(write, "the limit", attempts=3, pause=0)
    assert capsys.readouterr().err  # a warning on stderr, and the hook goes on
