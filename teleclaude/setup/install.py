"""`teleclaude install`: role commands, the MCP server and the agent stop hook, merged into each agent CLI.

Everything teleclaude writes is recorded in `~/.teleclaude/install-manifest.json`: the hash of each command
file, the JSON values and TOML text it added, and the files and folders it created. The record is what makes
the promises hold: a command file whose hash no longer matches was changed by its user and is kept; a config
value that differs from the recorded one is the user's and is kept; `--uninstall` removes exactly the
recorded things, so a config teleclaude only added keys to returns to its original bytes.

Every file is read and every change computed before the first write, so a broken config stops the run with
nothing written.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import shutil
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters import fs
from teleclaude.adapters.agent_config import (
    MISSING,
    BrokenConfig,
    dump_json,
    get_at,
    parse_json,
    parse_toml,
    prune_empty,
    set_at,
    toml_table,
    without,
)
from teleclaude.adapters.agent_config import (
    basic_string as toml_string,
)
from teleclaude.adapters.agent_config import (
    multiline_string as toml_multiline,
)
from teleclaude.errors import Error, ErrorCode

AGENTS = ("claude", "codex", "gemini")
SERVER = "teleclaude"
MANIFEST = Path(".teleclaude") / "install-manifest.json"
TEMPLATE_MARK = "<!-- teleclaude:template "


class Scope(Enum):
    USER = "user"
    PROJECT = "project"


class Status(Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    KEPT = "kept"  # the user's version differs from teleclaude's: left alone
    REMOVED = "removed"
    SKIPPED = "skipped"


# --- what to install --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandFile:
    agent: str
    path: Path
    content: bytes


@dataclass(frozen=True)
class JsonEntry:
    """`value` at `keys` of a JSON file, or (in_list) one item of the list at `keys`."""

    agent: str
    path: Path
    keys: tuple[str, ...]
    value: object
    in_list: bool = False


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


Target = CommandFile | JsonEntry | TomlTable | Skip


@dataclass(frozen=True)
class Line:
    agent: str
    status: Status
    what: str  # a path, or what was skipped
    detail: str = ""


@dataclass(frozen=True)
class Report:
    lines: tuple[Line, ...]
    agents: tuple[str, ...]
    scope: Scope
    dry_run: bool
    uninstall: bool

    def count(self, status: Status) -> int:
        return sum(1 for line in self.lines if line.status is status)

    def text(self) -> str:
        verb = "uninstall" if self.uninstall else "install"
        head = "DRY RUN: would" if self.dry_run else "OK:"
        done = verb + "ed" if not self.dry_run else verb
        statuses = (Status.REMOVED,) if self.uninstall else (Status.CREATED, Status.UPDATED)
        counts = ", ".join(f"{self.count(s)} {s.value}" for s in (*statuses, Status.UNCHANGED, Status.KEPT))
        first = f"{head} {done} teleclaude for {', '.join(self.agents)} ({self.scope.value} scope): {counts}."
        shown = [line for line in self.lines if line.status is not Status.UNCHANGED]
        width = max((len(line.status.value) for line in shown), default=0)
        rows = [
            f"{line.agent}: {line.status.value:<{width}} {line.what}"
            + (f": {line.detail}" if line.detail else "")
            for line in shown
        ]
        if self.dry_run:
            rows.append("Nothing was written.")
        return "\n".join([first, *rows])


# --- the library call -------------------------------------------------------------------------------


def install(
    agents: Sequence[str] = (),
    scope: Scope = Scope.USER,
    cwd: str | os.PathLike | None = None,
    dry_run: bool = False,
    uninstall: bool = False,
) -> Report | Error:
    home = Path.home()
    chosen = tuple(agents) or detect_agents(home)
    if not chosen:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            "No agent CLI found: none of claude, codex, gemini is on PATH, and there is no ~/.claude, "
            "~/.codex or ~/.gemini.\nName the ones to set up: teleclaude install --claude --codex --gemini.",
        )
    root = None
    if scope is Scope.PROJECT:
        from teleclaude.adapters.git import find_repo

        root = find_repo(cwd or os.getcwd()).root
    try:
        manifest = Manifest.load(home / MANIFEST)
        targets = [t for agent in chosen for t in agent_targets(agent, scope, home, root, uninstall)]
        plan = Plan(manifest)
        lines = [plan.uninstall(t) if uninstall else plan.install(t) for t in targets]
    except BrokenConfig as error:
        return Error(
            ErrorCode.INVALID_CONFIG,
            f"{error.path} {error.reason}.\nNothing was written. Fix the file (or move it aside), then run "
            "`teleclaude install` again.",
        )
    if not dry_run:
        plan.apply(home / MANIFEST)
    return Report(tuple(lines), chosen, scope, dry_run, uninstall)


def detect_agents(home: Path) -> tuple[str, ...]:
    """Every agent CLI on PATH or with a config folder."""
    folders = {"claude": home / ".claude", "codex": codex_home(home), "gemini": home / ".gemini"}
    return tuple(agent for agent in AGENTS if shutil.which(agent) or folders[agent].is_dir())


def codex_home(home: Path) -> Path:
    return Path(os.environ.get("CODEX_HOME") or home / ".codex")


def launcher() -> list[str]:
    """The command that starts this teleclaude whatever PATH the agent CLI runs with."""
    script = Path(sys.executable).parent / "teleclaude"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "teleclaude"]


def stop_hook_available() -> bool:
    """Whether this teleclaude has `teleclaude hook stop`; wiring a missing command would block every stop."""
    from teleclaude.cli import checks as cli_checks

    return any(command.name == "hook" for command in cli_checks.COMMANDS)


# --- where each agent CLI looks ---------------------------------------------------------------------


def agent_targets(agent: str, scope: Scope, home: Path, root: Path | None, uninstall: bool) -> list[Target]:
    layout = {"claude": _claude, "codex": _codex, "gemini": _gemini}[agent]
    with_hook = uninstall or stop_hook_available()  # uninstall removes a hook installed earlier
    targets = layout(scope, root if scope is Scope.PROJECT else home, home, with_hook)
    if not with_hook:
        targets.append(Skip(agent, "stop hook: this teleclaude has no `teleclaude hook stop` command yet"))
    return targets


def _claude(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    folder = base / ".claude"
    targets: list[Target] = [
        CommandFile("claude", folder / "commands" / f"{name}.md", text.encode()) for name, text in _markdown()
    ]
    mcp_file = base / ".mcp.json" if scope is Scope.PROJECT else home / ".claude.json"
    targets.append(JsonEntry("claude", mcp_file, ("mcpServers", SERVER), {"type": "stdio", **_server()}))
    if with_hook:
        stop = {"hooks": [_hook("claude")]}
        targets.append(JsonEntry("claude", folder / "settings.json", ("hooks", "Stop"), stop, in_list=True))
    return targets


def _codex(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    folder = base / ".codex" if scope is Scope.PROJECT else codex_home(home)
    if scope is Scope.PROJECT:
        targets: list[Target] = [
            Skip("codex", "role commands: teleclaude installs Codex skills into ~/.codex/skills (user scope)")
        ]
    else:
        targets = [
            CommandFile("codex", folder / "skills" / name / "SKILL.md", codex_skill(name, text).encode())
            for name, text in _markdown()
        ]
    targets.append(TomlTable("codex", folder / "config.toml", ("mcp_servers", SERVER), _server()))
    if with_hook:
        stop = {"hooks": [_hook("codex")]}
        targets.append(JsonEntry("codex", folder / "hooks.json", ("hooks", "Stop"), stop, in_list=True))
    return targets


def _gemini(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    folder = base / ".gemini"
    targets: list[Target] = [
        CommandFile("gemini", folder / "commands" / f"{name}.toml", gemini_toml(text).encode())
        for name, text in _markdown()
    ]
    settings = folder / "settings.json"
    targets.append(JsonEntry("gemini", settings, ("mcpServers", SERVER), _server()))
    if with_hook:
        after_agent = {"hooks": [{"name": "teleclaude-stop", **_hook("gemini")}]}
        targets.append(JsonEntry("gemini", settings, ("hooks", "AfterAgent"), after_agent, in_list=True))
    return targets


def _server() -> dict:
    run = launcher()
    return {"command": run[0], "args": [*run[1:], "mcp"]}


def _hook(agent: str) -> dict:
    return {"type": "command", "command": shlex.join([*launcher(), "hook", "stop", "--agent", agent])}


# --- the command files ------------------------------------------------------------------------------


def command_names() -> tuple[str, ...]:
    return tuple(
        sorted(
            entry.name.removesuffix(".md")
            for entry in assets.folder("commands").iterdir()
            if entry.name.endswith(".md")
        )
    )


def command_markdown(name: str) -> str:
    """A command as installed: its source with every template marker replaced by the template itself."""
    text = assets.read_text("commands", f"{name}.md")
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith(TEMPLATE_MARK):
            template = line.removeprefix(TEMPLATE_MARK).strip().removesuffix("-->").strip()
            lines.append("````markdown\n" + template_text(template) + "````\n")
        else:
            lines.append(line)
    return "".join(lines)


def template_text(name: str) -> str:
    return assets.read_text("templates", name)


def _markdown() -> list[tuple[str, str]]:
    return [(name, command_markdown(name)) for name in command_names()]


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(`key: value` pairs of a leading `---` block, the rest of the text)."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3)
    if end == -1:
        return {}, text
    meta = {}
    for line in text[4:end].splitlines():
        key, colon, value = line.partition(":")
        if colon:
            meta[key.strip()] = value.strip()
    return meta, text[end + len("\n---\n") :]


def gemini_toml(markdown: str) -> str:
    """A Gemini CLI command file: `description`, and the prompt with `{{args}}` for `$ARGUMENTS`."""
    meta, body = split_front_matter(markdown)
    prompt = body.lstrip("\n").replace("$ARGUMENTS", "{{args}}")
    return (
        "# Installed by `teleclaude install`; `teleclaude install --uninstall` removes it.\n"
        f"description = {toml_string(meta.get('description', ''))}\n"
        f"prompt = {toml_multiline(prompt)}\n"
    )


def codex_skill(name: str, markdown: str) -> str:
    """A Codex skill (`~/.codex/skills/NAME/SKILL.md`, invoked as `$NAME args`): Codex 0.169 has no custom
    prompts any more and does not substitute `$ARGUMENTS` in a skill, so the skill says where they are."""
    meta, body = split_front_matter(markdown)
    description = meta.get("description", "") or f"teleclaude role command {name}"
    return (
        "---\n"
        f"name: {name}\n"
        f"description: {description}\n"
        "---\n\n"
        f"<!-- Installed by `teleclaude install`; `teleclaude install --uninstall` removes it. -->\n"
        f"Arguments: this skill is invoked as `${name} ARGUMENTS`. Everywhere below, `$ARGUMENTS` stands for "
        f"the text after `${name}` in the user's message (empty when there is none).\n\n" + body.lstrip("\n")
    )


# --- the record of what teleclaude installed --------------------------------------------------------


class Manifest:
    """`files`: path -> sha256; `entries`: path -> [JSON record]; `toml`: path -> text; `created`: paths."""

    def __init__(self, data: dict) -> None:
        self.files: dict[str, str] = data.get("files", {})
        self.entries: dict[str, list[dict]] = data.get("entries", {})
        self.toml: dict[str, str] = data.get("toml", {})
        self.created: list[str] = data.get("created", [])

    @classmethod
    def load(cls, path: Path) -> Manifest:
        data, _ = parse_json(path, fs.read_bytes(path))
        return cls(data)

    def dump(self) -> dict:
        data = {"files": self.files, "entries": self.entries, "toml": self.toml, "created": self.created}
        return {key: value for key, value in data.items() if value}

    def entry(self, path: Path, keys: tuple[str, ...]) -> dict | None:
        return next((e for e in self.entries.get(str(path), []) if tuple(e["keys"]) == keys), None)

    def set_entry(self, path: Path, record: dict) -> None:
        others = [e for e in self.entries.get(str(path), []) if e["keys"] != record["keys"]]
        self.entries[str(path)] = [*others, record]

    def drop_entry(self, path: Path, keys: tuple[str, ...]) -> None:
        left = [e for e in self.entries.get(str(path), []) if tuple(e["keys"]) != keys]
        if left:
            self.entries[str(path)] = left
        else:
            self.entries.pop(str(path), None)


# --- computing the changes --------------------------------------------------------------------------


class Plan:
    """New contents for files, computed from their current bytes; nothing is written until `apply`."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self.original = copy.deepcopy(manifest.dump())
        self.before: dict[Path, bytes | None] = {}
        self.after: dict[Path, bytes | None] = {}

    def current(self, path: Path) -> bytes | None:
        if path not in self.before:
            self.before[path] = fs.read_bytes(path)
        return self.after.get(path, self.before[path])

    def change(self, path: Path, data: bytes | None) -> None:
        self.current(path)
        self.after[path] = data

    # install

    def install(self, target: Target) -> Line:
        match target:
            case Skip(agent=agent, what=what):
                return Line(agent, Status.SKIPPED, what)
            case CommandFile():
                return self._install_file(target)
            case JsonEntry(in_list=True):
                return self._install_list_item(target)
            case JsonEntry():
                return self._install_json(target)
            case TomlTable():
                return self._install_toml(target)
        raise TypeError(target)

    def _install_file(self, t: CommandFile) -> Line:
        current, recorded = self.current(t.path), self.manifest.files.get(str(t.path))
        if current == t.content:
            status = Status.UNCHANGED
        elif current is None or _sha(current) == recorded:
            status = Status.CREATED if current is None else Status.UPDATED
            self.change(t.path, t.content)
        else:
            return Line(
                t.agent, Status.KEPT, str(t.path), "you changed it; delete it and install again to update it"
            )
        self.manifest.files[str(t.path)] = _sha(t.content)
        return Line(t.agent, status, str(t.path))

    def _install_json(self, t: JsonEntry) -> Line:
        data, style = parse_json(t.path, self.current(t.path))
        existing, record = get_at(data, t.keys), self.manifest.entry(t.path, t.keys)
        what = f"{t.path} {'.'.join(t.keys)}"
        if existing == t.value:
            return Line(t.agent, Status.UNCHANGED, what)
        if existing is not MISSING and (record is None or existing != record["value"]):
            return Line(
                t.agent, Status.KEPT, what, "it holds a different entry of yours; remove it to install ours"
            )
        created = set_at(t.path, data, t.keys, t.value)
        self._record_json(t, created, record)
        self._write_json(t.path, data, style)
        return Line(t.agent, Status.CREATED if existing is MISSING else Status.UPDATED, what)

    def _install_list_item(self, t: JsonEntry) -> Line:
        data, style = parse_json(t.path, self.current(t.path))
        items, record = get_at(data, t.keys), self.manifest.entry(t.path, t.keys)
        what = f"{t.path} {'.'.join(t.keys)}"
        created: list[tuple[str, ...]] = []
        status = Status.CREATED
        if items is MISSING:
            created = set_at(t.path, data, t.keys, [t.value])
        elif not isinstance(items, list):
            raise BrokenConfig(t.path, f"has {'.'.join(t.keys)} that is not a list")
        elif t.value in items:
            return Line(t.agent, Status.UNCHANGED, what)
        elif record is not None and record["value"] in items:
            items[items.index(record["value"])] = copy.deepcopy(t.value)
            status = Status.UPDATED
        else:
            items.append(copy.deepcopy(t.value))
        self._record_json(t, created, record)
        self._write_json(t.path, data, style)
        return Line(t.agent, status, what)

    def _record_json(self, t: JsonEntry, created: list[tuple[str, ...]], record: dict | None) -> None:
        known = [list(keys) for keys in created] + (record["created"] if record else [])
        entry = {"keys": list(t.keys), "list": t.in_list, "value": t.value, "created": known}
        self.manifest.set_entry(t.path, entry)
        if self.before.get(t.path) is None and str(t.path) not in self.manifest.created:
            self.manifest.created.append(str(t.path))

    def _write_json(self, path: Path, data: dict, style) -> None:
        new = dump_json(data, style)
        if new != self.current(path):
            self.change(path, new)

    def _install_toml(self, t: TomlTable) -> Line:
        current = self.current(t.path)
        data = parse_toml(t.path, current)
        text = (current or b"").decode("utf-8-sig")
        existing, recorded = get_at(data, t.keys), self.manifest.toml.get(str(t.path))
        what = f"{t.path} [{'.'.join(t.keys)}]"
        if existing == t.value:
            return Line(t.agent, Status.UNCHANGED, what)
        ours = recorded is not None and recorded in text
        if existing is not MISSING and not ours:
            return Line(
                t.agent, Status.KEPT, what, "it holds a different table of yours; remove it to install ours"
            )
        base = _cut(text, recorded) if ours else text
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
        self.manifest.toml[str(t.path)] = inserted
        if current is None and str(t.path) not in self.manifest.created:
            self.manifest.created.append(str(t.path))
        self.change(t.path, _with_bom(current, new_text))
        return Line(t.agent, Status.CREATED if existing is MISSING else Status.UPDATED, what)

    # uninstall

    def uninstall(self, target: Target) -> Line:
        match target:
            case Skip(agent=agent, what=what):
                return Line(agent, Status.SKIPPED, what)
            case CommandFile():
                return self._uninstall_file(target)
            case JsonEntry():
                return self._uninstall_json(target)
            case TomlTable():
                return self._uninstall_toml(target)
        raise TypeError(target)

    def _uninstall_file(self, t: CommandFile) -> Line:
        current, recorded = self.current(t.path), self.manifest.files.pop(str(t.path), None)
        if current is None or recorded is None:
            return Line(t.agent, Status.UNCHANGED, str(t.path))
        if _sha(current) != recorded:
            return Line(t.agent, Status.KEPT, str(t.path), "you changed it, so it stays")
        self.change(t.path, None)
        return Line(t.agent, Status.REMOVED, str(t.path))

    def _uninstall_json(self, t: JsonEntry) -> Line:
        record, current = self.manifest.entry(t.path, t.keys), self.current(t.path)
        what = f"{t.path} {'.'.join(t.keys)}"
        if record is None or current is None:
            self.manifest.drop_entry(t.path, t.keys)
            if current is None and not self.manifest.entries.get(str(t.path)):
                self._forget_created(t.path)
            return Line(t.agent, Status.UNCHANGED, what)
        data, style = parse_json(t.path, current)
        existing = get_at(data, t.keys)
        status = Status.REMOVED
        if t.in_list and isinstance(existing, list) and record["value"] in existing:
            existing.remove(record["value"])
        elif not t.in_list and existing == record["value"]:
            del get_at(data, t.keys[:-1])[t.keys[-1]]
        else:
            status = Status.KEPT if existing is not MISSING else Status.UNCHANGED
        prune_empty(data, [tuple(keys) for keys in record["created"]])
        self.manifest.drop_entry(t.path, t.keys)
        last = not self.manifest.entries.get(str(t.path))
        if last and self._forget_created(t.path) and not data:
            self.change(t.path, None)
        else:
            self._write_json(t.path, data, style)
        return Line(t.agent, status, what, "you changed it, so it stays" if status is Status.KEPT else "")

    def _uninstall_toml(self, t: TomlTable) -> Line:
        current, recorded = self.current(t.path), self.manifest.toml.pop(str(t.path), None)
        what = f"{t.path} [{'.'.join(t.keys)}]"
        if current is None or recorded is None:
            self._forget_created(t.path)
            return Line(t.agent, Status.UNCHANGED, what)
        data = parse_toml(t.path, current)
        text = current.decode("utf-8-sig")
        if recorded not in text:
            self._forget_created(t.path)
            return Line(t.agent, Status.KEPT, what, "you changed it, so it stays")
        rest = _cut(text, recorded)
        if parse_toml(t.path, rest.encode()) != without(data, t.keys):
            self._forget_created(t.path)
            return Line(t.agent, Status.KEPT, what, "you added to it, so it stays")
        if self._forget_created(t.path) and not rest.strip():
            self.change(t.path, None)
        else:
            self.change(t.path, _with_bom(current, rest))
        return Line(t.agent, Status.REMOVED, what)

    def _forget_created(self, path: Path) -> bool:
        """Drop `path` from the files teleclaude created; whether it was one."""
        if str(path) not in self.manifest.created:
            return False
        self.manifest.created.remove(str(path))
        return True

    # writing

    def apply(self, manifest_path: Path) -> None:
        for path, data in self.after.items():
            if data == self.before[path]:
                continue
            if data is None:
                path.unlink()
                self._remove_created_folders(path.parent)
            else:
                self._make_folders(path.parent)
                fs.atomic_write(path, data)
        self._save_manifest(manifest_path)

    def _make_folders(self, folder: Path) -> None:
        missing = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for made in reversed(missing):
            made.mkdir()
            self.manifest.created.append(str(made))

    def _remove_created_folders(self, folder: Path) -> None:
        while str(folder) in self.manifest.created and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            self.manifest.created.remove(str(folder))
            folder = folder.parent

    def _save_manifest(self, path: Path) -> None:
        data = self.manifest.dump()
        if data == self.original:
            return
        if not data:
            path.unlink(missing_ok=True)
            if path.parent.is_dir() and not any(path.parent.iterdir()):
                path.parent.rmdir()
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fs.atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())


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
