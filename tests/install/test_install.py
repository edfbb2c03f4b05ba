"""`teleclaude install` into a private HOME and a real repository: merge, idempotence, uninstall, errors."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.cli import setup as cli_setup
from teleclaude.demo.workers import git
from teleclaude.setup import install
from teleclaude.setup.manifest import Manifest

NAMES = install.command_names()
ALL = ("--claude", "--codex", "--gemini")


def first_line(text: str) -> str:
    return text.splitlines()[0]


def load(path: Path) -> dict:
    return tomllib.loads(path.read_text()) if path.suffix == ".toml" else json.loads(path.read_text())


def registered(command: str, args: list[str]) -> list[str]:
    return [command, *args]


def assert_runs_teleclaude(argv: list[str]) -> None:
    assert argv[-1] == "mcp"
    assert argv[:-1] == install.launcher()
    assert os.access(argv[0], os.X_OK)


def hook_commands(entries: list[dict]) -> list[str]:
    return [hook["command"] for entry in entries for hook in entry["hooks"]]


# --- each agent, user scope --------------------------------------------------------------------------


def test_claude_gets_commands_mcp_server_and_stop_hook(home, run):
    code, out = run("install", "--claude")
    assert (code, first_line(out)) == (0, first_line(out))
    assert first_line(out).startswith("OK: installed teleclaude for claude (user scope)")
    for name in NAMES:
        assert (home / ".claude" / "commands" / f"{name}.md").read_text() == install.command_markdown(name)
    server = load(home / ".claude.json")["mcpServers"]["teleclaude"]
    assert server["type"] == "stdio"
    assert_runs_teleclaude(registered(server["command"], server["args"]))
    (command,) = hook_commands(load(home / ".claude" / "settings.json")["hooks"]["Stop"])
    assert shlex.split(command) == [*install.launcher(), "hook", "stop", "--agent", "claude"]


def test_codex_gets_skills_an_mcp_table_and_a_stop_hook(home, run):
    assert run("install", "--codex")[0] == 0
    skills = home / ".codex" / "skills"
    assert sorted(p.name for p in skills.iterdir()) == sorted(NAMES)
    skill = (skills / "next-build" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: next-build\ndescription: ")
    assert "`$ARGUMENTS` stands for the text after `$next-build`" in skill
    server = load(home / ".codex" / "config.toml")["mcp_servers"]["teleclaude"]
    assert_runs_teleclaude(registered(server["command"], server["args"]))
    hooks = load(home / ".codex" / "hooks.json")["hooks"]
    (command,) = hook_commands(hooks["Stop"])
    assert command.endswith("hook stop --agent codex")
    (command,) = hook_commands(hooks["UserPromptSubmit"])  # where codex records a turn's API error
    assert command.endswith("hook prompt --agent codex")
    (tool_hook,) = hooks["PreToolUse"]  # before every tool call: no matcher
    assert "matcher" not in tool_hook
    (command,) = hook_commands([tool_hook])
    assert shlex.split(command) == [*install.launcher(), "hook", "tool-use", "--agent", "codex"]


def test_gemini_gets_toml_commands_and_settings(home, run):
    assert run("install", "--gemini")[0] == 0
    for name in NAMES:
        parsed = load(home / ".gemini" / "commands" / f"{name}.toml")
        assert set(parsed) == {"description", "prompt"}
        assert "$ARGUMENTS" not in parsed["prompt"]
    settings = load(home / ".gemini" / "settings.json")
    server = settings["mcpServers"]["teleclaude"]
    assert_runs_teleclaude(registered(server["command"], server["args"]))
    (command,) = hook_commands(settings["hooks"]["AfterAgent"])
    assert command.endswith("hook stop --agent gemini")
    (tool_hook,) = settings["hooks"]["BeforeTool"]  # before every tool call: no matcher
    assert "matcher" not in tool_hook
    (hook,) = tool_hook["hooks"]
    assert hook["name"] == "teleclaude-tool-use"
    assert shlex.split(hook["command"]) == [*install.launcher(), "hook", "tool-use", "--agent", "gemini"]


def test_codex_home_is_respected(home, run, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    assert run("install", "--codex")[0] == 0
    assert (tmp_path / "codex-home" / "skills" / "next-build" / "SKILL.md").is_file()
    assert not (home / ".codex").exists()


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_the_installed_stop_hook_command_runs(home, run, agent, tmp_path):
    run("install", f"--{agent}")
    settings = {
        "claude": ".claude/settings.json",
        "codex": ".codex/hooks.json",
        "gemini": ".gemini/settings.json",
    }
    event = "AfterAgent" if agent == "gemini" else "Stop"
    (command,) = hook_commands(load(home / settings[agent])["hooks"][event])
    payload = json.dumps({"cwd": str(tmp_path), "hook_event_name": event, "stop_hook_active": False})
    done = subprocess.run(shlex.split(command), input=payload, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# what each CLI hands its tool hook before a shell command (seen with the real CLIs: tests/realcli/NOTES.md)
TOOL_HOOK_INPUT = {
    "claude": ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "git status --short"}}),
    "codex": ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "git status --short"}}),
    "gemini": (
        "BeforeTool",
        {
            "tool_name": "run_shell_command",
            "tool_input": {"command": "git status --short", "description": "x"},
        },
    ),
}


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_the_installed_tool_hook_records_the_workers_tool_use_and_lets_the_call_go_ahead(
    home, run, agent, tmp_path, monkeypatch
):
    run("install", f"--{agent}")
    settings = {
        "claude": ".claude/settings.json",
        "codex": ".codex/hooks.json",
        "gemini": ".gemini/settings.json",
    }
    event, payload = TOOL_HOOK_INPUT[agent]
    (command,) = hook_commands(load(home / settings[agent])["hooks"][event])
    db = tmp_path / "sessions.db"
    monkeypatch.setenv("TELECLAUDE_SESSION_ID", "w1")
    monkeypatch.setenv("TELECLAUDE_DB", str(db))
    monkeypatch.delenv("TELECLAUDE_TURN_END_TO_PANE", raising=False)
    stdin = json.dumps({"session_id": "s", "cwd": str(tmp_path), "hook_event_name": event, **payload})
    done = subprocess.run(shlex.split(command), input=stdin, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # nothing printed: the call goes ahead
    (use,) = SessionStore(str(db)).recent_tool_uses(["w1"])["w1"]
    assert (use.tool, use.target) == (payload["tool_name"], "git status --short")


def test_without_a_stop_hook_command_the_hook_is_skipped_and_said(home, run, monkeypatch):
    monkeypatch.setattr(cli_setup, "stop_hook_available", lambda: False)
    code, out = run("install", "--claude")
    assert code == 0 and "skipped" in out
    assert "hooks" not in load(home / ".claude" / "settings.json")


# --- which agents ------------------------------------------------------------------------------------


def test_by_default_every_cli_on_path_or_with_a_config_folder(home, run, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").write_text("#!/bin/sh\n")
    (bin_dir / "gemini").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    (home / ".codex").mkdir()
    code, out = run("install")
    assert code == 0
    assert "for gemini, codex (user scope)" in first_line(out)  # in the registry's order
    assert "not found: claude, opencode" in out
    assert (home / ".gemini" / "commands").is_dir() and (home / ".codex" / "skills").is_dir()
    assert not (home / ".claude").exists()


def test_install_says_which_clis_it_found_and_which_not(home, run, tmp_path, monkeypatch):
    """No agent CLI on PATH, but opencode's npm postinstall left its folder: installed for opencode alone,
    and the output says so, and which CLIs were not found."""
    monkeypatch.setenv("PATH", str(tmp_path))
    (home / ".config" / "opencode").mkdir(parents=True)
    code, out = run("install")
    assert code == 0 and "for opencode (user scope)" in first_line(out)
    [found] = [line for line in out.splitlines() if line.startswith("found: ")]
    said, missing = found.split("; not found: ")
    assert "opencode" in said and "PATH" in said and "~/.config/opencode" in said
    assert sorted(missing.split(", ")) == ["claude", "codex", "gemini"]


def test_install_prints_a_line_per_cli_and_every_file_with_verbose(home, run):
    code, out = run("install", *ALL)
    assert code == 0
    rows = out.splitlines()[1:]
    assert sorted(row.split(":")[0] for row in rows if not row.startswith("(")) == [
        "claude",
        "codex",
        "gemini",
    ]
    assert all("created" in row for row in rows if not row.startswith("("))
    assert str(home / ".claude.json") not in out
    run("install", *ALL, "--uninstall")
    code, out = run("install", *ALL, "--verbose")
    assert code == 0 and str(home / ".claude.json") in out
    assert len(out.splitlines()) > 10


def test_no_cli_found_is_an_error(home, run, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out = run("install")
    assert (code, first_line(out)) == (1, "ERROR: INVALID_ARGUMENT")
    assert list(home.iterdir()) == []


# --- project scope -----------------------------------------------------------------------------------


def test_project_scope_writes_into_the_repository(home, repo, run):
    code, out = run("install", *ALL, "--scope", "project", "--cwd", str(repo / "src"))
    assert code == 0, out
    assert load(repo / ".mcp.json")["mcpServers"]["teleclaude"]["args"][-1] == "mcp"
    assert (repo / ".claude" / "commands" / "next-work.md").is_file()
    assert load(repo / ".claude" / "settings.json")["hooks"]["Stop"]
    assert load(repo / ".codex" / "config.toml")["mcp_servers"]["teleclaude"]
    assert load(repo / ".codex" / "hooks.json")["hooks"]["Stop"]
    assert load(repo / ".codex" / "hooks.json")["hooks"]["PreToolUse"]
    assert (repo / ".codex" / "skills" / "next-work" / "SKILL.md").is_file()  # codex 0.169 reads them there
    assert (repo / ".gemini" / "commands" / "next-work.toml").is_file()
    assert load(repo / ".gemini" / "settings.json")["mcpServers"]["teleclaude"]
    assert load(repo / ".gemini" / "settings.json")["hooks"]["BeforeTool"]
    # at home: the record of what was done, and claude's answers to its first-run dialogs (see below)
    assert sorted(p.name for p in home.iterdir()) == [".claude", ".claude.json", ".teleclaude"]


def test_project_scope_files_hold_no_path_of_this_machine(home, repo, run):
    assert run("install", *ALL, "--scope", "project", "--cwd", str(repo))[0] == 0
    written = [p for p in repo.rglob("*") if p.is_file() and ".git" not in p.relative_to(repo).parts]
    assert written
    for path in written:
        text = path.read_text()
        for machine_path in (str(home), str(repo), str(Path(sys.executable).parent), "/usr/", "/tmp/"):
            assert machine_path not in text, f"{path} holds {machine_path}"
    server = load(repo / ".mcp.json")["mcpServers"]["teleclaude"]
    assert [server["command"], *server["args"]] == ["teleclaude", "mcp"]
    hooks = load(repo / ".claude" / "settings.json")["hooks"]
    commands = {event: hook_commands(hooks[event]) for event in ("Stop", "StopFailure", "PreToolUse")}
    assert commands == {
        "Stop": ["teleclaude hook stop --agent claude"],
        "StopFailure": ["teleclaude hook stop-failure --agent claude"],
        "PreToolUse": ["teleclaude hook tool-use --agent claude"],
    }
    codex = load(repo / ".codex" / "hooks.json")["hooks"]
    assert hook_commands(codex["PreToolUse"]) == ["teleclaude hook tool-use --agent codex"]
    gemini = load(repo / ".gemini" / "settings.json")["hooks"]
    assert hook_commands(gemini["BeforeTool"]) == ["teleclaude hook tool-use --agent gemini"]


def test_what_opencode_writes_into_its_project_folder_is_never_the_projects(home, repo, tmp_path, run):
    """opencode npm-installs its plugins' package into the project's .opencode/ at each start (node_modules,
    package.json, its lock file): neither the checkout nor a worktree of it shows them as untracked (what the
    planner and the stop hook see), `git add -A` never commits them, and uninstall takes the list back. (The
    real opencode in such a checkout: test_opencode.py.)"""
    code, out = run("install", "--opencode", "--scope", "project", "--cwd", str(repo))
    assert code == 0, out
    # and the schema's address opencode would add to its opencode.json at each start, changing the file
    assert load(repo / ".opencode" / "opencode.json")["$schema"] == "https://opencode.ai/config.json"
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "teleclaude for opencode")
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", "-b", "greeting", str(tree))
    for checkout in (repo, tree):
        folder = checkout / ".opencode"
        package = folder / "node_modules" / "@opencode-ai" / "plugin"
        package.mkdir(parents=True)
        (package / "index.js").write_text("export {}\n")
        (folder / "package.json").write_text('{"dependencies": {"@opencode-ai/plugin": "1.18.33"}}\n')
        (folder / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
        assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""
    git(repo, "add", "-A")
    assert not [path for path in git(repo, "ls-files").split() if "node_modules" in path or "package" in path]
    code, out = run("install", "--opencode", "--scope", "project", "--uninstall", "--cwd", str(repo))
    assert code == 0, out
    assert not (repo / ".opencode" / ".gitignore").exists()


# --- claude's first-run dialogs, answered visibly and undone by --uninstall ---------------------------------


def test_claude_install_answers_the_bypass_and_mcp_approval_dialogs(home, run):
    code, out = run("install", "--claude", "--verbose")
    assert code == 0
    settings = load(home / ".claude" / "settings.json")
    assert settings["skipDangerousModePermissionPrompt"] is True
    assert settings["enabledMcpjsonServers"] == ["teleclaude"]
    assert f"{home / '.claude' / 'settings.json'} skipDangerousModePermissionPrompt" in out
    assert f"{home / '.claude' / 'settings.json'} enabledMcpjsonServers" in out
    (failure,) = hook_commands(settings["hooks"]["StopFailure"])
    assert shlex.split(failure) == [*install.launcher(), "hook", "stop-failure", "--agent", "claude"]
    (tool_use,) = hook_commands(settings["hooks"]["PreToolUse"])
    assert shlex.split(tool_use) == [*install.launcher(), "hook", "tool-use", "--agent", "claude"]


def test_claude_keeps_a_users_own_choice_and_unrelated_settings(home, run):
    (home / ".claude").mkdir()
    own = {"skipDangerousModePermissionPrompt": False, "enabledMcpjsonServers": ["mine"], "model": "opus"}
    (home / ".claude" / "settings.json").write_text(json.dumps(own, indent=2) + "\n")
    code, out = run("install", "--claude")
    settings = load(home / ".claude" / "settings.json")
    assert settings["skipDangerousModePermissionPrompt"] is False and "kept" in out
    assert settings["enabledMcpjsonServers"] == ["mine", "teleclaude"]
    assert settings["model"] == "opus"
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert load(home / ".claude" / "settings.json") == own


def test_init_trusts_the_project_root_for_claude_and_uninstall_takes_it_back(home, repo, run):
    state = {"projects": {str(repo): {"hasTrustDialogAccepted": False, "allowedTools": []}}, "theme": "x"}
    (home / ".claude.json").write_text(json.dumps(state, indent=2) + "\n")  # claude's default entry
    assert run("install", "--claude")[0] == 0
    code, out = run("init", "--cwd", str(repo))
    assert code == 0 and "hasTrustDialogAccepted" in out
    assert load(home / ".claude.json")["projects"][str(repo)]["hasTrustDialogAccepted"] is True
    assert run("init", "--cwd", str(repo))[0] == 0  # again: unchanged
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert load(home / ".claude.json") == {"projects": {str(repo): {"allowedTools": []}}, "theme": "x"}


def test_init_without_claude_trusts_nothing(home, repo, run, monkeypatch, tmp_path):
    only_git = tmp_path / "bin"
    only_git.mkdir()
    (only_git / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(only_git))
    code, out = run("init", "--cwd", str(repo))
    assert code == 0 and "hasTrustDialogAccepted" not in out
    assert not (home / ".claude.json").exists()


def test_project_scope_outside_a_repository(home, run, tmp_path):
    code, out = run("install", "--claude", "--scope", "project", "--cwd", str(tmp_path))
    assert (code, first_line(out)) == (1, "ERROR: NOT_A_GIT_REPO")


def test_project_scope_uninstall_round_trip(home, repo, run, snapshot):
    (repo / ".gemini").mkdir()
    settings = repo / ".gemini" / "settings.json"
    settings.write_text('{\n    "theme": "dark"\n}\n')
    before = {k: v[0] for k, v in snapshot(repo).items() if not k.startswith(".git/")}
    run("install", *ALL, "--scope", "project", "--cwd", str(repo))
    code, _ = run("install", *ALL, "--scope", "project", "--uninstall", "--cwd", str(repo))
    assert code == 0
    after = {k: v[0] for k, v in snapshot(repo).items() if not k.startswith(".git/")}
    assert after == before


# --- idempotence, dry run ----------------------------------------------------------------------------


def test_installing_twice_changes_nothing(home, run, snapshot):
    run("install", *ALL)
    before = snapshot(home)
    code, out = run("install", *ALL)
    assert code == 0
    assert snapshot(home) == before
    assert "0 created, 0 updated" in first_line(out)


def test_dry_run_writes_nothing(home, run, snapshot):
    (home / ".claude").mkdir()
    (home / ".claude.json").write_text('{"numStartups": 3}')
    before = snapshot(home)
    code, out = run("install", *ALL, "--dry-run")
    assert code == 0
    assert first_line(out).startswith("DRY RUN: would install")
    assert "created" in out and str(home / ".claude.json") in out
    assert snapshot(home) == before
    run("install", *ALL)
    before = snapshot(home)
    assert run("install", *ALL, "--uninstall", "--dry-run")[0] == 0
    assert snapshot(home) == before


# --- merging with what is there ----------------------------------------------------------------------

CLAUDE_JSON = json.dumps(
    {"numStartups": 7, "mcpServers": {"other": {"command": "x"}}, "name": "Zoë"}, indent=2, ensure_ascii=False
)
CLAUDE_SETTINGS = json.dumps(
    {
        "permissions": {"allow": ["Bash(ls)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "b"}]}]},
    },
    indent=4,
)
GEMINI_SETTINGS = (
    json.dumps(
        {
            "theme": "GitHub",
            "mcpServers": {},
            "hooks": {
                "BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "g"}]}]
            },
        },
        indent="\t",
    )
    + "\n"
)
CODEX_CONFIG = """# my codex settings
model = "o3"  # the model

