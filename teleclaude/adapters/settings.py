"""Find and read the `teleclaude.toml` files: the user's, then the project's."""

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


def config_sources(
    project_root: str | Path | None, env: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """(path, text) of the user file, then of the project file (none without project_root), if they exist."""
    env = os.environ if env is None else env
    project_file = Path(project_root) / FILE_NAME if project_root is not None else None
    candidates = [_user_config_path(env), project_file]
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

    return parse_config(sources)


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
