"""Agent CLI config files as data, edited so that what is not teleclaude's keeps its bytes.

JSON files (settings.json, .mcp.json, hooks.json) are parsed and written back in the style
they were found in (indent, separators, escaping, line endings), so a file written by `JSON.stringify(x,
null, 2)` or `json.dumps(x, indent=4)` round-trips byte for byte. TOML files (config.toml) are never
re-serialized: a table is appended as text or a recorded piece of text is removed, and tomllib checks that
nothing else changed.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from teleclaude.agents.formats import basic_string

MISSING = object()


class BrokenConfig(Exception):
    """A config file that cannot be read or safely edited; `reason` says why and what to do."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# --- JSON -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonStyle:
    indent: int | str | None = 2
    separators: tuple[str, str] = (",", ": ")
    ensure_ascii: bool = False
    eol: str = "\n"
    final_newline: bool = True


def detect_style(text: str) -> JsonStyle:
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    indent: int | str | None = 0 if len(lines) > 1 else None
    for line in lines[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            whitespace = line[: len(line) - len(stripped)]
            indent = whitespace if "\t" in whitespace else len(whitespace)
            break
    if indent is None:  # one line: keep its spacing after commas and colons
        separators = ("," if re.search(r",\S", text) else ", ", ":" if re.search(r'":\S', text) else ": ")
    else:
        separators = (",", ": ")
    return JsonStyle(
        indent=indent,
        separators=separators,
        ensure_ascii=text.isascii() and "\\u" in text,
        eol=eol,
        final_newline=text.endswith(("\n", "\r")),
    )


def parse_json(path: Path, data: bytes | None) -> tuple[dict, JsonStyle]:
    """The file's top-level object and style; an absent or blank file is an empty object."""
    if data is None:
        return {}, JsonStyle()
    text = _text(path, data)
    if not text.strip():
        return {}, JsonStyle()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise BrokenConfig(
            path, f"is not valid JSON ({error.msg} at line {error.lineno} column {error.colno})"
        ) from None
    if not isinstance(value, dict):
        raise BrokenConfig(path, "does not hold a JSON object at the top")
    return value, detect_style(text)


def dump_json(value: dict, style: JsonStyle) -> bytes:
    text = json.dumps(
        value, indent=style.indent, separators=style.separators, ensure_ascii=style.ensure_ascii
    )
    text = text.replace("\n", style.eol)
    return (text + (style.eol if style.final_newline else "")).encode("utf-8")


def get_at(data: dict, keys: tuple[str, ...]) -> object:
    node: object = data
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    return node


def set_at(path: Path, data: dict, keys: tuple[str, ...], value: object) -> list[tuple[str, ...]]:
    """Set `keys` to a copy of `value`, creating objects on the way; returns the key paths it created."""
    created = []
    node = data
    for depth, key in enumerate(keys[:-1], start=1):
        if key not in node:
            node[key] = {}
            created.append(keys[:depth])
        node = node[key]
        if not isinstance(node, dict):
            raise BrokenConfig(path, f"{'.'.join(keys[:depth])} is not a JSON object")
    if keys[-1] not in node:
        created.append(keys)
    node[keys[-1]] = copy.deepcopy(value)
    return created


def delete_at(data: dict, keys: tuple[str, ...]) -> None:
    parent = get_at(data, keys[:-1])
    if isinstance(parent, dict):
        parent.pop(keys[-1], None)


def prune_empty(data: dict, created: list[tuple[str, ...]]) -> None:
    """Remove the containers teleclaude created once they are empty again, deepest first."""
    for keys in sorted(created, key=len, reverse=True):
        if get_at(data, keys) in ({}, []):
            delete_at(data, keys)


# --- TOML -------------------------------------------------------------------------------------------


def parse_toml(path: Path, data: bytes | None) -> dict:
    if data is None:
        return {}
    try:
        return tomllib.loads(_text(path, data))
    except tomllib.TOMLDecodeError as error:
        raise BrokenConfig(path, f"is not valid TOML ({error})") from None


def toml_table(keys: tuple[str, ...], values: dict[str, str | bool | list[str]], eol: str = "\n") -> str:
    """`[a.b]` and its `key = value` lines; values are strings, booleans or lists of strings."""
    lines = ["[" + ".".join(_toml_key(key) for key in keys) + "]"]
    for key, value in values.items():
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, list):
            rendered = "[" + ", ".join(basic_string(item) for item in value) + "]"
        else:
            rendered = basic_string(value)
        lines.append(f"{_toml_key(key)} = {rendered}")
    return eol.join(lines) + eol


def without(data: dict, keys: tuple[str, ...]) -> dict:
    copied = copy.deepcopy(data)
    delete_at(copied, keys)
    prune_empty(copied, [keys[:depth] for depth in range(1, len(keys))])
    return copied


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else basic_string(key)


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BrokenConfig(path, f"is not UTF-8 text (byte {error.start})") from None
