"""`teleclaude install`: role commands, the MCP server and the agent hooks, merged into each agent CLI.

Everything teleclaude writes is recorded in `~/.teleclaude/install-manifest.json`: the hash of each command
file, the JSON values and TOML text it added, and the files and folders it created. The record is what makes
the promises hold: a command file whose hash no longer matches was changed by its user and is kept; a config
value that differs from the recorded one is the user's and is kept; `--uninstall` removes exactly the
recorded things, so a config teleclaude only added keys to returns to its original bytes.

Every file is read and every change computed before the first write, so a broken config stops the run with
nothing written. The parts: `manifest` (the record, typed), `staging` (read once, write at the end) and
`merges` (how each kind of target goes in and comes out); this module chooses the targets and reports.
"""

from __future__ import annotations

import copy
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters.agent_config import BrokenConfig
from teleclaude.adapters.git import find_repo
from teleclaude.agents import NAMES, PROFILES
from teleclaude.agents.profile import AgentProfile, Install, Setting
from teleclaude.errors import Error, ErrorCode
from teleclaude.setup import merges
from teleclaude.setup.manifest import Manifest
from teleclaude.setup.merges import Chained, CommandFile, JsonEntry, Line, Skip, Status, Target, TomlTable
from teleclaude.setup.staging import Staging

SERVER = "teleclaude"
MANIFEST = Path(".teleclaude") / "install-manifest.json"
TEMPLATE_MARK = "<!-- teleclaude:template "


class Scope(Enum):
    USER = "user"
    PROJECT = "project"


@dataclass(frozen=True)
class Found:
    """How an agent CLI was looked for when none was named: on PATH, and by its config folder."""

    agent: str
    on_path: bool
    folder: Path | None  # its config folder, when that exists

    def text(self, home: Path) -> str:
        if self.on_path:
            return f"{self.agent} (on PATH)"
        where = str(self.folder)
        if self.folder is not None and self.folder.is_relative_to(home):
            where = "~/" + self.folder.relative_to(home).as_posix()
        return f"{self.agent} (not on PATH, but {where} exists)"


@dataclass(frozen=True)
class Report:
    lines: tuple[Line, ...]
    agents: tuple[str, ...]
    scope: Scope
    dry_run: bool
    uninstall: bool
    found: tuple[Found, ...] = ()  # every agent CLI looked for, when none was named
    verbose: bool = False  # every file and value, not a line per CLI
    home: Path = Path("~")

    def count(self, status: Status, agent: str | None = None) -> int:
        return sum(1 for line in self.lines if line.status is status and agent in (None, line.agent))

    def text(self) -> str:
        verb = "uninstall" if self.uninstall else "install"
        head = "DRY RUN: would" if self.dry_run else "OK:"
        done = verb + "ed" if not self.dry_run else verb
        statuses = (Status.REMOVED,) if self.uninstall else (Status.CREATED, Status.UPDATED)
        counted = (*statuses, Status.UNCHANGED, Status.KEPT)
        counts = ", ".join(f"{self.count(s)} {s.value}" for s in counted)
        first = f"{head} {done} teleclaude for {', '.join(self.agents)} ({self.scope.value} scope): {counts}."
        rows = self._looked_for()
        changed = [line for line in self.lines if line.status is not Status.UNCHANGED]
        width = max((len(line.status.value) for line in changed), default=0)
        # a dry run shows all it would do; else a line per CLI, and each line about the user's own things
        every = self.verbose or self.dry_run
        shown = [line for line in changed if every or line.detail or line.status is Status.SKIPPED]
        if not every:
            for agent in self.agents:
                done_here = [f"{self.count(s, agent)} {s.value}" for s in statuses if self.count(s, agent)]
                rows.append(f"{agent}: {', '.join(done_here) or 'nothing to change'}")
        rows += [
            f"{line.agent}: {line.status.value:<{width}} {line.what}"
            + (f": {line.detail}" if line.detail else "")
            for line in shown
        ]
        if not every and len(self.lines) > len(self.agents):
            rows.append("(--verbose lists every file and setting)")
        if self.dry_run:
            rows.append("Nothing was written.")
        return "\n".join([first, *rows])

    def _looked_for(self) -> list[str]:
        if not self.found:
            return []
        found = [f.text(self.home) for f in self.found if f.on_path or f.folder is not None]
        missing = [f.agent for f in self.found if not f.on_path and f.folder is None]
        line = f"found: {', '.join(found)}" + (f"; not found: {', '.join(missing)}" if missing else "")
        return [line]


