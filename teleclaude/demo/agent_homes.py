"""A throwaway HOME in which a real agent CLI starts unattended and talks to the scripted model server.

Each CLI's first start asks questions a detached worker cannot answer. The keys were read from the CLI itself
(Claude Code 2.1.197's bundled JavaScript, see tests/realcli/NOTES.md), not guessed. Two are the user's login,
settled by their own first start, and pre-answered here (`prepare_claude_login`):
- onboarding (theme, login): `hasCompletedOnboarding` in `~/.claude.json`;
- "Detected a custom API key … Do you want to use this API key?": the key's last 20 characters in
  `customApiKeyResponses.approved` of `~/.claude.json`.
The others are teleclaude's to answer, and `teleclaude install` / `teleclaude init` do
(`teleclaude.setup.install.claude_unattended`): workspace trust for the project root, the "Bypass
Permissions mode" warning, project `.mcp.json` approval. As root, `--dangerously-skip-permissions` exits at
once unless `IS_SANDBOX=1` is in the environment (`claude_environment`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
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


def prepare_claude_login(home: Path, version: str = "", api_key: str = CLAUDE_API_KEY) -> None:
    """What a user's own first claude start settles, not teleclaude's business: onboarding is done and the
    API key in the environment is approved (merged into what is there)."""
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
    _save(state_file, state)


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(path: Path, data: Mapping) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
