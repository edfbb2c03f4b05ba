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
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters.agent_config import BrokenConfig
from teleclaude.adapters.agent_config import basic_string as toml_string
from teleclaude.adapters.agent_config import multiline_string as toml_multiline
from teleclaude.adapters.git import find_repo
from teleclaude.agents import NAMES
from teleclaude.errors import Error, ErrorCode
from teleclaude.setup import merges
from teleclaude.setup.manifest import Manifest
from teleclaude.setup.merges import CommandFile, JsonEntry, Line, Skip, Status, Target, TomlTable
from teleclaude.setup.staging import Staging

SERVER = "teleclaude"
MANIFEST = Path(".teleclaude") / "install-manifest.json"
TEMPLATE_MARK = "<!-- teleclaude:template "


class Scope(Enum):
    USER = "user"
    PROJECT = "project"


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
    with_stop_hook: bool = True,
) -> Report | Error:
    """Install (or uninstall) for `agents`, every one found by default. `with_stop_hook=False` leaves the
    stop hook out, for a teleclaude without `teleclaude hook stop`: a hook that fails blocks every stop."""
    home = Path.home()
    chosen = tuple(agents) or detect_agents(home)
    if not chosen:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            "No agent CLI found: none of claude, codex, gemini is on PATH, and there is no ~/.claude, "
            "~/.codex or ~/.gemini.\nName the ones to set up: teleclaude install --claude --codex --gemini.",
        )
    root = find_repo(cwd or os.getcwd()).root if scope is Scope.PROJECT else None
    base = root or home
    with_hook = uninstall or with_stop_hook  # uninstall removes a hook installed earlier
    merge = merges.uninstall if uninstall else merges.install
    staging = Staging(root)
    try:
        manifest = Manifest.load(home / MANIFEST)
        before = copy.deepcopy(manifest.dump())
        targets = [t for agent in chosen for t in agent_targets(agent, scope, base, home, with_hook)]
        if "claude" in chosen:
            targets += claude_unattended(home, root, manifest, uninstall)
        lines = [merge(target, staging, manifest) for target in targets]
    except BrokenConfig as error:
        return Error(
            ErrorCode.INVALID_CONFIG,
            f"{error.path} {error.reason}.\nNothing was written. Fix the file (or move it aside), then run "
            "`teleclaude install` again.",
        )
    if not dry_run:
        _write(staging, manifest, before, home / MANIFEST)
    return Report(tuple(lines), chosen, scope, dry_run, uninstall)


def _write(staging: Staging, manifest: Manifest, before: dict, manifest_path: Path) -> None:
    """Apply the staged changes; save the manifest when they changed it."""
    staging.write(manifest)
    if manifest.dump() != before:
        manifest.save(manifest_path)


def detect_agents(home: Path) -> tuple[str, ...]:
    """Every agent CLI on PATH or with a config folder."""
    folders = {"claude": home / ".claude", "codex": codex_home(home), "gemini": home / ".gemini"}
    return tuple(agent for agent in NAMES if shutil.which(agent) or folders[agent].is_dir())


def codex_home(home: Path) -> Path:
    return Path(os.environ.get("CODEX_HOME") or home / ".codex")


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
    layout = {"claude": _claude, "codex": _codex, "gemini": _gemini}[agent]
    targets = layout(scope, base, home, with_hook)
    if not with_hook:
        targets.append(Skip(agent, "stop hook: this teleclaude has no `teleclaude hook stop` command yet"))
    return targets