# --- the library call -------------------------------------------------------------------------------


def install(
    agents: Sequence[str] = (),
    scope: Scope = Scope.USER,
    cwd: str | os.PathLike | None = None,
    dry_run: bool = False,
    uninstall: bool = False,
    with_stop_hook: bool = True,
    verbose: bool = False,
    overwrite: bool = False,
) -> Report | Error:
    """Install (or uninstall) for `agents`, every one found by default. `with_stop_hook=False` leaves the
    stop hook out, for a teleclaude without `teleclaude hook stop`: a hook that fails blocks every stop.
    `overwrite`: role commands the user changed are replaced too, theirs kept as backups beside them."""
    home = Path.home()
    found = () if agents else look_for_agents(home)
    chosen = tuple(agents) or tuple(f.agent for f in found if f.on_path or f.folder is not None)
    if not chosen:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"No agent CLI found: none of {', '.join(NAMES)} is on PATH, and there is no "
            f"{' or '.join(f'~/{_layout(name).folder}' for name in _INSTALLED)}.\n"
            f"Name the ones to set up: teleclaude install {' '.join(f'--{name}' for name in NAMES)}.",
        )
    root = find_repo(cwd or os.getcwd()).root if scope is Scope.PROJECT else None
    base = root or home
    with_hook = uninstall or with_stop_hook  # uninstall removes a hook installed earlier
    merge = merges.uninstall if uninstall else partial(merges.install, overwrite=overwrite)
    staging = Staging(root)
    try:
        manifest = Manifest.load(home / MANIFEST)
        before = copy.deepcopy(manifest.dump())
        targets = [t for agent in chosen for t in agent_targets(agent, scope, base, home, with_hook)]
        targets += [
            t for agent in chosen for t in unattended(PROFILES[agent], home, root, manifest, uninstall)
        ]
        lines = [merge(target, staging, manifest) for target in targets]
    except BrokenConfig as error:
        return Error(
            ErrorCode.INVALID_CONFIG,
            f"{error.path} {error.reason}.\nNothing was written. Fix the file (or move it aside), then run "
            "`teleclaude install` again.",
        )
    if not dry_run:
        _write(staging, manifest, before, home / MANIFEST)
    return Report(tuple(lines), chosen, scope, dry_run, uninstall, found, verbose, home)


def _write(staging: Staging, manifest: Manifest, before: dict, manifest_path: Path) -> None:
    """Apply the staged changes; save the manifest when they changed it."""
    staging.write(manifest)
    if manifest.dump() != before:
        manifest.save(manifest_path)


def detect_agents(home: Path) -> tuple[str, ...]:
    """Every agent CLI on PATH or with a config folder."""
    return tuple(f.agent for f in look_for_agents(home) if f.on_path or f.folder is not None)


def look_for_agents(home: Path) -> tuple[Found, ...]:
    """Each agent CLI install knows: whether it is on PATH, and its config folder when that exists."""
    found = []
    for name in _INSTALLED:
        folder = _folder(_layout(name), Scope.USER, home, home)
        found.append(Found(name, shutil.which(name) is not None, folder if folder.is_dir() else None))
    return tuple(found)


def _layout(agent: str) -> Install:
    layout = PROFILES[agent].install
    assert layout is not None  # the agents install knows: _INSTALLED
    return layout


_INSTALLED = tuple(name for name in NAMES if PROFILES[name].install is not None)


