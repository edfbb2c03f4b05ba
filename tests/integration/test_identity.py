"""The user's git identity reaches every worker as configuration in its environment (launcher)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.runtime.worker_setup import identity_config


def test_the_identity_is_the_repositorys_own_over_the_homes(tmp_path: Path):
    home, repo = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Night Owl\n\temail = owl@example.invalid\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert gitx.identity(repo, str(home)) == (
        ("user.name", "Night Owl"),
        ("user.email", "owl@example.invalid"),
    )
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "owl@work.invalid"], check=True)
    assert dict(gitx.identity(repo, str(home)))["user.email"] == "owl@work.invalid"
    assert gitx.identity(repo, str(tmp_path / "nobody")) == (("user.email", "owl@work.invalid"),)


def test_the_identity_comes_after_the_configuration_the_environment_already_has(tmp_path: Path):
    identity = (("user.name", "Night Owl"), ("user.email", "owl@example.invalid"))
    assert identity_config(identity, {}) == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "user.name",
        "GIT_CONFIG_VALUE_0": "Night Owl",
        "GIT_CONFIG_KEY_1": "user.email",
        "GIT_CONFIG_VALUE_1": "owl@example.invalid",
    }
    after = identity_config(identity, {"GIT_CONFIG_COUNT": "1"})
    assert after["GIT_CONFIG_COUNT"] == "3" and after["GIT_CONFIG_KEY_1"] == "user.name"
    assert identity_config((), {}) == {}  # git says who the user is as it would without teleclaude
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": "/dev/null"}
    said = subprocess.run(
        ["git", "-C", str(repo), "var", "GIT_AUTHOR_IDENT"],
        env=env | identity_config(identity, env),
        capture_output=True,
        text=True,
        check=True,
    )
    assert said.stdout.startswith("Night Owl <owl@example.invalid>")
