"""What `teleclaude install` puts into an agent CLI's files, and how it merges it in and takes it out again.

Five kinds of target, each with an install merge and an uninstall merge: a command file (whole file, known by
its hash), a JSON value at a key path, a JSON item in a list at a key path, a JSON value that takes the place
of the user's own and runs it (chained), and a TOML table appended as text. A merge reads through the
`Staging`, stages new bytes and keeps the `Manifest` up to date; it never writes. What differs from the
recorded version is the user's and is kept.
"""

from __future__ import annotations

import copy
import hashlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from teleclaude.adapters.agent_config import (
    MISSING,
    BrokenConfig,
    JsonStyle,
    dump_json,
    get_at,
    parse_json,
    parse_toml,
    prune_empty,
    set_at,
    toml_table,
    without,
)
from teleclaude.setup.manifest import JsonRecord, Manifest
from teleclaude.setup.staging import Staging


class Status(Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    KEPT = "kept"  # the user's version differs from teleclaude's: left alone
    REMOVED = "removed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Line:
    agent: str
    status: Status
    what: str  # a path, or what was skipped
    detail: str = ""


# --- targets ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandFile:
    agent: str
    path: Path
    content: bytes


@dataclass(frozen=True)
class JsonEntry:
    """`value` at `keys` of a JSON file, or (in_list) one item of the list at `keys`. `default`: a value the
    CLI writes there by itself when nobody chose, so finding it counts as finding nothing."""

    agent: str
    path: Path
    keys: tuple[str, ...]
    value: object
    in_list: bool = False
    default: object = MISSING


@dataclass(frozen=True)
class Chained:
    """A JSON value at `keys` that takes the place of the user's own value there and runs it: `value(theirs)`
    is ours, given theirs (MISSING: none). Uninstall puts theirs back exactly (the manifest keeps it)."""

    agent: str
    path: Path
    keys: tuple[str, ...]
    value: Callable[[object], object]


@dataclass(frozen=True)
class TomlTable:
    agent: str
    path: Path
    keys: tuple[str, ...]
    value: dict


@dataclass(frozen=True)
class Skip:
    agent: str
    what: str


Target = CommandFile | JsonEntry | Chained | TomlTable | Skip

YOURS = "you changed it, so it stays"


def install(target: Target, staging: Staging, manifest: Manifest, overwrite: bool = False) -> Line:
    """`overwrite`: a command file the user changed is replaced too, theirs kept beside it (`backup_of`)."""
    match target:
        case Skip(agent=agent, what=what):
            return Line(agent, Status.SKIPPED, what)
        case CommandFile():
            return install_file(target, staging, manifest, overwrite)
        case JsonEntry(in_list=True):
            return install_list_item(target, staging, manifest)
        case JsonEntry():
            return install_json(target, staging, manifest)
        case Chained():
            return install_chained(target, staging, manifest)
        case TomlTable():
            return install_toml(target, staging, manifest)
    raise TypeError(target)


def uninstall(target: Target, staging: Staging, manifest: Manifest) -> Line:
    match target:
        case Skip(agent=agent, what=what):
            return Line(agent, Status.SKIPPED, what)
        case CommandFile():
            return uninstall_file(target, staging, manifest)
        case JsonEntry():
            return uninstall_json(target, staging, manifest)
        case Chained():
            return uninstall_chained(target, staging, manifest)
        case TomlTable():
            return uninstall_toml(target, staging, manifest)
    raise TypeError(target)


# --- command files ----------------------------------------------------------------------------------


def install_file(t: CommandFile, staging: Staging, manifest: Manifest, overwrite: bool = False) -> Line:
    current, recorded = staging.current(t.path), manifest.files.get(str(t.path))
    detail = ""
    if current == t.content:
        status = Status.UNCHANGED
    elif current is None or _sha(current) == recorded:
        status = Status.CREATED if current is None else Status.UPDATED
        staging.change(t.path, t.content)
    elif overwrite:
        backup = backup_of(t.path, staging)
        staging.change(backup, current)
        staging.change(t.path, t.content)
        status, detail = Status.UPDATED, f"yours is kept as {backup}"
    else:
        return Line(
            t.agent,
            Status.KEPT,
            str(t.path),
            f"you changed it; `teleclaude install --overwrite` replaces it with ours and keeps yours as "
            f"{backup_of(t.path, staging).name}",
        )
    manifest.files[str(t.path)] = _sha(t.content)
    return Line(t.agent, status, str(t.path), detail)


def backup_of(path: Path, staging: Staging) -> Path:
    """Where the user's own version of `path` goes when ours replaces it: `NAME.bak` (a name no agent CLI
    loads as a command), `NAME.bak.2`, ... when an earlier one is there."""
    backup, number = path.with_name(f"{path.name}.bak"), 1
    while staging.current(backup) is not None:
        number += 1
        backup = path.with_name(f"{path.name}.bak.{number}")
    return backup


def uninstall_file(t: CommandFile, staging: Staging, manifest: Manifest) -> Line:
    current, recorded = staging.current(t.path), manifest.files.pop(str(t.path), None)
    if current is None or recorded is None:
        return Line(t.agent, Status.UNCHANGED, str(t.path))
    if _sha(current) != recorded:
        return Line(t.agent, Status.KEPT, str(t.path), YOURS)
    staging.change(t.path, None)
    return Line(t.agent, Status.REMOVED, str(t.path))


# --- JSON values and list items ---------------------------------------------------------------------


def install_json(t: JsonEntry, staging: Staging, manifest: Manifest) -> Line:
    data, style = parse_json(t.path, staging.current(t.path))
    existing, record = get_at(data, t.keys), manifest.record(t.path, t.keys)
    what = f"{t.path} {'.'.join(t.keys)}"
    if existing == t.value:
        return Line(t.agent, Status.UNCHANGED, what)
    if existing == t.default:
        existing = MISSING
    if existing is not MISSING and (record is None or existing != record.value):
        return Line(
            t.agent, Status.KEPT, what, "it holds a different entry of yours; remove it to install ours"
        )
    created = set_at(t.path, data, t.keys, t.value)
    _record_json(t, created, record, staging, manifest)
    _stage_json(t.path, data, style, staging)
    return Line(t.agent, Status.CREATED if existing is MISSING else Status.UPDATED, what)


def install_list_item(t: JsonEntry, staging: Staging, manifest: Manifest) -> Line:
    data, style = parse_json(t.path, staging.current(t.path))
    items, record = get_at(data, t.keys), manifest.record(t.path, t.keys)
    what = f"{t.path} {'.'.join(t.keys)}"
    created: list[tuple[str, ...]] = []
    status = Status.CREATED
    if items is MISSING:
        created = set_at(t.path, data, t.keys, [t.value])
    elif not isinstance(items, list):
        raise BrokenConfig(t.path, f"has {'.'.join(t.keys)} that is not a list")
    elif t.value in items:
        return Line(t.agent, Status.UNCHANGED, what)
    elif record is not None and record.value in items:
        items[items.index(record.value)] = copy.deepcopy(t.value)
        status = Status.UPDATED
    else:
        items.append(copy.deepcopy(t.value))
    _record_json(t, created, record, staging, manifest)
    _stage_json(t.path, data, style, staging)
    return Line(t.agent, status, what)


def uninstall_json(t: JsonEntry, staging: Staging, manifest: Manifest) -> Line:
    record, current = manifest.record(t.path, t.keys), staging.current(t.path)
    what = f"{t.path} {'.'.join(t.keys)}"
    if record is None or current is None:
        manifest.drop_record(t.path, t.keys)
        if current is None and not manifest.records(t.path):
            manifest.forget_created(t.path)
        return Line(t.agent, Status.UNCHANGED, what)
    data, style = parse_json(t.path, current)
    existing = get_at(data, t.keys)
    status = Status.REMOVED
    if t.in_list and isinstance(existing, list) and record.value in existing:
        existing.remove(record.value)
    elif not t.in_list and existing == record.value:
        parent = get_at(data, t.keys[:-1])
        assert isinstance(parent, dict)  # `existing` was found in it
        del parent[t.keys[-1]]
    else:
        status = Status.KEPT if existing is not MISSING else Status.UNCHANGED
    prune_empty(data, staging.containers(t.path, record.created))
    manifest.drop_record(t.path, t.keys)
    last = not manifest.records(t.path)
    if last and manifest.forget_created(t.path) and not data:
        staging.change(t.path, None)
    else:
        _stage_json(t.path, data, style, staging)
    return Line(t.agent, status, what, YOURS if status is Status.KEPT else "")


def install_chained(t: Chained, staging: Staging, manifest: Manifest) -> Line:
    """Ours in the place of the user's value (which ours runs). Installed again, ours is rebuilt from the
    value it replaced; a value the user put there since is theirs now, and ours runs that one instead."""
    data, style = parse_json(t.path, staging.current(t.path))
    existing, record = get_at(data, t.keys), manifest.record(t.path, t.keys)
    what = f"{t.path} {'.'.join(t.keys)}"
    ours_before = record is not None and existing == record.value
    theirs = record.replaced if ours_before and record is not None else existing
    value = t.value(theirs)
    if existing == value:
        return Line(t.agent, Status.UNCHANGED, what)
    created = set_at(t.path, data, t.keys, value)
    entry = JsonEntry(t.agent, t.path, t.keys, value)
    _record_json(entry, created, record if ours_before else None, staging, manifest)
    recorded = manifest.record(t.path, t.keys)
    if recorded is not None and theirs is not MISSING:
        manifest.set_record(t.path, replace(recorded, replaced=copy.deepcopy(theirs)))
    _stage_json(t.path, data, style, staging)
    detail = "" if theirs is MISSING else "yours runs inside it, and comes back with --uninstall"
    return Line(t.agent, Status.UPDATED if ours_before else Status.CREATED, what, detail)


def uninstall_chained(t: Chained, staging: Staging, manifest: Manifest) -> Line:
    """The user's value back where ours is; ours changed by the user since stays theirs."""
    record, current = manifest.record(t.path, t.keys), staging.current(t.path)
    if record is None or record.replaced is MISSING or current is None:
        return uninstall_json(JsonEntry(t.agent, t.path, t.keys, None), staging, manifest)
    what = f"{t.path} {'.'.join(t.keys)}"
    data, style = parse_json(t.path, current)
    manifest.drop_record(t.path, t.keys)
    if get_at(data, t.keys) != record.value:
        return Line(t.agent, Status.KEPT, what, YOURS)
    set_at(t.path, data, t.keys, copy.deepcopy(record.replaced))
    _stage_json(t.path, data, style, staging)
    return Line(t.agent, Status.REMOVED, what, "yours is back")


def _record_json(
    t: JsonEntry,
    created: list[tuple[str, ...]],
    record: JsonRecord | None,
    staging: Staging,
    manifest: Manifest,
) -> None:
    known = (*created, *(record.created if record else ()))
    manifest.set_record(t.path, JsonRecord(t.keys, t.value, t.in_list, known))
    if not staging.existed(t.path):
        manifest.add_created([t.path])


def _stage_json(path: Path, data: dict, style: JsonStyle, staging: Staging) -> None:
    new = dump_json(data, style)
    if new != staging.current(path):
        staging.change(path, new)


# --- TOML tables ------------------------------------------------------------------------------------


def install_toml(t: TomlTable, staging: Staging, manifest: Manifest) -> Line:
    current = staging.current(t.path)
    data = parse_toml(t.path, current)
    text = (current or b"").decode("utf-8-sig")
    existing, recorded = get_at(data, t.keys), manifest.toml.get(str(t.path))
    what = f"{t.path} [{'.'.join(t.keys)}]"
    if existing == t.value:
        return Line(t.agent, Status.UNCHANGED, what)
    ours = recorded is not None and recorded in text
    if existing is not MISSING and not ours:
        return Line(
            t.agent, Status.KEPT, what, "it holds a different table of yours; remove it to install ours"
        )
    base = _cut(text, recorded) if ours and recorded is not None else text
    eol = "\r\n" if "\r\n" in text else "\n"
    separator = "" if not base else (eol if base.endswith("\n") else eol * 2)
    inserted = separator + toml_table(t.keys, t.value, eol)
    new_text = base + inserted
    if not _fits(new_text, data, t):
        raise BrokenConfig(
            t.path,
            f"cannot take [{'.'.join(t.keys)}] without being rewritten (is `{t.keys[0]}` an inline "
            f"table?); add this by hand instead:\n{toml_table(t.keys, t.value)}",
        )
    manifest.toml[str(t.path)] = inserted
    if current is None:
        manifest.add_created([t.path])
    staging.change(t.path, _with_bom(current, new_text))
    return Line(t.agent, Status.CREATED if existing is MISSING else Status.UPDATED, what)


def uninstall_toml(t: TomlTable, staging: Staging, manifest: Manifest) -> Line:
    current, recorded = staging.current(t.path), manifest.toml.pop(str(t.path), None)
    what = f"{t.path} [{'.'.join(t.keys)}]"
    if current is None or recorded is None:
        manifest.forget_created(t.path)
        return Line(t.agent, Status.UNCHANGED, what)
    data = parse_toml(t.path, current)
    text = current.decode("utf-8-sig")
    if recorded not in text:
        manifest.forget_created(t.path)
        return Line(t.agent, Status.KEPT, what, YOURS)
    rest = _cut(text, recorded)
    if parse_toml(t.path, rest.encode()) != without(data, t.keys):
        manifest.forget_created(t.path)
        return Line(t.agent, Status.KEPT, what, "you added to it, so it stays")
    if manifest.forget_created(t.path) and not rest.strip():
        staging.change(t.path, None)
    else:
        staging.change(t.path, _with_bom(current, rest))
    return Line(t.agent, Status.REMOVED, what)


def _fits(new_text: str, old_data: dict, t: TomlTable) -> bool:
    """Whether `new_text` holds the table and, apart from it, exactly what the file held before."""
    try:
        new_data = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError:
        return False
    return get_at(new_data, t.keys) == t.value and without(new_data, t.keys) == without(old_data, t.keys)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cut(text: str, piece: str) -> str:
    """`text` without the last occurrence of `piece`."""
    at = text.rfind(piece)
    return text[:at] + text[at + len(piece) :]


def _with_bom(original: bytes | None, text: str) -> bytes:
    bom = b"\xef\xbb\xbf" if original and original.startswith(b"\xef\xbb\xbf") else b""
    return bom + text.encode("utf-8")