def _folder(layout: Install, scope: Scope, base: Path, home: Path) -> Path:
    """The CLI's folder: in the project (project scope), else the one its variable names, else in home."""
    if scope is Scope.PROJECT:
        return base / (layout.project_folder or layout.folder)
    named = os.environ.get(layout.folder_env) if layout.folder_env else None
    return Path(named) if named else base / layout.folder


def _path(template: str, base: Path, folder: Path, **names: str) -> Path:
    relative = template.format(folder="\0", **names)
    return folder / relative.removeprefix("\0/") if relative.startswith("\0/") else base / relative


def launcher(scope: Scope = Scope.USER) -> list[str]:
    """The command that starts teleclaude from an agent CLI.

    User scope: this teleclaude, by its absolute path, whatever PATH the agent CLI runs with. Project scope:
    `teleclaude` by name, so the committed files hold no path of this machine (it must be on PATH).
    """
    if scope is Scope.PROJECT:
        return ["teleclaude"]
    script = Path(sys.executable).parent / "teleclaude"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "teleclaude"]


# --- where each agent CLI looks ---------------------------------------------------------------------


def agent_targets(agent: str, scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    """What to install for `agent` into `base` (the home folder, or the repository for project scope)."""
    driver, layout = PROFILES[agent], _layout(agent)
    folder = _folder(layout, scope, base, home)
    targets: list[Target] = [
        CommandFile(
            agent,
            _path(layout.command_file, base, folder, name=name),
            layout.command_text(name, text).encode(),
        )
        for name, text in _markdown()
    ]
    if scope is Scope.PROJECT and layout.project_ignore:
        targets.append(CommandFile(agent, folder / ".gitignore", _ignore_text(agent, layout.project_ignore)))
    mcp_file = _path(layout.mcp_file[scope is Scope.PROJECT], base, folder)
    server = {**layout.mcp_entry, **_server(scope, layout.mcp_argv)}
    if mcp_file.suffix == ".toml":
        targets.append(TomlTable(agent, mcp_file, (layout.mcp_key, SERVER), server))
    else:
        targets.append(JsonEntry(agent, mcp_file, (layout.mcp_key, SERVER), server))
        targets += [JsonEntry(agent, mcp_file, (key,), value) for key, value in layout.mcp_own_keys.items()]
    if not with_hook:
        targets.append(Skip(agent, "stop hook: this teleclaude has no `teleclaude hook stop` command yet"))
        return targets
    hooks_file = _path(layout.hooks_file, base, folder)
    if layout.hooks_text is not None:
        verbs = {verb: [*launcher(scope), "hook", verb, "--agent", agent] for _, verb in driver.hooks.events}
        targets.append(CommandFile(agent, hooks_file, layout.hooks_text(verbs).encode()))
        return targets
    for event, verb in driver.hooks.events:
        hook = _hook(agent, scope, verb)
        entry = {"hooks": [{"name": f"teleclaude-{verb}", **hook} if layout.named_hooks else hook]}
        targets.append(JsonEntry(agent, hooks_file, ("hooks", event), entry, in_list=True))
    # a status line is the user's own view: only theirs (user scope) holds ours, never a shared project file
    if layout.status_line and scope is Scope.USER:
        targets.append(Chained(agent, hooks_file, layout.status_line, partial(status_line, agent)))
    return targets


def status_line(agent: str, theirs: object) -> dict:
    """The CLI's status-line entry that records the usage it reports (`teleclaude hook statusline`), running
    the user's own status line (`theirs`, if any) after it: their command string is their own config, passed
    on as one argument and run as the CLI would run it. Theirs is one of ours when a teleclaude (another
    install of it) put it there: then the one that runs inside that is theirs."""
    argv = [*launcher(Scope.USER), "hook", "statusline", "--agent", agent]
    fields = theirs if isinstance(theirs, dict) else {}
    command = fields.get("command")
    if isinstance(command, str):
        command = _inside_ours(command)
    if not isinstance(command, str) or not command.strip():
        return {"type": "command", "command": shlex.join(argv)}
    return {**fields, "type": "command", "command": shlex.join([*argv, "--then", command])}


def _inside_ours(command: str) -> str:
    """`command` itself, unless it is teleclaude's own status line (`…/teleclaude hook statusline …`, `python
    -m teleclaude hook statusline …`): then the user's command it runs (its `--then`), or "". A command of
    the user's that merely has the words `hook statusline` in it (`ccline hook statusline`) stays theirs."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    program = os.path.basename(words[0]) if words else ""
    if program == "teleclaude":
        rest = words[1:]
    elif program.startswith("python") and words[1:3] == ["-m", "teleclaude"]:
        rest = words[3:]
    else:
        return command
    if rest[:2] != ["hook", "statusline"]:
        return command
    options = rest[2:]
    return _inside_ours(options[options.index("--then") + 1]) if "--then" in options[:-1] else ""


def _ignore_text(agent: str, ignored: Sequence[str]) -> bytes:
    head = f"# Installed by `teleclaude install`: what {agent} writes here for itself, never the project's.\n"
    return (head + "".join(f"{name}\n" for name in ignored)).encode()


def _server(scope: Scope = Scope.USER, argv: bool = False) -> dict:
    run = launcher(scope)
    return {"command": [*run, "mcp"]} if argv else {"command": run[0], "args": [*run[1:], "mcp"]}


def _hook(agent: str, scope: Scope = Scope.USER, verb: str = "stop") -> dict:
    return {"type": "command", "command": shlex.join([*launcher(scope), "hook", verb, "--agent", agent])}


# --- what the CLIs' first-run dialogs would ask ------------------------------------------------------------


def unattended(
    driver: AgentProfile, home: Path, root: Path | None, manifest: Manifest, uninstall: bool
) -> list[Target]:
    """What the CLI's first-run dialogs would ask a detached worker, answered in the user's own files (the
    driver's `unattended`), and its trust of the project root (`root`: project scope, or `teleclaude init`).
    Uninstalling removes the trust of every root recorded in the manifest."""
    targets: list[Target] = [_entry(driver.name, home, setting) for setting in driver.unattended]
    if driver.project_trust is None:
        return targets
    roots = [str(root)] if root is not None else []
    if uninstall:
        roots += [
            folder for folder in _trusted_roots(driver.project_trust, manifest, home) if folder not in roots
        ]
    return targets + [_entry(driver.name, home, driver.project_trust, folder) for folder in roots]


def _entry(agent: str, home: Path, setting: Setting, root: str = "") -> JsonEntry:
    keys = tuple(root if key == "{root}" else key for key in setting.keys)
    default = merges.MISSING if setting.default is None else setting.default
    return JsonEntry(agent, home / setting.file, keys, setting.value, setting.in_list, default)


def _trusted_roots(trust: Setting, manifest: Manifest, home: Path) -> list[str]:
    """The project roots whose trust the manifest records."""
    at = trust.keys.index("{root}")
    return [
        record.keys[at]
        for record in manifest.records(home / trust.file)
        if len(record.keys) == len(trust.keys)
        and all(key == want for key, want in zip(record.keys, trust.keys, strict=True) if want != "{root}")
    ]


def trust_project(root: Path) -> list[Line] | Error:
    """`teleclaude init`: trust `root` in each CLI set up here that asks, recorded for `--uninstall`."""
    home = Path.home()
    trusting = [PROFILES[agent] for agent in detect_agents(home) if PROFILES[agent].project_trust]
    if not trusting:
        return []
    staging = Staging(root)
    try:
        manifest = Manifest.load(home / MANIFEST)
        before = copy.deepcopy(manifest.dump())
        lines = [
            merges.install(_entry(d.name, home, d.project_trust, str(root)), staging, manifest)
            for d in trusting
            if d.project_trust
        ]
    except BrokenConfig as error:
        return Error(
            ErrorCode.INVALID_CONFIG,
            f"{error.path} {error.reason}.\nNothing was written there. Fix the file (or move it aside), then "
            "run `teleclaude init` again.",
        )
    _write(staging, manifest, before, home / MANIFEST)
    return lines


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
