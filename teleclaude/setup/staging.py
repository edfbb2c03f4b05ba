"""Staged file changes: every file is read once and every new content computed before the first write.

A merge asks for a file's `current` bytes (the staged ones if it changed already) and stages new ones with
`change`; `write` then applies them all. So a broken config found late stops the run with nothing written.
An uninstall also gathers here the containers teleclaude created in each file (`containers`), so one that
several entries shared (a settings file's `hooks`) goes with the last of them.
"""

from __future__ import annotations

from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.setup.manifest import Keys, Manifest


class Staging:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root  # project scope: a file there must stay in the repository, links resolved
        self.before: dict[Path, bytes | None] = {}
        self.after: dict[Path, bytes | None] = {}
        self.created: dict[Path, list[Keys]] = {}  # uninstall: containers made for any entry of the file

    def current(self, path: Path) -> bytes | None:
        if path not in self.before:
            if self.root is not None and path.is_relative_to(self.root):
                fs.inside(self.root, path)  # a link the repository brings never leads a write out of it
            self.before[path] = fs.read_bytes(path)
        return self.after.get(path, self.before[path])

    def existed(self, path: Path) -> bool:
        """Whether `path` was there before this run."""
        self.current(path)
        return self.before[path] is not None

    def change(self, path: Path, data: bytes | None) -> None:
        """Stage new contents for `path`; None removes it."""
        self.current(path)
        self.after[path] = data

    def containers(self, path: Path, created: tuple[Keys, ...]) -> list[Keys]:
        """Every container teleclaude created in `path` for the entries taken out so far, `created` added."""
        known = self.created.setdefault(path, [])
        known += [keys for keys in created if keys not in known]
        return list(known)

    def write(self, manifest: Manifest) -> None:
        """Apply every change. Folders made for new files go into `manifest.created`; a folder it lists is
        removed with the last file in it."""
        for path, data in self.after.items():
            if data == self.before[path]:
                continue
            if data is None:
                path.unlink()
                _remove_created_folders(path.parent, manifest)
            else:
                manifest.add_created(_make_folders(path.parent))
                fs.atomic_write(path, data)


def _make_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; the ones made, outermost first."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir()
    return list(reversed(missing))


def _remove_created_folders(folder: Path, manifest: Manifest) -> None:
    while manifest.was_created(folder) and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        manifest.forget_created(folder)
        folder = folder.parent
