"""Find and read the `teleclaude.toml` files: the user's, then the project's.

The user's own file is trusted; the project's is trusted only in a content the user trusted with `teleclaude
trust` (`adapters/trust_store.py`). Until then its settings that start processes are not applied.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.config.matrix import Config

FILE_NAME = "teleclaude.toml"


def _user_config_path(env: Mapping[str, str]) -> Path | None:
    """`$XDG_CONFIG_HOME/teleclaude/teleclaude.toml`, else under `$HOME/.config`; None without either."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec says to ignore a relative path
        return Path(xdg) / "teleclaude" / FILE_NAME
    home = env.get("HOME")
    return Path(home) / ".config" / "teleclaude" / FILE_NAME if home else None


def user_config_file(name: str, env: Mapping[str, str]) -> Path | None:
    """Another file of the user's, beside the user's teleclaude.toml (notify.toml)."""
    path = _user_config_path(env)
    return path.with_name(name) if path else None


def project_file(project_root: str | Path) -> Path:
    return Path(project_root) / FILE_NAME


def config_sources(
    project_root: str | Path | None, env: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(path, text) of the user file, then of the project file (none without project_root), if they exist."""
    env = os.environ if env is None else env
    candidates = [_user_config_path(env), project_file(project_root) if project_root is not None else None]
    sources = []
    for path in candidates:
        text = _read(path) if path else None
        if text is not None:
            sources.append((str(path), text))
    return sources


def load_config(project_root: str | Path | None, env: Mapping[str, str] | None = None) -> Config:
    sources = config_sources(project_root, env)
    if not sources:
        return Config()  # without importing the parser and the runtime's profiles (~5 ms a planner call)
    from teleclaude.config.parse import parse_config

    return parse_config(sources, untrusted=_untrusted(sources, project_root, env))


def _untrusted(
    sources: list[tuple[str, str]], project_root: str | Path | None, env: Mapping[str, str] | None
) -> tuple[str, ...]:
    """The project file, unless the user trusted it in this very content."""
    if project_root is None:
        return ()
    from teleclaude.adapters import trust_store

    project = str(project_file(project_root))
    user = _user_config_path(os.environ if env is None else env)
    return tuple(
        path
        for path, text in sources
        if path == project
        and path != str(user)
        and not trust_store.is_trusted(path, text.encode("utf-8"), env)
    )


def _read(path: Path) -> str | None:
    """The file's text, or None when there is no such file."""
    try:
        data = fs.read_bytes(path)
        return None if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        from teleclaude.config.parse import ConfigError  # the parser is imported only when a file is there

        if isinstance(error, UnicodeDecodeError):
            problem = f"is not UTF-8 text ({error.reason} at byte {error.start})"
        else:
            problem = f"cannot be read ({error.strerror or error})"
        raise ConfigError(str(path), None, problem) from None
