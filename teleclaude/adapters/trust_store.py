"""Which project `teleclaude.toml` files the user trusts, and in which content (`teleclaude trust`).

`trusted.json` beside the database (~/.teleclaude/), mode 0600, maps each file's absolute path to the
sha256 of what the user trusted (`fingerprint`): the file's bytes and each program it names inside the
project; any other content is untrusted again (the direnv `allow` / mise `trust` habit). The path is the
project's own (its folder resolved, not a link at the file: a `teleclaude.toml` linked to another project's
file is not that project's trust). A store that is not a regular file of the user's, can be written by
others, or is not such a map trusts nothing.
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
from teleclaude.config.parse import ConfigError, relative_programs
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
    """The file as its project names it: the folder resolved, a link at the file's own name not followed."""
    path = Path(file)
    return str(path.parent.resolve() / path.name)


def programs(file: str | Path, data: bytes) -> dict[str, tuple[str, str]]:
    """The programs the file's settings name by a path relative to its folder (`binary = "tools/agent"`):
    dotted key -> (the path inside the project, the sha256 of its bytes). One that is not a regular file
    inside the project's folder, links followed, is `ConfigError` (INVALID_CONFIG)."""
    path = Path(file)
    folder = path.parent.resolve()
    found = {}
    for setting, named in relative_programs(str(path), data.decode("utf-8")).items():
        target = (folder / named).resolve()
        if not target.is_relative_to(folder):
            raise ConfigError(str(path), setting, f"{named!r} leads outside the project (to {target})")
        try:  # without waiting on a fifo's writer
            with os.fdopen(os.open(target, os.O_RDONLY | os.O_NONBLOCK), "rb") as program:
                if not stat.S_ISREG(os.fstat(program.fileno()).st_mode):
                    raise ConfigError(str(path), setting, f"{named!r} is not a file")
                found[setting] = (
                    str(target.relative_to(folder)),
                    hashlib.file_digest(program, "sha256").hexdigest(),
                )
        except OSError as error:
            raise ConfigError(str(path), setting, f"{named!r} cannot be read ({error.strerror})") from None
    return found


def fingerprint(file: str | Path, data: bytes) -> str:
    """What the trust is kept in: the sha256 of the file's bytes, and of each program it names inside the
    project (its path and its bytes' sha256) when it names any."""
    named = programs(file, data)
    if not named:
        return digest(data)
    parts = [data, *(f"\0{key}\0{where}\0{sha}".encode() for key, (where, sha) in sorted(named.items()))]
    return digest(b"".join(parts))


def is_trusted(file: str | Path, data: bytes, env: Mapping[str, str] | None = None) -> bool:
    try:
        trusted = _read(trust_path(env))
    except (OSError, TrustStoreError, fs.FileError):
        return False
    held = trusted.get(key(file))
    if held is None:
        return False
    try:
        return held == fingerprint(file, data)
    except ConfigError:  # a program it names left the project or is gone: trusted in no content
        return False


def trusted_digest(file: str | Path, env: Mapping[str, str] | None = None) -> str | None:
    """The sha256 the user trusted `file` in, if any (a store that cannot be used is said)."""
    return _read(trust_path(env)).get(key(file))


def record(file: str | Path, data: bytes | None, env: Mapping[str, str] | None = None) -> None:
    """Trust `file` in the content `data` (and the programs it names as they are now); None: trust it in no
    content any more."""
    trusted_as = None if data is None else fingerprint(file, data)
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
        if trusted_as is not None:
            trusted[key(file)] = trusted_as
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
