"""A throwaway HOME in which a real agent CLI starts unattended and talks to the scripted model server.

Each CLI's first start asks questions a detached worker cannot answer. The keys that pre-answer them were read
from the CLI itself (Claude Code 2.1.197's bundled JavaScript, see tests/realcli/NOTES.md), not guessed:
- onboarding (theme, login): `hasCompletedOnboarding` in `~/.claude.json`;
- "Detected a custom API key … Do you want to use this API key?": the key's last 20 characters in
  `customApiKeyResponses.approved` of `~/.claude.json`;
- "Do you trust the files in this folder?": `projects[PATH].hasTrustDialogAccepted` in `~/.claude.json` (a
  parent folder's trust covers its subfolders, so the project root covers `trees/<slug>`);
- the "Bypass Permissions mode" warning: `skipDangerousModePermissionPrompt` in `~/.claude/settings.json`;
- as root, `--dangerously-skip-permissions` exits at once unless `IS_SANDBOX=1` is in the environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

CLAUDE_API_KEY = "sk-ant-api03-teleclaude-scripted-model-server"  # dummy: the scripted server takes any


def claude_environment(server_url: str, api_key: str = CLAUDE_API_KEY) -> dict[str, str]:
    """What a claude worker needs in its environment to use the scripted server and stay quiet."""
    env = {
        "ANTHROPIC_BASE_URL": server_url,
        "ANTHROPIC_API_KEY": api_key,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry, error reports, release notes
    }
    if hasattr(os, "getuid") and os.getuid() == 0:
        env["IS_SANDBOX"] = "1"  # else, as root: "--dangerously-skip-permissions cannot be used with root…"
    return env


def prepare_claude_home(
    home: Path, trusted: Iterable[Path], version: str = "", api_key: str = CLAUDE_API_KEY
) -> None:
    """Pre-answer claude's first-run dialogs in `home` (merged into what is there)."""
    state_file = home / ".claude.json"
    state = _load(state_file)
    state.update({"hasCompletedOnboarding": True, "theme": "dark"})
    if version:
        state["lastOnboardingVersion"] = version
        state["lastReleaseNotesSeen"] = version
    approved = state.setdefault("customApiKeyResponses", {}).setdefault("approved", [])
    state["customApiKeyResponses"].setdefault("rejected", [])
    if api_key[-20:] not in approved:
        approved.append(api_key[-20:])
    projects = state.setdefault("projects", {})
    for folder in trusted:
        entry = projects.setdefault(str(Path(folder).resolve()), {})
        entry.update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
    _save(state_file, state)
    settings_file = home / ".claude" / "settings.json"
    settings = _load(settings_file)
    settings["skipDangerousModePermissionPrompt"] = True
    _save(settings_file, settings)


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(path: Path, data: Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
