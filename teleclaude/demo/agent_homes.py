"""A throwaway HOME in which a real agent CLI starts unattended and talks to the scripted model server.

Each CLI's first start asks questions a detached worker cannot answer. The keys were read from the CLI itself
(Claude Code 2.1.197's bundled JavaScript, see tests/realcli/NOTES.md), not guessed. Two are the user's login,
settled by their own first start, and pre-answered here (`prepare_claude_login`):
- onboarding (theme, login): `hasCompletedOnboarding` in `~/.claude.json`;
- "Detected a custom API key … Do you want to use this API key?": the key's last 20 characters in
  `customApiKeyResponses.approved` of `~/.claude.json`.
The others are teleclaude's to answer, and `teleclaude install` / `teleclaude init` do (the claude
driver's `unattended` and `project_trust`, written by `teleclaude.setup.install.unattended`): workspace
trust for the project root, the "Bypass Permissions mode" warning, project `.mcp.json` approval. As root,
`--dangerously-skip-permissions` exits at once unless `IS_SANDBOX=1` is in the environment
(`claude_environment`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from teleclaude.agents import NAMES

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


# --- Gemini CLI 0.61.0 -------------------------------------------------------------------------------------
# - "How would you like to authenticate for this project?": `security.auth.selectedType` in
#   `~/.gemini/settings.json` (`gemini-api-key` with GEMINI_API_KEY in the environment);
# - folder trust: the runtime starts gemini workers with GEMINI_CLI_TRUST_WORKSPACE=true (the profile's env);
# - no update check: by default each start asks the npm registry for its newest release (and would install it
#   over an npm-global install), as claude's DISABLE_AUTOUPDATER and opencode's `autoupdate` say for them.

GEMINI_API_KEY = "teleclaude-scripted-gemini-key"  # dummy: the scripted server takes any


def gemini_environment(server_url: str) -> dict[str, str]:
    return {"GEMINI_API_KEY": GEMINI_API_KEY, "GOOGLE_GEMINI_BASE_URL": server_url}


def prepare_gemini_home(home: Path) -> None:
    settings_file = home / ".gemini" / "settings.json"
    settings = _load(settings_file)
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
    settings.setdefault("privacy", {})["usageStatisticsEnabled"] = False
    settings.setdefault("general", {}).update(enableAutoUpdate=False, enableAutoUpdateNotification=False)
    _save(settings_file, settings)


# --- Codex CLI 0.169.0 -------------------------------------------------------------------------------------
# - "Welcome to Codex … Sign in with ChatGPT": a model provider of its own with an API key in the environment;
# - "Trust this folder?": the runtime passes `-c projects={…}` for the worker's folders (AgentProfile);
# - "Hooks need review": the runtime passes --dangerously-bypass-hook-trust;
# - "Approaching rate limits / Switch to …?": `[notice] hide_rate_limit_model_nudge = true`.

CODEX_API_KEY = "sk-teleclaude-scripted-openai-key"


def codex_environment() -> dict[str, str]:
    return {"OPENAI_API_KEY": CODEX_API_KEY}


def prepare_codex_home(home: Path, server_url: str) -> None:
    """Written before `teleclaude install` adds its tables (top-level keys must precede every table)."""
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        'model = "gpt-5.1-codex"\n'
        'model_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{server_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n\n'
        "[notice]\n"
        "hide_rate_limit_model_nudge = true\n\n" + (config.read_text() if config.is_file() else "")
    )


# --- opencode 1.18.33 --------------------------------------------------------------------------------------
# - no login: a provider of its own (`@ai-sdk/openai-compatible`, bundled) with a dummy key;
# - at each start it installs `@opencode-ai/plugin` into each of its config folders with npm (64 MB; only the
#   plugin's types: teleclaude's plugin imports nothing of it), unless the folder's package-lock.json lists
#   it and node_modules exists: a throwaway HOME says so, and starts in seconds, offline too;
# - its TUI redraws at up to 60 fps while a spinner turns: ~0.17 s of CPU a second while it works, ~0.04 at
#   its prompt (a blinking cursor), against ~0.02 and ~0.02 with its animations off (its command palette's
#   "Disable animations", kept in its state folder's kv.json, the user's choice for every opencode they run).
#   A throwaway HOME has them off.

OPENCODE_MODEL = "scripted/scripted-model"


def plugin_dependency_stub(folder: Path, version: str = "1.18.33") -> None:
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": version}}}}
    _save(folder / "package-lock.json", lock)


def prepare_opencode_home(home: Path, server_url: str) -> None:
    folder = home / ".config" / "opencode"
    config = _load(folder / "opencode.json")
    config.setdefault("provider", {})["scripted"] = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Scripted",
        "options": {"baseURL": f"{server_url}/v1", "apiKey": "teleclaude-scripted-key"},
        "models": {"scripted-model": {"name": "Scripted Model", "tool_call": True}},
    }
    config |= {
        "model": OPENCODE_MODEL,
        "small_model": OPENCODE_MODEL,
        "autoupdate": False,
        "share": "disabled",
    }
    _save(folder / "opencode.json", config)
    plugin_dependency_stub(folder)
    choices = opencode_choices(home)
    _save(choices, _load(choices) | {"animations_enabled": False})


def opencode_choices(home: Path) -> Path:
    """The TUI's remembered choices (its command palette's toggles, theme) in the default state folder."""
    return home / ".local" / "state" / "opencode" / "kv.json"


def prepare_home(agent: str, home: Path, server_url: str) -> dict[str, str]:
    """Pre-answer in `home` what the user's own first start of `agent` settles, pointed at the scripted
    server; returns what the agent's workers need in their environment (before `teleclaude install`, which
    adds its own entries to the same files)."""
    if agent == "claude":
        prepare_claude_login(home)
        return claude_environment(server_url)
    if agent == "gemini":
        prepare_gemini_home(home)
        return gemini_environment(server_url)
    if agent == "codex":
        prepare_codex_home(home, server_url)
        return codex_environment()
    if agent == "opencode":
        prepare_opencode_home(home, server_url)
        return {}
    raise ValueError(f"no home for {agent!r}: one of {', '.join(NAMES)}")
