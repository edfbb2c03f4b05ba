"""The bearer token of `teleclaude mcp --http`: made once, beside the database, readable by its owner only."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from teleclaude.adapters.store import default_db_path
from teleclaude.errors import ErrorCode, Failure

TOKEN_FILE = "http-token"


class TokenFileError(Failure):
    code = ErrorCode.FILE_ERROR


def token_path(env: Mapping[str, str] | None = None) -> Path:
    """`http-token` in the user's teleclaude folder: where the database lives (~/.teleclaude/)."""
    return default_db_path(env).parent / TOKEN_FILE


def read_or_create(path: Path) -> str:
    """The token in `path`; the first call writes a new random one there with mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_urlsafe(32) + "\n")
    return _read(path)


def _read(path: Path) -> str:
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise TokenFileError(f"{path} is not a regular file of yours; delete it to make a new token")
    if info.st_mode & 0o077:
        raise TokenFileError(
            f"{path} can be read by other users, so its token may be known; "
            "delete it to make a new one (teleclaude writes it with mode 0600)"
        )
    token = path.read_text(encoding="ascii", errors="replace").strip()
    if len(token) < 16 or not all("!" <= char <= "~" for char in token):
        raise TokenFileError(f"{path} does not hold a usable token; delete it to make a new one")
    return token
