"""`teleclaude trust`: the user trusts the project's teleclaude.toml in its present content, so that its
settings that start processes (computers, ssh options, binaries, flags, environment) apply; `revoke` takes
that back, `status` only says where things stand. A human's act: the MCP server has no tool for it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from teleclaude.adapters import git as gitx
from teleclaude.adapters import settings, trust_store
from teleclaude.config.notify import without_secrets
from teleclaude.config.parse import ConfigError, executable_settings, parse_config
from teleclaude.planner.core.terminal import printable
from teleclaude.setup.scaffold import Done

AFTER = (
    "A change to the file or to a program it names is untrusted again; `teleclaude trust --revoke` takes "
    "this back."
)


def trust(cwd: str | os.PathLike | None = None, revoke: bool = False, status: bool = False) -> Done:
    root = gitx.find_repo(cwd or os.getcwd()).root
    path = settings.project_file(root)
    text = next((text for source, text in settings.config_sources(root) if source == str(path)), None)
    shown = printable(str(path))
    if revoke:
        trust_store.record(path, None)
        return Done((f"OK: {shown} is not trusted any more: what it sets that starts processes is unused.",))
    if text is None:
        return Done((f"OK: there is no {shown}: nothing to trust.",))
    data = text.encode("utf-8")
    held = _listed(executable_settings(str(path), text))
    if status:
        return Done((_status(path, data), *(held or ("  (none)",))))
    parse_config(settings.config_sources(root))  # the file as it would apply, with the user's: checked first
    programs = _programs(path, data)  # before it is recorded: each must be a file inside the project
    trust_store.record(path, data)
    head = f"OK: {shown} is trusted in this content (sha256 {trust_store.fingerprint(path, data)})."
    if not held:
        return Done((head, "It sets nothing that starts processes.", AFTER))
    return Done((head, "Its settings that start processes now apply:", *held, *programs, AFTER))


def _programs(path: Path, data: bytes) -> tuple[str, ...]:
    named = trust_store.programs(path, data)
    return tuple(f"  runs {printable(where)} (sha256 {sha})" for where, sha in named.values())


def _status(path: Path, data: bytes) -> str:
    trusted = trust_store.trusted_digest(path)
    shown = printable(str(path))
    try:
        now = trust_store.fingerprint(path, data)
    except ConfigError as error:  # a program it names is not a file inside the project: trusted in none
        return f"OK: {shown} is not trusted, and cannot be: {printable(str(error))}. Its settings:"
    if trusted == now:
        return f"OK: {shown} is trusted in this content (sha256 {now}); its settings:"
    was = f"; it was trusted in another content (sha256 {trusted})" if trusted else ""
    return (
        f"OK: {shown} is not trusted (sha256 {now}){was}. `teleclaude trust` trusts it with these settings "
        "that start processes:"
    )


def _listed(held: dict[str, Any]) -> tuple[str, ...]:
    return tuple(f"  {printable(key)} = {printable(_value(key, value))}" for key, value in held.items())


def _value(key: str, value: Any) -> str:
    return without_secrets(value) if key == "notify.urls" else json.dumps(value)
