"""The agent CLIs' hooks (`teleclaude hook stop|stop-failure|tool-use|prompt`): each reads its CLI's JSON on
stdin and tells the runtime of its worker's session (a turn end, the error that ended it, a tool use, the
file where its CLI records the turn). They run on every stop and tool call, so they import little: the
runtime only inside a worker's session. `teleclaude.cli` runs them through `run`, without argparse."""

from __future__ import annotations

import os

# the hooks whose `--agent` defaults to the first of `agents(verb)` (the others' to none: read from the input)
FIRST_AGENT_BY_DEFAULT = ("stop-failure", "prompt", "statusline")


def agents(verb: str) -> tuple[str, ...]:
    """The `--agent` choices of `teleclaude hook VERB`: the agent CLIs whose driver runs it (every one for
    `stop` and `tool-use`; for `statusline`, those whose usage is read from it)."""
    from teleclaude.agents import NAMES

    return tuple(name for name in NAMES if runs(verb, name))


def runs(verb: str, agent: str) -> bool:
    """Whether `agent` is one of `agents(verb)`, from the registry's tables: no driver imported."""
    from teleclaude.agents import HOOK_VERBS, NAMES, USAGE_SOURCES

    if agent not in NAMES:
        return False
    if verb in ("stop", "tool-use"):
        return True
    if verb == "statusline":
        return USAGE_SOURCES.get(agent) == "statusline"
    return verb in HOOK_VERBS[agent]


def first_agent(verb: str) -> str | None:
    """The first of `agents(verb)` (the default `--agent` of `FIRST_AGENT_BY_DEFAULT`)."""
    from teleclaude.agents import NAMES

    return next((name for name in NAMES if runs(verb, name)), None)


def tool_use_wanted() -> bool:
    """Whether `hook tool-use` records anything here: only for a worker started by this machine's runtime
    (TELECLAUDE_SESSION_ID), not one on another computer (TELECLAUDE_TURN_END_TO_PANE; tool.py)."""
    return bool(os.environ.get("TELECLAUDE_SESSION_ID")) and not os.environ.get("TELECLAUDE_TURN_END_TO_PANE")


def run(verb: str, agent: str | None, then: str | None = None) -> int:
    """`teleclaude hook VERB` (one of `FIRST_AGENT_BY_DEFAULT`, `stop`, `tool-use`), its arguments checked."""
    if verb == "stop":
        from teleclaude.runtime.hooks import stop

        return stop.main(agent)
    if verb == "tool-use":
        from teleclaude.runtime.hooks import tool

        return tool.main(agent)
    assert agent is not None
    if verb == "prompt":
        from teleclaude.runtime.hooks import prompt

        return prompt.main(agent)
    if verb == "stop-failure":
        from teleclaude.runtime.hooks import failure

        return failure.main(agent)
    from teleclaude.runtime.hooks import statusline

    return statusline.main(agent, then)