def _claude(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    folder = base / ".claude"
    targets: list[Target] = [
        CommandFile("claude", folder / "commands" / f"{name}.md", text.encode()) for name, text in _markdown()
    ]
    mcp_file = base / ".mcp.json" if scope is Scope.PROJECT else home / ".claude.json"
    server = {"type": "stdio", **_server(scope)}
    targets.append(JsonEntry("claude", mcp_file, ("mcpServers", SERVER), server))
    if with_hook:
        settings = folder / "settings.json"
        for event, verb in CLAUDE_HOOKS:
            entry = {"hooks": [_hook("claude", scope, verb)]}
            targets.append(JsonEntry("claude", settings, ("hooks", event), entry, in_list=True))
    return targets


def _codex(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    # codex 0.169 lists a project's .codex/skills (and .agents/skills) beside ~/.codex/skills (NOTES.md)
    folder = base / ".codex" if scope is Scope.PROJECT else codex_home(home)
    targets: list[Target] = [
        CommandFile("codex", folder / "skills" / name / "SKILL.md", codex_skill(name, text).encode())
        for name, text in _markdown()
    ]
    targets.append(TomlTable("codex", folder / "config.toml", ("mcp_servers", SERVER), _server(scope)))
    if with_hook:
        stop = {"hooks": [_hook("codex", scope)]}
        targets.append(JsonEntry("codex", folder / "hooks.json", ("hooks", "Stop"), stop, in_list=True))
        # where codex records the API error that ends a turn (no hook runs for such a turn)
        prompt = {"hooks": [_hook("codex", scope, "prompt")]}
        entry = JsonEntry("codex", folder / "hooks.json", ("hooks", "UserPromptSubmit"), prompt, in_list=True)
        targets.append(entry)
        # before every tool call (no matcher: every tool), with claude's fields (NOTES.md)
        tool = {"hooks": [_hook("codex", scope, "tool-use")]}
        targets.append(JsonEntry("codex", folder / "hooks.json", ("hooks", "PreToolUse"), tool, in_list=True))
    return targets


def _gemini(scope: Scope, base: Path, home: Path, with_hook: bool) -> list[Target]:
    folder = base / ".gemini"
    targets: list[Target] = [
        CommandFile("gemini", folder / "commands" / f"{name}.toml", gemini_toml(text).encode())
        for name, text in _markdown()
    ]
    settings = folder / "settings.json"
    targets.append(JsonEntry("gemini", settings, ("mcpServers", SERVER), _server(scope)))
    if with_hook:
        after_agent = {"hooks": [{"name": "teleclaude-stop", **_hook("gemini", scope)}]}
        targets.append(JsonEntry("gemini", settings, ("hooks", "AfterAgent"), after_agent, in_list=True))
        # before every tool call (no matcher: every tool), with claude's fields (NOTES.md)
        before_tool = {"hooks": [{"name": "teleclaude-tool-use", **_hook("gemini", scope, "tool-use")}]}
        targets.append(JsonEntry("gemini", settings, ("hooks", "BeforeTool"), before_tool, in_list=True))
    return targets


def _server(scope: Scope = Scope.USER) -> dict:
    run = launcher(scope)
    return {"command": run[0], "args": [*run[1:], "mcp"]}


def _hook(agent: str, scope: Scope = Scope.USER, verb: str = "stop") -> dict:
    return {"type": "command", "command": shlex.join([*launcher(scope), "hook", verb, "--agent", agent])}


# --- claude: the hooks beside Stop, and what its first-run dialogs would ask --------------------------------

# (claude's hook event, the `teleclaude hook` verb it runs)
CLAUDE_HOOKS = (
    ("Stop", "stop"),  # the turn ended: refuse with uncommitted work, else record the turn end
    ("StopFailure", "stop-failure"),  # an API error ended the turn (rate_limit, billing_error, …)
    ("PreToolUse", "tool-use"),  # the worker's recent tool activity, for digests and `sessions list`
)


def claude_unattended(home: Path, root: Path | None, manifest: Manifest, uninstall: bool) -> list[Target]:
    """What claude's first-run dialogs would ask a detached worker, answered in the user's own files.

    - the "Bypass Permissions mode" warning: `skipDangerousModePermissionPrompt` in ~/.claude/settings.json
      (what accepting it writes; project settings are not read for it);
    - project `.mcp.json` servers pending approval: `enabledMcpjsonServers: ["teleclaude"]` in
      ~/.claude/settings.json (where the CLI itself says to persist an approval; project settings cannot
      approve their own servers);
    - workspace trust for the project root (`root`: project scope, or `teleclaude init`), which covers its
      `trees/<slug>` worktrees: `projects[ROOT].hasTrustDialogAccepted` in ~/.claude.json.
    Uninstalling removes the trust of every root recorded in the manifest.
    """
    settings = home / ".claude" / "settings.json"
    targets: list[Target] = [
        JsonEntry("claude", settings, ("skipDangerousModePermissionPrompt",), True),
        JsonEntry("claude", settings, ("enabledMcpjsonServers",), SERVER, in_list=True),
    ]
    roots = [str(root)] if root is not None else []
    if uninstall:
        roots += [folder for folder in _trusted_roots(manifest, home) if folder not in roots]
    return targets + [claude_trust(home, Path(folder)) for folder in roots]


def claude_trust(home: Path, root: Path) -> JsonEntry:
    # false is what claude stores for every folder it has seen: not a refusal (a refusal makes claude exit)
    keys = ("projects", str(root), "hasTrustDialogAccepted")
    return JsonEntry("claude", home / ".claude.json", keys, True, default=False)


def _trusted_roots(manifest: Manifest, home: Path) -> list[str]:
    """The project roots whose claude trust the manifest records."""
    return [
        record.keys[1]
        for record in manifest.records(home / ".claude.json")
        if len(record.keys) == 3 and record.keys[::2] == ("projects", "hasTrustDialogAccepted")
    ]


def trust_project(root: Path) -> list[Line] | Error:
    """`teleclaude init`: trust `root` in claude (when claude is set up here), recorded for `--uninstall`."""
    home = Path.home()
    if "claude" not in detect_agents(home):
        return []
    staging = Staging(root)
    try:
        manifest = Manifest.load(home / MANIFEST)
        before = copy.deepcopy(manifest.dump())
        line = merges.install(claude_trust(home, root), staging, manifest)
    except BrokenConfig as error:
        return Error(
            ErrorCode.INVALID_CONFIG,
            f"{error.path} {error.reason}.\nNothing was written there. Fix the file (or move it aside), then "
            "run `teleclaude init` again.",
        )
    _write(staging, manifest, before, home / MANIFEST)
    return [line]


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
    """A Codex skill (`~/.codex/skills/NAME/SKILL.md`, or the project's `.codex/skills/`), invoked as
    `$NAME args`: Codex 0.169 has no custom prompts any more and does not substitute `$ARGUMENTS` in a skill,
    so the skill says where they are."""
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
