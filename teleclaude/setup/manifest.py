"""The record of what `teleclaude install` wrote: `~/.teleclaude/install-manifest.json`.

The file is a JSON object, unchanged since the first release so every existing install can still uninstall:

    {"files":   {path: sha256 of the command file as installed},
     "entries": {path: [{"keys": [...], "list": bool, "value": ..., "created": [[...], ...],
                         "replaced": the user's value it took the place of, as JSON text (its keys in
                                     their order; only when there was one)}]},
     "toml":    {path: the TOML text appended},
     "created": [files and folders teleclaude created, in the order it created them]}

Empty parts are left out. In memory each part is a typed record; `load` and `dump` convert.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters.agent_config import MISSING, parse_json

Keys = tuple[str, ...]


@dataclass(frozen=True)
class JsonRecord:
    """`value` set at `keys` of a JSON file (`in_list`: one item appended to the list at `keys`), and the
    tables teleclaude had to create to hold it, so uninstall removes them once they are empty again; and the
    user's own value it took the place of (`replaced`; MISSING: none), which uninstall puts back."""

    keys: Keys
    value: object
    in_list: bool
    created: tuple[Keys, ...] = ()
    replaced: object = MISSING

    @classmethod
    def load(cls, data: dict) -> JsonRecord:
        created = tuple(tuple(keys) for keys in data.get("created", []))
        replaced = _json(data.get("replaced"))
        return cls(tuple(data["keys"]), data["value"], bool(data.get("list", False)), created, replaced)

    def dump(self) -> dict:
        created = [list(keys) for keys in self.created]
        data: dict[str, object] = {
            "keys": list(self.keys),
            "list": self.in_list,
            "value": self.value,
            "created": created,
        }
        return data if self.replaced is MISSING else data | {"replaced": json.dumps(self.replaced)}


def _json(text: object) -> object:
    """A value kept as JSON text; MISSING when there is none (or it no longer reads)."""
    try:
        return json.loads(text) if isinstance(text, str) else MISSING
    except ValueError:
        return MISSING


@dataclass
class Manifest:
    files: dict[str, str]  # command file -> sha256 of what teleclaude wrote
    entries: dict[str, list[JsonRecord]]  # JSON file -> what teleclaude set in it
    toml: dict[str, str]  # TOML file -> the text teleclaude appended
    created: list[str]  # files and folders teleclaude created

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data, _ = parse_json(path, fs.read_bytes(path))
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        entries = {
            file: [JsonRecord.load(record) for record in records]
            for file, records in data.get("entries", {}).items()
        }
        return cls(
            dict(data.get("files", {})), entries, dict(data.get("toml", {})), list(data.get("created", []))
        )

    def dump(self) -> dict:
        entries = {file: [record.dump() for record in records] for file, records in self.entries.items()}
        data = {"files": self.files, "entries": entries, "toml": self.toml, "created": self.created}
        return {key: value for key, value in data.items() if value}

    def save(self, path: Path) -> None:
        """Write the manifest; an empty one removes the file (and its folder, once empty)."""
        data = self.dump()
        if not data:
            path.unlink(missing_ok=True)
            if path.parent.is_dir() and not any(path.parent.iterdir()):
                path.parent.rmdir()
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fs.atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=0o600)
        fs.make_private(path.parent)  # made 0755 by an older teleclaude

    # JSON records

    def records(self, path: Path) -> list[JsonRecord]:
        return self.entries.get(str(path), [])

    def record(self, path: Path, keys: Keys) -> JsonRecord | None:
        return next((record for record in self.records(path) if record.keys == keys), None)

    def set_record(self, path: Path, record: JsonRecord) -> None:
        self.entries[str(path)] = [*self._others(path, record.keys), record]

    def drop_record(self, path: Path, keys: Keys) -> None:
        left = self._others(path, keys)
        if left:
            self.entries[str(path)] = left
        else:
            self.entries.pop(str(path), None)

    def _others(self, path: Path, keys: Keys) -> list[JsonRecord]:
        return [record for record in self.records(path) if record.keys != keys]

    # created files and folders

    def add_created(self, paths: Iterable[Path]) -> None:
        self.created.extend(str(path) for path in paths if str(path) not in self.created)

    def was_created(self, path: Path) -> bool:
        return str(path) in self.created

    def forget_created(self, path: Path) -> bool:
        """Drop `path` from what teleclaude created; whether it was there."""
        if str(path) not in self.created:
            return False
        self.created.remove(str(path))
        return True
