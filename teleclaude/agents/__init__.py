"""Every agent CLI teleclaude drives, one driver module each (claude.py, gemini.py, codex.py, opencode.py):
the registry.

The ground floor of the house: pure, and importing nothing of teleclaude outside this package, so config,
planner, runtime and setup may all read it. Every list of agent names, `--agent` choice and per-agent table
derives from `NAMES` and `PROFILES`.
"""

from __future__ import annotations

from collections.abc import Mapping

from teleclaude.agents import claude, codex, gemini, opencode
from teleclaude.agents.profile import AgentProfile

# in the default matrix's order of preference
PROFILES: Mapping[str, AgentProfile] = {
    p.name: p for p in (claude.PROFILE, gemini.PROFILE, codex.PROFILE, opencode.PROFILE)
}
NAMES: tuple[str, ...] = tuple(PROFILES)
