"""Which project `teleclaude.toml` files the user trusts, and in which content (`teleclaude trust`).

`trusted.json` beside the database (~/.teleclaude/), mode 0600, maps each file's absolute path (links
resolved) to the sha256 of the bytes the user trusted; any other content of that file is untrusted again
(the direnv `allow` / mise `trust` habit). A store that is not a regular file of the user's, can be written
by others, or is not such a map trusts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters.store import default_db_path
from teleclaude.errors import ErrorCode, Failure

TRUST_FILE = "trusted.json"


class TrustStoreError(Failure):
    code = ErrorCode.FILE_ERROR
    next_step = "Move it aside (teleclaude then starts a new one), then run `teleclaude trust` again."


def trust_path(env: Mapping[str, str] | None = None) -> Path:
    return default_db_path(env).parent / TRUST_FILE


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def key(file: str | Path) -> str:
    return str(Path(file).resolve())


def is_trusted(file: str | Path, data: bytes, env: Mapping[str, str] | None = None) -> bool:
    try:
        trusted = _read(trust_path(env))
    except (OSError, TrustStoreError, fs.FileError):
        return False
    return trusted.get(key(file)) == digest(data)


def trusted_digest(file: str | Path, env: Mapping[str, str] | None = None) -> str | None:
    """The sha256 the user trusted `file` in, if any (a store that cannot be used is said)."""
    return _read(trust_path(env)).get(key(file))


def record(file: str | Path, data: bytes | None, env: Mapping[str, str] | None = None) -> None:
    """Trust `file` in the content `data`; None: trust it in no content any more."""
    path = trust_path(env)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as new:
            new.write("{}\n")
    _read(path)  # refuse a store that is not the user's own before changing it

    def change(text: bytes) -> bytes:
        trusted = _parse(path, text)
        trusted.pop(key(file), None)
        if data is not None:
            trusted[key(file)] = digest(data)
        return (json.dumps(trusted, indent=2, sort_keys=True) + "\n").encode()

    fs.rewrite(path, change)


def _read(path: Path) -> dict[str, str]:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return {}
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise TrustStoreError(f"{path} is not a regular file of yours, so it trusts nothing")
    if info.st_mode & 0o022:
        raise TrustStoreError(f"{path} can be written by other users, so it trusts nothing")
    return _parse(path, fs.read_bytes(path) or b"{}")


def _parse(path: Path, text: bytes) -> dict[str, str]:
    try:
        trusted = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        trusted = None
    if not isinstance(trusted, dict) or not all(isinstance(v, str) for v in trusted.values()):
        raise TrustStoreError(f"{path} is not a map of files to sha256 digests, so it trusts nothing")
    return trusted
