"""The agent CLIs' hooks (`teleclaude hook stop|stop-failure|tool-use|prompt`): each reads its CLI's JSON on
stdin and tells the runtime of its worker's session (a turn end, the error that ended it, a tool use, the
file where its CLI records the turn). They run on every stop and tool call, so they import little: the
runtime only inside a worker's session. `teleclaude.cli` runs them through `run`, without argparse."""

from __future__ import annotations

import os
import sys

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
    (TELECLAUDE_SESSION_ID), not one on another computer (TELECLAUDE_TURN_END_TO_PANE; tool.py), unless it
    is a sandboxed one here (TELECLAUDE_CHANNEL: its session's folder)."""
    if not os.environ.get("TELECLAUDE_SESSION_ID"):
        return False
    return not os.environ.get("TELECLAUDE_TURN_END_TO_PANE") or bool(os.environ.get("TELECLAUDE_CHANNEL"))


def run(verb: str, agent: str | None, then: str | None = None) -> int:
    """`teleclaude hook VERB` (one of `FIRST_AGENT_BY_DEFAULT`, `stop`, `tool-use`), its arguments checked."""
    if verb == "stop":
        try:
            raw: str | None = sys.stdin.read()
        except (OSError, ValueError):  # not UTF-8, say: stop.py warns of what it can read then
            raw = None
        if raw is not None and quiet_stop(raw, agent):
            return 0
        from io import StringIO

        from teleclaude.runtime.hooks import stop

        return stop.main(agent, None if raw is None else StringIO(raw))
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


# planner/core/layout.py's TODOS, ROADMAP and TREES, spelled out: layout imports `re`
TODOS, TREES = "todos", "trees"
ROADMAP = (TODOS, "roadmap.md")
# the variables that send git elsewhere than the folder's repository (git.py's `_own_environment`)
GIT_ELSEWHERE = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_WORK_TREE")


def quiet_stop(raw: str, agent: str | None) -> bool:
    """A stop hook (stop.py) with nothing to record that would let the stop through, seen without stop.py's
    modules (the git adapter, dataclasses): not a worker's, no usage to read from the CLI's transcript, and
    `lets_through`. False for anything else, and for input that is not plainly good: stop.py then decides."""
    if os.environ.get("TELECLAUDE_SESSION_ID"):
        if os.environ.get("TELECLAUDE_CHANNEL") and os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):
            return sandboxed_stop(raw, agent)  # CHANNEL of adapters/sandbox.py: a worker in bubblewrap
        return worker_stop(raw, agent)
    data = _stop_input(raw)
    return data is not None and not _reads_usage(data, agent) and lets_through(data)


def worker_stop(raw: str, agent: str | None) -> bool:
    """A local worker's stop (stop.py) that lets the stop through and has only its turn's end to record,
    and what it used when its CLI's transcript says it line by line, recorded here (record.py
    `end_turn_plainly`) without stop.py's modules: its `--agent` named, no usage to read from its CLI's
    record of the session, no prompt to judge, and `lets_through`. False for anything else (a worker on
    another computer or in a sandbox, which marks its pane or channel): stop.py then decides and records, as
    it does when the plain record cannot."""
    if os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # tmux.py's
        return False
    found = _only_its_turn_end(raw, agent, sandboxed=False)
    if found is None:
        return False
    from teleclaude.runtime.hooks.record import end_turn_plainly

    return end_turn_plainly(found[0] or None, found[1])


def sandboxed_stop(raw: str, agent: str | None) -> bool:
    """A sandboxed worker's stop (stop.py) that lets the stop through and has only its turn's end to mark
    (and what it used, as `worker_stop` reads it), as `worker_stop` sees it: marked here in its channel
    folder (record.py `mark_turn_end_plainly`) without stop.py's modules, the tmux or sandbox adapters. False
    for anything else: stop.py then decides and marks, as it does when the folder refused the mark."""
    found = _only_its_turn_end(raw, agent, sandboxed=True)
    if found is None:
        return False
    from teleclaude.runtime.hooks.record import mark_turn_end_plainly

    return mark_turn_end_plainly(found[0] or None, found[1])


def _only_its_turn_end(raw: str, agent: str | None, sandboxed: bool) -> tuple[tuple[str, ...], str] | None:
    """A worker's stop with only its turn's end to record: (what it used when its CLI's transcript says it
    line by line, `agents.TRANSCRIPT_LINES`: (agent, the transcript); or its CLI's database of answers,
    `agents.SPEND_DATABASES`: (agent, the database, the CLI's id of the session); else (); the prompt its
    CLI's stop input says the model was sent, `agents.STOP_PROMPTS`, else ""). None for anything else (its
    `--agent` not named, what it used in a record its driver must read, a stop `lets_through` does not let
    through, usage in its CLI's transcript its driver must read or, for a local worker, news: record.py
    `usage_on_record`; a sandboxed worker marks it, `mark_turn_end_plainly`)."""
    from teleclaude.agents import (
        NAMES,
        SPEND_DATABASES,
        SPEND_SOURCES,
        STOP_PROMPTS,
        TRANSCRIPT_LINES,
        USAGE_LINES,
    )

    if agent not in NAMES:
        return None
    data = _stop_input(raw)
    if data is None:
        return None
    prompt = data.get("prompt") if agent in STOP_PROMPTS else None  # stop.py's `parse_event`
    prompt = prompt if isinstance(prompt, str) else ""
    reads_usage = _reads_usage(data, agent)
    if reads_usage and (agent not in USAGE_LINES or agent not in TRANSCRIPT_LINES):
        return None
    spend, transcript = SPEND_SOURCES.get(agent), data.get("transcript_path")  # what record_spend would read
    reading: tuple[str, ...] = ()
    if spend == "database":
        conversation, name = data.get("session_id"), SPEND_DATABASES.get(agent)
        if name is None or not isinstance(conversation, str) or not conversation:
            return None
        from teleclaude.agents.answers import data_file

        where = data_file(os.environ, name)
        reading = (agent, where, conversation) if where else ()  # record_spend reads no file of no name
    if spend == "transcript" and isinstance(transcript, str):
        if agent not in TRANSCRIPT_LINES:
            return None
        reading = (agent, transcript) if transcript else ()  # record_spend reads no file of no name
    if not lets_through(data):
        return None
    if reads_usage and not sandboxed:
        from teleclaude.runtime.hooks.record import usage_on_record

        if not usage_on_record(agent, data["transcript_path"]):
            return None
    return reading, prompt


