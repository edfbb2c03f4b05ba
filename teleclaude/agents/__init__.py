"""Every agent CLI teleclaude drives, one driver module each (claude.py, gemini.py, codex.py, opencode.py):
the registry.

The ground floor of the house: pure, and importing nothing of teleclaude outside this package, so config,
planner, runtime and setup may all read it. Every list of agent names, `--agent` choice and per-agent table
derives from `NAMES` and `PROFILES`.

`NAMES` and the hooks' tables cost nothing; `PROFILES` imports the drivers (and `dataclasses`) when it is
first read, so that a hook that only checks its `--agent` pays for no driver; `driver(name)` imports that one
driver alone (a hook runs for one CLI).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from teleclaude.agents.profile import AgentProfile

    PROFILES: Mapping[str, AgentProfile]

# in the default matrix's order of preference: PROFILES' order (tests/frontends/test_hook_imports.py holds
# them equal, and the tables below equal to the drivers')
NAMES: tuple[str, ...] = ("claude", "gemini", "codex", "opencode")

# What the hooks ask of a driver on every event, known without importing one: the `teleclaude hook` verbs its
# CLI runs (`Hooks.events`) and where its usage is reported (`UsageReport.source`'s value), when it is.
HOOK_VERBS: dict[str, tuple[str, ...]] = {
    "claude": ("stop", "stop-failure", "tool-use", "prompt"),
    "gemini": ("stop", "tool-use", "prompt"),
    "codex": ("stop", "prompt", "tool-use"),
    "opencode": ("stop", "stop-failure", "tool-use", "prompt"),
}
USAGE_SOURCES: dict[str, str] = {"claude": "statusline", "codex": "transcript"}
# and those whose stop input's `prompt` is what the model was sent (`Hooks.stop_prompt`)
STOP_PROMPTS: tuple[str, ...] = ("gemini",)
# and where a worker's stop hook reads what its session used (`TokenReport`): the file its stop input names
# (`transcript_path`), or the CLI's own database
SPEND_SOURCES: dict[str, str] = {
    "claude": "transcript",
    "gemini": "transcript",
    "codex": "transcript",
    "opencode": "database",
}
# and of those, the drivers whose transcript is read line by line with agents/transcripts.py alone (a worker's
# stop reads only what is new in it, without the driver): the reader of one line of it there
TRANSCRIPT_LINES: dict[str, str] = {
    "claude": "assistant_usage",
    "gemini": "chat_tokens",
    "codex": "rollout_totals",
}
# and of those whose record is a database of the CLI's (`DatabaseRecord`), the ones whose answers
# agents/answers.py reads: the database's file in the user's data folder
SPEND_DATABASES: dict[str, str] = {"opencode": "opencode/opencode.db"}
# and of the drivers whose usage is in that transcript (USAGE_SOURCES), those whose reader is a plain one of
# agents/rollout.py (a worker's stop and prompt see whether it is news without the driver): its name there
USAGE_LINES: dict[str, str] = {"codex": "rollout_limits"}


def __getattr__(name: str) -> object:
    if name != "PROFILES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from teleclaude.agents import claude, codex, gemini, opencode

    profiles = {p.name: p for p in (claude.PROFILE, gemini.PROFILE, codex.PROFILE, opencode.PROFILE)}
    globals()["PROFILES"] = profiles
    return profiles


def driver(name: str) -> AgentProfile:
    """The profile of the driver `name` (one of `NAMES`, else KeyError), importing no other driver."""
    if name not in NAMES:
        raise KeyError(name)
    profiles = globals().get("PROFILES")
    if profiles is not None:
        return profiles[name]  # type: ignore[no-any-return]
    from importlib import import_module

    profile: AgentProfile = import_module(f"{__name__}.{name}").PROFILE
    return profile