[mcp_servers.other]
command = "other"   # keep me
args = ["--flag"]

[mcp_servers.other.env]
TOKEN_VAR = "X"
"""
CODEX_HOOKS = (
    '{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "z"}]}]}}'
)


@pytest.fixture
def existing_configs(home) -> dict[Path, bytes]:
    files = {
        home / ".claude.json": CLAUDE_JSON,
        home / ".claude" / "settings.json": CLAUDE_SETTINGS,
        home / ".claude" / "commands" / "mine.md": "my own command\n",
        home / ".gemini" / "settings.json": GEMINI_SETTINGS,
        home / ".codex" / "config.toml": CODEX_CONFIG,
        home / ".codex" / "hooks.json": CODEX_HOOKS,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {path: path.read_bytes() for path in files}


def test_install_merges_and_leaves_what_is_not_teleclaudes_alone(home, run, existing_configs):
    assert run("install", *ALL)[0] == 0
    claude = load(home / ".claude.json")
    assert claude["numStartups"] == 7 and claude["name"] == "Zoë"
    assert claude["mcpServers"]["other"] == {"command": "x"} and "teleclaude" in claude["mcpServers"]
    assert (home / ".claude.json").read_text().startswith('{\n  "numStartups": 7,')  # indent 2 kept
    settings = load(home / ".claude" / "settings.json")
    assert settings["permissions"] == {"allow": ["Bash(ls)"]}
    assert hook_commands(settings["hooks"]["Stop"])[0] == "b"  # the user's hook stays first
    assert '\n    "permissions"' in (home / ".claude" / "settings.json").read_text()  # indent 4 kept
    assert (home / ".claude" / "commands" / "mine.md").read_bytes() == existing_configs[
        home / ".claude" / "commands" / "mine.md"
    ]
    gemini = (home / ".gemini" / "settings.json").read_text()
    assert '\n\t"theme": "GitHub"' in gemini and load(home / ".gemini" / "settings.json")["theme"] == "GitHub"
    codex = (home / ".codex" / "config.toml").read_text()
    assert codex.startswith(CODEX_CONFIG)  # comments and every other byte kept
    config = load(home / ".codex" / "config.toml")
    assert config["model"] == "o3" and config["mcp_servers"]["other"]["env"] == {"TOKEN_VAR": "X"}
    codex_hooks = load(home / ".codex" / "hooks.json")["hooks"]["PreToolUse"]
    assert codex_hooks[0]["matcher"] == "Bash" and len(codex_hooks) == 2  # the user's first, then ours
    gemini_hooks = load(home / ".gemini" / "settings.json")["hooks"]["BeforeTool"]
    assert gemini_hooks[0]["matcher"] == "write_file" and len(gemini_hooks) == 2


def test_uninstall_returns_every_config_to_its_original_bytes(home, run, existing_configs, snapshot):
    run("install", *ALL)
    code, out = run("install", *ALL, "--uninstall")
    assert code == 0
    assert first_line(out).startswith("OK: uninstalled teleclaude for claude, gemini, codex")
    for path, data in existing_configs.items():
        assert path.read_bytes() == data, path
    assert set(snapshot(home)) == {str(p.relative_to(home)) for p in existing_configs} | {
        ".claude",
        ".claude/commands",
        ".gemini",
        ".codex",
    }


def test_uninstall_from_nothing_removes_every_file_and_folder_it_created(home, run):
    run("install", *ALL)
    assert run("install", *ALL, "--uninstall")[0] == 0
    assert list(home.iterdir()) == []


def old_manifest(home: Path) -> dict:
    """A manifest as the first release wrote it (that format must keep working), with the files it names:
    an older command file, an MCP entry, a stop hook list item, a TOML table, created files and folders."""
    command = home / ".claude" / "commands" / f"{NAMES[0]}.md"
    command.parent.mkdir(parents=True)
    command.write_text("an older version of the command\n")
    server = {"type": "stdio", "command": "/old/teleclaude", "args": ["mcp"]}
    hook = {"hooks": [{"type": "command", "command": "/old/teleclaude hook stop --agent claude"}]}
    (home / ".claude.json").write_text(json.dumps({"numStartups": 7, "mcpServers": {"teleclaude": server}}))
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"Stop": [hook]}}))
    table = '\n[mcp_servers.teleclaude]\ncommand = "/old/teleclaude"\nargs = ["mcp"]\n'
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text('model = "o3"\n' + table)
    entries = {
        str(home / ".claude.json"): [
            {
                "created": [["mcpServers"]],
                "keys": ["mcpServers", "teleclaude"],
                "list": False,
                "value": server,
            }
        ],
        str(home / ".claude" / "settings.json"): [
            {
                "created": [["hooks"], ["hooks", "Stop"]],
                "keys": ["hooks", "Stop"],
                "list": True,
                "value": hook,
            }
        ],
    }
    return {
        "created": [str(home / ".claude" / "settings.json"), str(home / ".claude"), str(command.parent)],
        "entries": entries,
        "files": {str(command): hashlib.sha256(command.read_bytes()).hexdigest()},
        "toml": {str(home / ".codex" / "config.toml"): table},
    }


def test_a_manifest_of_the_first_release_reads_and_writes_back_unchanged(home):
    data = old_manifest(home)
    assert Manifest.from_dict(copy.deepcopy(data)).dump() == data


def test_a_manifest_of_the_first_release_still_uninstalls(home, run):
    manifest = home / install.MANIFEST
    manifest.parent.mkdir()
    manifest.write_text(json.dumps(old_manifest(home), indent=2))
    code, out = run("install", "--claude", "--codex", "--uninstall")
    assert code == 0 and "4 removed" in out, out
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 7}
    assert (home / ".codex" / "config.toml").read_text() == 'model = "o3"\n'
    assert sorted(p.name for p in home.iterdir()) == [".claude.json", ".codex"]


def test_uninstall_keeps_what_the_user_added_since(home, run):
    run("install", "--gemini", "--codex")
    settings = home / ".gemini" / "settings.json"
    data = load(settings)
    data["theme"] = "dark"
    settings.write_text(json.dumps(data, indent=2))
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + '\n[profiles.fast]\nmodel = "mini"\n')
    assert run("install", "--gemini", "--codex", "--uninstall")[0] == 0
    assert load(settings) == {"theme": "dark"}
    assert load(config) == {"profiles": {"fast": {"model": "mini"}}}


def test_a_command_file_the_user_changed_is_kept_and_reported(home, run):
    run("install", "--claude")
    mine = home / ".claude" / "commands" / "next-build.md"
    mine.write_text("my builder\n")
    code, out = run("install", "--claude")
    assert code == 0 and "1 kept" in first_line(out)
    assert f"kept {mine}" in out
    assert mine.read_text() == "my builder\n"
    code, out = run("install", "--claude", "--uninstall")
    assert mine.read_text() == "my builder\n" and f"kept    {mine}" in out
    assert sorted(p.name for p in mine.parent.iterdir()) == ["next-build.md"]


def test_overwrite_gives_an_edited_command_the_upgraded_text_and_keeps_the_users_as_a_backup(
    home, run, monkeypatch
):
    real = install.command_markdown
    monkeypatch.setattr(install, "command_markdown", lambda name: real(name) + "\nAn older version.\n")
    run("install", "--claude")
    monkeypatch.setattr(install, "command_markdown", real)
    mine = home / ".claude" / "commands" / "next-work.md"
    mine.write_text("my orchestrator\n")
    code, out = run("install", "--claude")
    assert code == 0 and mine.read_text() == "my orchestrator\n"
    assert "--overwrite" in out  # offered where it says the file was kept
    for edit in ("my orchestrator\n", "my orchestrator, again\n"):
        mine.write_text(edit)
        code, out = run("install", "--claude", "--overwrite")
        assert code == 0 and "1 updated" in first_line(out), out
        assert mine.read_text() == real("next-work")
    backups = sorted(mine.parent.glob("next-work.md.*"))
    assert sorted(b.read_text() for b in backups) == ["my orchestrator\n", "my orchestrator, again\n"]
    assert str(backups[-1]) in out  # the report names where theirs went
    assert "0 updated" in first_line(run("install", "--claude", "--overwrite")[1])  # nothing of theirs left
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert not mine.exists() and all(b.exists() for b in backups)  # their versions are theirs: kept


def test_a_newer_teleclaude_updates_the_files_it_installed(home, run, monkeypatch):
    real = install.command_markdown
    monkeypatch.setattr(install, "command_markdown", lambda name: real(name) + "\nAn older version.\n")
    run("install", "--claude", "--gemini")
    monkeypatch.setattr(install, "command_markdown", real)
    code, out = run("install", "--claude", "--gemini")
    assert code == 0 and f"{2 * len(NAMES)} updated" in first_line(out)
    assert (home / ".claude" / "commands" / "next-work.md").read_text() == real("next-work")


def test_a_moved_teleclaude_updates_its_registrations(home, run, monkeypatch):
    real = install.launcher
    monkeypatch.setattr(install, "launcher", lambda: ["/old/venv/bin/teleclaude"])
    run("install", "--claude", "--codex")
    monkeypatch.setattr(install, "launcher", real)
    code, out = run("install", "--claude", "--codex")
    assert code == 0
    assert load(home / ".claude.json")["mcpServers"]["teleclaude"]["command"] == real()[0]
    assert load(home / ".codex" / "config.toml")["mcp_servers"]["teleclaude"]["command"] == real()[0]
    assert len(hook_commands(load(home / ".claude" / "settings.json")["hooks"]["Stop"])) == 1
    assert "/old/venv" not in (home / ".codex" / "hooks.json").read_text()


def test_a_teleclaude_server_the_user_registered_is_kept(home, run):
    (home / ".claude.json").write_text('{"mcpServers": {"teleclaude": {"command": "/my/teleclaude"}}}')
    before = (home / ".claude.json").read_bytes()
    code, out = run("install", "--claude")
    assert code == 0 and "kept" in out
    assert (home / ".claude.json").read_bytes() == before
    run("install", "--claude", "--uninstall")
    assert (home / ".claude.json").read_bytes() == before


# --- broken configs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        (".gemini/settings.json", '{"theme": "dark",}'),
        (".claude.json", "[]"),
        (".codex/config.toml", "model = \n"),
        (".claude/settings.json", '{"hooks": {"Stop": {"not": "a list"}}}'),
    ],
)
def test_a_broken_config_is_an_error_and_nothing_is_written(home, run, relative, text, snapshot):
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    before = snapshot(home)
    code, out = run("install", *ALL)
    assert (code, first_line(out)) == (1, "ERROR: INVALID_CONFIG")
    assert str(path) in out
    assert snapshot(home) == before


def test_a_codex_config_that_cannot_take_the_table_is_refused(home, run):
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('mcp_servers = { other = { command = "x" } }\n')
    code, out = run("install", "--codex")
    assert (code, first_line(out)) == (1, "ERROR: INVALID_CONFIG")
    assert "[mcp_servers.teleclaude]" in out  # what to add by hand
    assert config.read_text() == 'mcp_servers = { other = { command = "x" } }\n'


# --- as a process ------------------------------------------------------------------------------------


def test_install_as_a_process(home, run_process, tmp_path):
    done = run_process("install", "--gemini", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert first_line(done.stdout).startswith("OK: installed teleclaude for gemini")
    assert tomllib.loads((home / ".gemini" / "commands" / "next-build.toml").read_text())["prompt"]
    done = run_process("install", "--gemini", "--uninstall", cwd=tmp_path)
    assert done.returncode == 0 and list(home.iterdir()) == []


# --- claude's status line: the usage it reports, recorded; a user's own status line kept working --------

STATUS_INPUT = {  # what Claude Code 2.1.197 gives a status-line command, for a subscriber (a part of it)
    "session_id": "s1",
    "cwd": "/home/dev/project",
    "model": {"id": "claude-opus-4-8", "display_name": "Opus 4.8"},
    "rate_limits": {
        "five_hour": {"used_percentage": 83.0, "resets_at": 4102444800},  # 2100-01-01
        "seven_day": {"used_percentage": 41.5, "resets_at": 4103049600},
    },
}


def status_line(home: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    """Run the installed status line as Claude Code runs it: its command string through /bin/sh."""
    command = load(home / ".claude" / "settings.json")["statusLine"]["command"]
    return subprocess.run(
        ["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def recorded_usage(home: Path) -> dict[str, float]:
    from datetime import UTC, datetime

    from teleclaude.adapters.store import AvailabilityStore

    windows = AvailabilityStore(home / "teleclaude.db").usage(datetime(2026, 1, 1, tzinfo=UTC))
    return {w.window: w.used_percent for w in windows.get("claude", ())}


def test_claudes_status_line_records_its_usage_and_uninstall_takes_it_away(home, run):
    (home / ".claude").mkdir()
    before = b'{\n  "model": "opus"\n}\n'
    (home / ".claude" / "settings.json").write_bytes(before)
    assert run("install", "--claude")[0] == 0
    shown = status_line(home, json.dumps(STATUS_INPUT))
    assert shown.returncode == 0 and re.fullmatch(
        r"Opus 4.8 · 5h 83% ↺ [^·]+ · 7d 42% ↺ [^·]+\n", shown.stdout
    )
    assert recorded_usage(home) == {"5h": 83.0, "7d": 41.5}
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert (home / ".claude" / "settings.json").read_bytes() == before


def test_a_users_own_status_line_keeps_working_inside_ours_and_comes_back_on_uninstall(home, run):
    script = home / "bin" / "my-status"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\ncat > "$HOME/their-input.json"\necho "my branch | my model"\n')
    script.chmod(0o755)
    (home / ".claude").mkdir()
    theirs = {"type": "command", "command": f"{script} --short", "padding": 0}
    before = (json.dumps({"statusLine": theirs, "model": "opus"}, indent=2) + "\n").encode()
    (home / ".claude" / "settings.json").write_bytes(before)
    code, out = run("install", "--claude")
    assert code == 0 and "statusLine" in out
    ours = load(home / ".claude" / "settings.json")["statusLine"]
    assert ours["padding"] == 0 and ours["command"] != theirs["command"]
    stdin = json.dumps(STATUS_INPUT)
    shown = status_line(home, stdin)
    assert (shown.returncode, shown.stdout) == (0, "my branch | my model\n")  # theirs, as before
    assert (home / "their-input.json").read_text() == stdin  # with the same input claude gave
    assert recorded_usage(home) == {"5h": 83.0, "7d": 41.5}  # and the usage recorded all the same
    code, out = run("install", "--claude")
    assert code == 0 and "0 created, 0 updated" in first_line(out)  # installed again: the same
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert (home / ".claude" / "settings.json").read_bytes() == before


def test_a_status_line_the_user_changed_after_install_is_theirs(home, run):
    assert run("install", "--claude")[0] == 0
    settings_file = home / ".claude" / "settings.json"
    settings = load(settings_file)
    settings["statusLine"] = {"type": "command", "command": "echo mine"}
    settings_file.write_text(json.dumps(settings))
    code, out = run("install", "--claude")  # installed again: theirs runs inside ours
    assert code == 0
    assert status_line(home, "{}").stdout == "mine\n"
    assert run("install", "--claude", "--uninstall")[0] == 0
    assert load(settings_file)["statusLine"] == {"type": "command", "command": "echo mine"}


def test_the_status_line_prints_a_line_whatever_its_input_or_theirs_does(home, run):
    assert run("install", "--claude")[0] == 0
    for stdin in ("", "not json", "[]", '{"rate_limits": {"five_hour": {"used_percentage": "x"}}}'):
        shown = status_line(home, stdin)
        assert (shown.returncode, shown.stdout) == (0, "claude\n")
    assert recorded_usage(home) == {}
    settings_file = home / ".claude" / "settings.json"
    settings = load(settings_file)
    settings["statusLine"] = {"type": "command", "command": "exit 3"}
    settings_file.write_text(json.dumps(settings))
    assert run("install", "--claude")[0] == 0
    shown = status_line(home, json.dumps(STATUS_INPUT))  # theirs fails: ours is shown
    assert shown.returncode == 0 and shown.stdout.startswith("Opus 4.8 · 5h 83% ↺ ")


def test_a_status_line_of_theirs_that_hangs_is_ended_with_its_children_and_ours_shown(home, run):
    settings_file = home / ".claude" / "settings.json"
    settings_file.parent.mkdir()
    settings_file.write_text(
        json.dumps({"statusLine": {"type": "command", "command": "sleep 31.4159; echo late"}})
    )
    assert run("install", "--claude")[0] == 0
    shown = status_line(home, json.dumps(STATUS_INPUT))
    assert shown.returncode == 0 and shown.stdout.startswith("Opus 4.8 · 5h 83%")
    left = subprocess.run(["pgrep", "-f", "sleep 31.4159"], capture_output=True, text=True, check=False)
    assert left.stdout == ""  # no process of theirs left behind


def test_project_scope_installs_no_status_line(home, repo, run):
    assert run("install", "--claude", "--scope", "project", "--cwd", str(repo))[0] == 0
    assert "statusLine" not in load(repo / ".claude" / "settings.json")
