"""What a sandboxed worker needs to reach (adapters/sandbox.py `worker_layout`): its CLI's install, the
interpreter its script names and teleclaude's own (`installs`), and every link on the way to the paths of its
layout (`links_on_the_way`, one lstat a path's component: runtime/core/sandbox.py decides what to show of
where they lead)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.runtime.core.sandbox import Layout

FIRST_LINE = 256  # bytes of a CLI's script read for the interpreter its first line names


def installs(binary: str, path: str) -> list[Path]:
    """What a CLI and teleclaude need to run: the CLI's folder (and its real one, behind a link), the
    interpreter its script names, the folders on PATH, and teleclaude's interpreter and package."""
    program = Path(binary).resolve()
    found = [Path(binary).parent, program.parent, *_package_root(program), *_interpreter(program, path)]
    folders = [Path(folder) for folder in path.split(os.pathsep) if folder and Path(folder).is_absolute()]
    found += folders
    # a version manager's shims (pyenv, rbenv, asdf) run it from the folder they are in
    found += [folder.parent for folder in folders if folder.name == "shims"]
    found += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent]
    found.append(Path(__file__).resolve().parents[2])  # the folder teleclaude's package is in
    return [p for p in dict.fromkeys(found) if p.is_dir()]


def _interpreter(program: Path, path: str) -> list[Path]:
    """The install of the interpreter a script's first line names (through `env`, on PATH): the folder its
    folder is in behind its links (the Python a venv links to), and the venv it is named in. Read only
    from a regular file, never waited on (a FIFO where the program should be would stop every start)."""
    line = fs.read_head(program, FIRST_LINE).split(b"\n", 1)[0]
    words = line[2:].decode(errors="replace").split() if line.startswith(b"#!") else []
    if words[:1] and words[0].rsplit("/", 1)[-1] == "env":
        words = words[2:] if words[1:2] == ["-S"] else words[1:]
    if not words:
        return []
    found = words[0] if words[0].startswith("/") else shutil.which(words[0], path=path)
    if not found:
        return []
    named = Path(found)
    venv = [named.parent.parent] if (named.parent.parent / "pyvenv.cfg").is_file() else []
    return [*venv, named.resolve().parent.parent]


def _package_root(program: Path) -> list[Path]:
    """The npm package a CLI's program is in (the first folder above it with a package.json): what it loads
    at run time lives there too (a native build, a bundle, a platform-specific package)."""
    for folder in program.parents:
        if (folder / "package.json").is_file():
            return [folder]
        if folder.name == "node_modules":
            break
    return []


def named(layout: Layout) -> list[str]:
    """Every path a layout names (where bubblewrap mounts something, or the worker starts)."""
    paths = [layout.workdir, *layout.homes, *layout.hidden, *layout.readonly, *layout.writable]
    paths += [*layout.writable_files, *layout.protected, *(target for _, target in layout.moved)]
    return paths + [target for _, target in layout.shown_files]


MAX_HOPS = 40  # links followed on the way to one path (the kernel's own limit)


def links_on_the_way(paths: list[str]) -> dict[str, str]:
    """Each link met following `paths` as the kernel does, hop by hop: its place (its folder resolved) and
    where it leads, resolved (runtime/core/sandbox.py `resolve` reads them). One lstat a component (the
    paths share most of theirs: each is looked at once)."""
    found: dict[str, str] = {}
    plain: set[str] = set()  # components seen not to be links
    for path in paths:
        at, parts, hops = "/", path.split("/")[1:], 0
        while parts and hops <= MAX_HOPS:
            part = parts.pop(0)
            if part in ("", ".", ".."):
                at = os.path.dirname(at) if part == ".." else at
                continue
            here = f"{at.rstrip('/')}/{part}"
            if here in found or here in plain:
                at = found.get(here, here)
                continue
            try:
                if not stat.S_ISLNK(os.lstat(here).st_mode):
                    plain.add(here)
                    at = here
                    continue
                target = os.readlink(here)
            except OSError:  # not there (yet): nothing further to find
                break
            found[here] = os.path.realpath(here)
            hops += 1
            at = "/" if target.startswith("/") else at
            parts = [*target.split("/"), *parts]
    return found
