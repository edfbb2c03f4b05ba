"""Every test runs against a private HOME, availability database and git identity."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("TELECLAUDE_DB", str(home / "teleclaude.db"))
    monkeypatch.delenv("TELECLAUDE_DEBUG", raising=False)
    monkeypatch.delenv("WORKSPACE", raising=False)  # pytest-git would put repositories there
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "teleclaude tests")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tests@teleclaude.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home