def _stop_input(raw: str) -> dict | None:
    """The stop hook's input, a JSON object (agents/jsonin.py, as stop.py's reader reads it); None else."""
    from teleclaude.agents.jsonin import loads

    try:
        data = loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _reads_usage(data: dict, agent: str | None) -> bool:
    """Whether stop.py would read the CLI's usage from the transcript the input names (record.py)."""
    from teleclaude.agents import USAGE_SOURCES

    transcript = data.get("transcript_path")
    reads_usage = agent is None or USAGE_SOURCES.get(agent) == "transcript"  # None: stop.py names the CLI
    return reads_usage and isinstance(transcript, str) and os.path.isfile(transcript)


def lets_through(data: dict) -> bool:
    """Whether stop.py's `decide` lets this stop through, seen without its modules: stop_hook_active, or its
    folder in no teleclaude project (no `.git` above it, or a main checkout without a roadmap), or in a
    project's main checkout (not trees/) whose todos/{slug}/ folders have no uncommitted file. False for
    anything else (a worktree, something to refuse, a folder that is not plainly good): stop.py decides."""
    cwd = data.get("cwd", os.getcwd())
    if not isinstance(cwd, str) or not cwd:
        return False
    if data.get("stop_hook_active") is True:
        return True
    folder = start = os.path.join(os.getcwd(), cwd)  # as git.find_repo walks up from it
    if not os.path.isdir(folder):
        return True
    while True:
        dot_git = os.path.join(folder, ".git")
        if os.path.isdir(dot_git):
            return not os.path.isfile(os.path.join(folder, *ROADMAP)) or _committed(folder, start)
        if os.path.lexists(dot_git):  # a worktree's (or a submodule's) `.git` file
            return os.path.isfile(dot_git) and _clean_tree(folder, start)
        parent = os.path.dirname(folder)
        if parent == folder:
            return True
        folder = parent


def _clean_tree(folder: str, cwd: str) -> bool:
    """`folder` (holding `cwd`) is an item's worktree, trees/{slug} of a teleclaude project's main checkout,
    with no change at all: what stop.py lets through there (a build worker's stop, at every turn's end),
    found from its `.git` file as git.py `find_repo` finds the main checkout, and one `git status`. False for
    anything else (a change, a submodule, a folder that is not plainly one): stop.py decides."""
    if cwd != os.path.normpath(cwd) or any(os.environ.get(name) for name in GIT_ELSEWHERE):
        return False
    git_dir = _pointed(os.path.join(folder, ".git"), "gitdir:")
    common = _pointed(os.path.join(git_dir, "commondir")) if git_dir else None
    if not git_dir or not common or common == git_dir:
        return False
    root = os.path.dirname(common)
    if not os.path.isfile(os.path.join(root, *ROADMAP)):
        return True  # not a teleclaude project
    if folder != os.path.join(root, TREES, os.path.basename(folder)):
        return False
    from teleclaude.adapters.gitstatus import changed

    try:
        changes = changed(folder)
    except OSError:
        return False
    return changes == ()


def _pointed(path: str, prefix: str = "") -> str | None:
    """The folder a git pointer file names (`gitdir: X` of a `.git` file, a worktree's `commondir`), resolved
    from the file's own folder as git.py resolves it; None when it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not text.startswith(prefix):
        return None
    target = os.path.realpath(os.path.join(os.path.dirname(path), text.removeprefix(prefix).strip()))
    return target if os.path.isdir(target) else None


def _committed(root: str, cwd: str) -> bool:
    """`cwd` is in the main checkout `root` (not in trees/) and its todos/{slug}/ folders have no uncommitted
    file: what stop.py lets through there, found with one `git status` run without `subprocess`."""
    if cwd != os.path.normpath(cwd) or any(os.environ.get(name) for name in GIT_ELSEWHERE):
        return False  # what pathlib would make of it, or where git would go, is stop.py's to say
    if os.path.relpath(cwd, root).split(os.sep)[0] == TREES:
        return False
    from teleclaude.adapters.gitstatus import changed

    try:
        changes = changed(root, TODOS)
    except OSError:
        return False
    return changes is not None and not any(path.count("/") >= 2 for path in changes)
